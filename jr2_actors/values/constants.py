"""Every duration and bound the decisions fix, in one place (DESIGN.md: "Time").

Change a number here and only here; each names the decision it comes from.
"""

from __future__ import annotations

from jr2_actors.values.backoff import Backoff

# ADR-0063: a watch asks the server to close it after this long, so the server ends first.
WATCH_TIMEOUT_SECONDS = 240
# The client-side read timeout on a watch sits this far above timeoutSeconds.
WATCH_READ_MARGIN_SECONDS = 30.0
# dagr T107: a watch silent this long is presumed dead and forces a re-list.
STALL_BOUND_SECONDS = 90.0
# dagr T107 / ADR-0063: the watch retries at once, then 250 ms doubling to 30 s, +0–20 % jitter.
WATCH_BACKOFF = Backoff(initial=0.25, cap=30.0, jitter=0.2, immediate_first=True)
# The watch's failure bound: past it every waiter is told (and it keeps trying, CONTRACTS.md §2).
WATCH_MAX_FAILURES = 12
WATCH_MAX_FAILURE_SECONDS = 300.0
# ADR-0063 (every call is bounded): a list not answered in this long is a failed list. The client's read
# timeout bounds each read of the answer, not the whole of a slowly dribbled one.
WATCH_LIST_DEADLINE_SECONDS = 90.0
# A clean end of a watch younger than this, with nothing on it, counts as a failure, not a free resume:
# a server that closes every watch at once would otherwise be re-opened in a hot loop.
WATCH_MIN_FREE_RESUME_SECONDS = 1.0

# ADR-0063: concurrent writes are capped (8–16); 12 by default.
WRITE_CAP_DEFAULT = 12
WRITE_CAP_MIN = 8
WRITE_CAP_MAX = 16
# Connections kept for reads, beside the write cap and the one watch.
READ_POOL_SIZE = 4
RENEWAL_LANE_THREADS = 4  # The renewal lane's threads; one fell behind 5,000 first renewals

# Every non-watch call: connect and read timeouts (seconds).
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 30.0

# A non-watch answer larger than this is refused rather than held in memory.
MAX_BODY_BYTES = 64 * 1024 * 1024
# One watch line larger than this is an oversized frame (etcd holds objects up to ~1.5 MiB).
MAX_FRAME_BYTES = 4 * 1024 * 1024
# A watch's chunk-size line (its extensions included; RFC 9112 §7.1), and its trailer section, longer than
# this is refused: the stream is not HTTP/1.1 chunked framing and is reconnected (we de-chunk it).
MAX_CHUNK_LINE_BYTES = 4096
# A kubeconfig larger than this is refused unread.
MAX_KUBECONFIG_BYTES = 1024 * 1024

# ADR-0064: a write of a Workspace's Sandbox or Secret that met a transient answer (5xx, 429, 409, no
# answer, a 403 within FORBIDDEN_GRACE_SECONDS) is tried again on this schedule, for as long as the
# Workspace lives; it never faults.
WRITE_RETRY_BACKOFF = Backoff(initial=0.5, cap=30.0, jitter=0.2)
# CONTRACTS.md §2: an API server that restarts answers 403 for a few milliseconds. A write (or a delete)
# answered 403 is retried on its backoff while its 403s in a row have lasted less than this; past it, the
# 403 is RBAC's or a terminating namespace's refusal (a write faults, a delete is left to the idle GC).
FORBIDDEN_GRACE_SECONDS = 30.0
# A run's actor that dies (our bug, or a persist the store could not take) is restored from its last row
# this many times in one process; past that its row is ended `error`, so one poisoned run cannot crash-loop
# the pod, and its Sandboxes are left to the idle GC (their Leases stop).
RUN_REVIVALS = 3
# A delete refused only because the Sandbox's version moved (the operator's status, a late watch) is read
# again and retried while it is still ours, this many times in one attempt (ADR-0064: deleted at once).
DELETE_VERSION_REREADS = 3
# ADR-0064: a delete the teardown owes (what never ran, a normal teardown) that met a transient answer is
# retried on this schedule until it lands or the watch says the Sandbox is gone — an API-server outage
# costs at most one cap after it ends, never the idle GC's 30 minutes of a node. The run's row stays live
# until then, so a restart retries it too.
DELETE_RETRY_BACKOFF = Backoff(initial=0.5, cap=10.0, jitter=0.2)

# An attach that no Harness answered (503, 502, 504, no answer) is tried again this often, on this schedule
# (about 15 s in all): an evicted pod's Harness is gone before the watch says Lost, and a restarting one comes
# back; the watch's Lost or Gone ends it as a loss. Past it the Workspace faults with the Harness's words.
ATTACH_ATTEMPTS = 5
ATTACH_RETRY_BACKOFF = Backoff(initial=0.5, cap=8.0, jitter=0.2)

# ADR-0063 / ADR-0064: the Lease renewal interval and its jitter.
LEASE_INTERVAL_SECONDS = 300.0
LEASE_JITTER = 0.2
# The renewal lane sends every renewal due within this many seconds of its timer together, back to back: one
# wake for a batch (at 5,000 Workspaces, ~17 a second), each at most this early on its 5-minute schedule.
RENEWAL_TICK_SECONDS = 1.0
# ADR-0064: provisioning waits for Ready at most this long after scheduling.
PROVISION_BUDGET_SECONDS = 120.0
# ADR-0062: the memory-kill read before an admission is bounded by this, in total (connect, 503s, body).
MEMORY_KILL_READ_SECONDS = 5.0
# CONTRACTS.md §3: a Harness request that never reached it is sent again, 250 ms doubling to 5 s, within 90 s.
HARNESS_RETRY = Backoff(initial=0.25, cap=5.0)
# The process's one Harness session (harness/pools.py): one pool per Harness address, keeping up to
# HARNESS_POOL_SIZE + HARNESS_POOL_PER_CLIENT × (its clients) idle connections, so the seats on one address (an
# Instance Harness, the fake cluster's) never find it full; a client holds its address from its start to its
# close; an address no client holds keeps HARNESS_POOL_SIZE while it is one of the HARNESS_POOLS_WARM let go
# last, no idle connection past them. Past HARNESS_POOLS addresses, the least recently used one no client
# holds is closed (its next call connects anew); a held one never is.
HARNESS_POOLS = 4096
HARNESS_POOLS_WARM = 64
HARNESS_POOL_SIZE = 32
HARNESS_POOL_PER_CLIENT = 2  # a seat's long-poll, and its admission's health probe or its answer beside it
HARNESS_RETRY_WINDOW_SECONDS = 90.0
# CONTRACTS.md §3 / ADR-0062: an admission answered 503 (a draining Harness) is sent again for up to 30 s.
ADMISSION_DRAIN_SECONDS = 30.0
# CONTRACTS.md §3: one Submission at a time per conversation. A seat's next Turn waits this long for the
# previous Submission to settle (it runs on after `over: true` until the model stops), then aborts it and
# waits as long again for the abort's settle; a 409 to an admission into a held conversation is "not yet",
# sent again (HARNESS_RETRY) for up to ADMISSION_BUSY_SECONDS.
PREVIOUS_SETTLE_SECONDS = 60.0
ADMISSION_BUSY_SECONDS = 60.0
# An admission's answer waits as long as the Harness is alive: its /healthz is asked this often
# while the answer is awaited, and the admission is cut once this many asks in a row got no 200.
ADMISSION_PROBE_SECONDS = 5.0
ADMISSION_PROBE_MISSES = 3
# A Turn's updates stream cut short is read again this many times, this far apart, before the Turn faults.
STREAM_READ_ATTEMPTS = 3
STREAM_READ_PAUSE_SECONDS = 1.0
# ADR-0065: a finished run's row lives this long.
RETENTION_SECONDS = 7 * 24 * 3600.0
# ADR-0065: the sweep runs at boot and this often.
SWEEP_INTERVAL_SECONDS = 3600.0
# The store's rows by status are recounted at most this often, after writes (one GROUP BY).
STORE_ROWS_RECOUNT_SECONDS = 1.0
# The StoreActor writes at most this many waiting persists in one transaction (group commit).
STORE_GROUP_COMMIT_ROWS = 256

# Server-side apply's field manager (CONTRACTS.md §2).
FIELD_MANAGER = "jr2"

# -- how long the shells wait: stops, asks, reads, streams (each named once, here) ------------------------
# A stopping WatchActor waits this long for its I/O thread (a list in flight is cut).
WATCH_SHUTDOWN_SECONDS = 2.0
# The most registrations (and timer ticks) the watch's I/O thread takes from the actor's mailbox and steps
# before a frame, so a Register told before a write is stepped before the write's event. A bound, not a tuning.
WATCH_CONTROL_BATCH = 1024
# CONTRACTS §3: the Harness answers a long-poll within ~25 s (204); the read waits above that.
HARNESS_LONG_POLL_READ_SECONDS = 40.0
# A stopping AgentActor waits this long for its stream reader (its long-poll is cut first).
AGENT_STOP_SECONDS = 2.0
# An event stream with nothing to say sends a comment this often, so a gone client is noticed.
API_HEARTBEAT_SECONDS = 15.0
# An event stream waits for the feed in slices this long, so the API's stop is seen within one slice.
API_STREAM_SLICE_SECONDS = 1.0
# Each read or write of the API's sockets: a client that trickles or stops reading is dropped.
API_SOCKET_TIMEOUT_SECONDS = 10.0
# The API's listener lets requests in flight finish this long when it stops.
API_SHUTDOWN_SECONDS = 5.0
# -- what a client of the API may cost before it has shown a token (docs/operations.md) ----------
# A request's line and headers arrive within this (from the accept, or from the first byte of a keep-alive
# connection's next request), and are at most this many bytes: past either it is a 408 or a 431.
API_HEADER_SECONDS = 5.0
API_MAX_HEADER_BYTES = 16 * 1024
# A declared body over this is a 413 before a byte of it is read.
API_MAX_BODY_BYTES = 1024 * 1024
# A body arrives, and an answer's every write is taken, at this minimum rate after a grace: the next byte is
# due by start + grace + bytes moved / rate (a client that trickles or stops reading is cut).
API_PACE_GRACE_SECONDS = 5.0
# A client cut once bytes it was sent have waited unacknowledged this long (a follower that never reads).
API_UNREAD_SECONDS = 30.0
API_MIN_BYTES_PER_SECOND = 64 * 1024
# Open connections from one peer address (429 past it), and in all (503 past it).
API_MAX_CONNECTIONS_PER_PEER = 32
API_MAX_CONNECTIONS = 512
# An ask from outside the actors (the API, the CLI) gives up after this (LIBRARY-NOTES: always a timeout).
ORCHESTRATOR_ASK_SECONDS = 10.0
# GET /runs and a status ask the watch whether the cluster answers (shell/last_answer.py) at most
# this often, and wait for its answer at most this long (else the last answer is shown).
WATCH_HEALTH_MAX_AGE_SECONDS = 1.0
WATCH_HEALTH_WAIT_SECONDS = 0.05
# Each actor's stop, when the orchestrator stops: serve's SIGTERM budget is 10 s in all.
ACTOR_STOP_SECONDS = 8.0
# /healthz turns 503 when an actor's oldest message has waited this long: stuck, not slow (a burst of thousands
# of runs keeps mailboxes seconds deep, never a minute).
HEALTH_STALL_SECONDS = 60.0
# /healthz has the store check that it can write (a tell, never waited for) when its last finding is older.
HEALTH_STORE_CHECK_SECONDS = 5.0
# The store's stop, when the runs' stops used the whole budget: the persists already asked still land.
STORE_STOP_FLOOR_SECONDS = 1.0
# ADR-0065: a persist is an ask of the StoreActor; one not answered in this long counts as a failed write.
PERSIST_ASK_SECONDS = 30.0
# ADR-0065: a run whose persist failed holds before its next side effect and tries again on this schedule,
# for as long as it takes (the disk comes back: it goes on); capped low so it resumes soon after.
PERSIST_RETRY_BACKOFF = Backoff(initial=0.2, cap=5.0, jitter=0.2)
# A dead run's revival that the store could not serve (its row unread, or its end not written) is tried
# again on this schedule until it lands; /healthz says so meanwhile.
REVIVE_RETRY_BACKOFF = Backoff(initial=0.5, cap=10.0)
# ADR-0062: a lost conversation waits this long for the Workspace to say a kernel kill ended it.
LOST_GRACE_SECONDS = 5.0
# The demo ends well within this; past it, something is wrong: it says so and stops.
DEMO_SECONDS = 60.0
# The probe listener (api/probe.py): serve publishes its health to it this often; a finding older than the stale
# bound is a 503 there (serve has stopped making progress); the listener has this long to say it listens.
PROBE_PUBLISH_SECONDS = 1.0
PROBE_STALE_SECONDS = 10.0
PROBE_START_SECONDS = 10.0
# serve stops within this after SIGTERM (CONTRACTS §6); the Deployment's grace period covers it with margin.
SERVE_STOP_SECONDS = 10.0
STOP_WATCHDOG_MARGIN_SECONDS = 0.5  # the watchdog ends serve this long before the budget: its line gets out
STOP_HARD_EXIT_MARGIN_SECONDS = 0.25  # the native exit, for when no Python thread can run to end serve
# `serve --supervise` (shell/supervisor.py) kills a serve still stopping this long before the budget: the
# kernel's time to end thousands of threads, and the supervisor's own turn on a CPU they crowd; it leaves
# this long after the kill, reaped or not.
SUPERVISOR_KILL_MARGIN_SECONDS = 2.0
SUPERVISOR_REAP_SECONDS = 1.0
SUPERVISED_NICENESS = 10  # serve's under its supervisor: 15,000 runnable threads delayed its one by ~1 s
# serve's interpreter switch interval (`sys.setswitchinterval`; CPython's default is 5 ms). Each thread waiting
# for the interpreter lock wakes this often to ask for it, so with thousands waiting (serve runs ~3 threads a
# live run) the default spent both cores in the kernel on those wakes and a release of 5,000 runs never
# drained; at 50 ms it was admitted in 90 s. Set by serve only: an embedding process keeps its own.
SERVE_SWITCH_INTERVAL_SECONDS = 0.05
# Serve waits this long (by default) for a --kubeconfig that is not there yet — a fake-cluster
# started beside it writes it (atomically) a moment later.
SERVE_KUBECONFIG_WAIT_SECONDS = 10.0

# The fake API server stamps each watch event it sends for a write with the write's wall time, in
# this top-level field of the event (beside "type" and "object", never inside the object): a real API
# server sends none, a real client ignores it, and our frame decoder reads it when present, so the watch's
# delivery latency can be measured from the write to the Workspace's receipt.
WATCH_WRITTEN_AT_FIELD = "jr2.dev/writtenAt"

# The busiest few actors are named in the metrics (by mailbox depth); never more than this many,
# so a thousand Workspaces still make a bounded number of series.
METRICS_BUSIEST_ACTORS = 5
# Each saved run blob reserves this many feed ids ahead; a restore numbers new lines from
# the reservation, so an id a follower holds (`Last-Event-ID`) never names a second line. A run whose lines
# outrun it saves before the next one leaves.
FEED_IDS_RESERVED = 1000
# The FeedHub holds the feeds of this many finished runs (the newest); a reader of an older
# one reads the same lines from its store row until the sweep (RETENTION_SECONDS) — memory plateaus.
FEED_FINISHED_HELD = 64
# `GET /runs?all=true` lists at most this many finished runs (the newest ends) beside the live ones.
RUNS_FINISHED_LISTED = 500
# A submit that finds its key's first request still under way waits this long for it before a 409.
API_IDEMPOTENCY_WAIT_SECONDS = 30.0
RUN_PATH_KEEP = 256  # The states a run entered, newest kept (a loop may enter them without end)
# ADR-0062: a pick's briefing is at most this many characters — the workflow parser refuses a longer one,
# and the Harness says no more of one that reached it anyway.
MAX_PICK_BRIEFING = 4000
