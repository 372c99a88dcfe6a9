"""The orchestrator's metrics: one `Telemetry` per orchestrator, exposed in the Prometheus text format.

Why one object and no global: an embedding test harness runs several orchestrators in one process, so
each has its own `CollectorRegistry` (never prometheus_client's global one) and hands its `Telemetry` to
what records. An actor made outside an orchestrator (a test, the fake cluster) gets `OFF`, which records
nothing anywhere.

Every metric name is defined here, once, and nowhere else (docs/operations.md says what each means and
which alert to set). Labels are bounded: by actor kind (the class), by a fixed set of values (an HTTP
verb, an event type, a cause), and never by run, Workspace or request path; the few instances named
(the busiest mailboxes) are capped at `METRICS_BUSIEST_ACTORS`.

Actors, once, in the shell base (`actorkit.Shell`): each actor's inbox is a `Mailbox`, which stamps every
message with the time it was queued and counts it; the shell's receive loop times each message on the
same clock. Both are plain numbers on the actor's own objects — no lock and no prometheus_client call on
a message's path (bench/actor_overhead.py measures the cost) — and `ActorMetrics` reads them at scrape
time over the orchestrator's live actors, adding what stopped actors had counted.
"""

from __future__ import annotations

import queue
import threading
import time
import typing
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from jr2_actors.clock import Clock
from jr2_actors.constants import METRICS_BUSIEST_ACTORS, METRICS_STATE_LABELS
from jr2_actors.kube.frames import Bookmark, Decoded, ErrorFrame, FrameError, WatchEvent
from jr2_actors.run.feedlines import AdmittedLine
from jr2_actors.store.rows import STATUSES as STORE_STATUSES
from jr2_actors.watch import core as watch_core
from jr2_actors.workspace.core import State as WorkspaceState
from jr2_actors.workspace.core import WaitOn

# -- metric names (the one place each is spelled) --------------------------------------------------------

ACTOR_INSTANCES = "jr2_actor_instances"
ACTOR_MAILBOX_DEPTH = "jr2_actor_mailbox_depth"
ACTOR_MAILBOX_DEPTH_MAX = "jr2_actor_mailbox_depth_max"
ACTOR_MAILBOX_HIGH_WATER = "jr2_actor_mailbox_depth_high_water"
ACTOR_OLDEST_MESSAGE_AGE = "jr2_actor_oldest_message_age_seconds"
ACTOR_MESSAGES_RECEIVED = "jr2_actor_messages_received_total"
ACTOR_MESSAGES_PROCESSED = "jr2_actor_messages_processed_total"
ACTOR_MESSAGE_FAILURES = "jr2_actor_message_failures_total"
ACTOR_PROCESSING_SECONDS = "jr2_actor_processing_seconds"
ACTOR_BUSIEST_DEPTH = "jr2_actor_busiest_mailbox_depth"
ACTOR_BUSIEST_AGE = "jr2_actor_busiest_oldest_message_age_seconds"
WATCH_EVENTS = "jr2_watch_events_total"
WATCH_RELISTS = "jr2_watch_relists_total"
WATCH_RECONNECTS = "jr2_watch_reconnects_total"
WATCH_DELIVERY_LATENCY = "jr2_watch_delivery_latency_seconds"
WATCH_UP = "jr2_watch_up"
WATCH_DEGRADED = "jr2_watch_degraded"
WATCH_PHASE = "jr2_watch_phase"
WATCH_FAILURES = "jr2_watch_failures"
WATCH_WAITERS = "jr2_watch_waiters"
WATCH_TRACKED = "jr2_watch_tracked_objects"
WATCH_LAST_FRAME_AGE = "jr2_watch_last_frame_age_seconds"
WATCH_VERSION_AGE = "jr2_watch_resource_version_age_seconds"
STORE_PERSIST_SECONDS = "jr2_store_persist_seconds"
STORE_PERSIST_FAILURES = "jr2_store_persist_failures_total"
STORE_BLOB_BYTES = "jr2_store_blob_bytes"
STORE_ROWS = "jr2_store_rows"
STORE_SWEEPS = "jr2_store_sweeps_total"
STORE_SWEPT_ROWS = "jr2_store_swept_rows_total"
STORE_SET_ASIDE_ROWS = "jr2_store_set_aside_rows"
KUBE_REQUESTS = "jr2_kube_requests_total"
KUBE_UNAUTHORIZED_RETRIES = "jr2_kube_unauthorized_retries_total"
KUBE_WRITES_IN_FLIGHT = "jr2_kube_writes_in_flight"
KUBE_WRITES_WAITING = "jr2_kube_writes_waiting"
KUBE_WRITE_CAP = "jr2_kube_write_cap"
HARNESS_ADMISSIONS = "jr2_harness_admissions_total"
HARNESS_MEMORY_KILL_READS = "jr2_harness_memory_kill_reads_total"
HARNESS_NOTICES = "jr2_harness_notices_total"
RUNS_LIVE = "jr2_runs_live"
WORKSPACES = "jr2_workspaces"
RUN_WAITS_OPEN = "jr2_run_waits_open"
RUN_WAIT_OLDEST = "jr2_run_wait_oldest_seconds"

# The processing time of one message, in seconds: from a trivial message (tens of µs) to one that blocks.
PROCESSING_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                      2.5, 5.0, 10.0)


# -- the actors' mailboxes -----------------------------------------------------------------------------

class Mailbox(queue.Queue[Any]):
    """pykka's inbox (an unbounded `queue.Queue`) that knows when each waiting message was queued.

    `put` and `get` are `queue.Queue`'s for an unbounded queue without its task accounting (pykka calls
    neither `join` nor `task_done`): leaner than the general ones, which pays for the stamp and the count.
    Both run under the queue's own mutex, so the counts need no lock of their own. What the actor's
    thread records as it handles messages (`high_water`, `seconds`, `buckets`, `failures`) lives here too:
    one object holds what went through one actor.
    """

    def _init(self, maxsize: int) -> None:
        self.queue: deque[Any] = deque()
        self.stamps: deque[float] = deque()  # floats, not (time, message) tuples: nothing for the GC to scan
        self.now: Callable[[], float] = time.monotonic
        self.received = 0
        self.high_water = 0  # kept by the shell's loop: the deepest a mailbox gets is just before a take
        self.failures = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(PROCESSING_BUCKETS) + 1)  # the last one is +Inf

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        with self.not_empty:
            self.queue.append(item)
            self.stamps.append(self.now())
            self.received += 1
            self.not_empty.notify()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        with self.not_empty:
            if not self.queue:
                if not block:
                    raise queue.Empty
                if timeout is None:
                    while not self.queue:
                        self.not_empty.wait()
                else:
                    deadline = time.monotonic() + timeout
                    while not self.queue:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0.0:
                            raise queue.Empty
                        self.not_empty.wait(remaining)
            self.stamps.popleft()
            return self.queue.popleft()

    def take_while(self, wanted: Callable[[Any], bool], limit: int) -> list[Any]:
        """Take, without waiting, the messages at the head for which `wanted(message)` holds (at most
        `limit`): their envelopes, in order. The actor's thread handles them as one (the store's group
        commit) and answers each itself; the first message that is not wanted stays, so order holds."""
        taken: list[Any] = []
        with self.mutex:
            waiting = self.queue
            while waiting and len(taken) < limit and wanted(waiting[0].message):
                self.stamps.popleft()
                taken.append(waiting.popleft())
        return taken

    def oldest_age(self, now: float) -> float:
        """Seconds the oldest waiting message has waited (0 when none waits)."""
        with self.mutex:
            return max(now - self.stamps[0], 0.0) if self.stamps else 0.0


class Metered(Protocol):
    """What `ActorMetrics` reads of an actor: its mailbox and its name (`actorkit.Shell` is one)."""

    mailbox: Mailbox
    name: str


@dataclass
class _Totals:
    """What the stopped actors of one kind had counted, so counters never go back when actors stop."""

    received: int = 0
    failures: int = 0
    seconds: float = 0.0
    high_water: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(PROCESSING_BUCKETS) + 1))

    def add(self, box: Mailbox) -> None:
        self.received += box.received
        self.failures += box.failures
        self.seconds += box.seconds
        self.high_water = max(self.high_water, box.high_water, box.qsize())
        for i, n in enumerate(box.buckets):
            self.buckets[i] += n


@dataclass
class _Kind:
    """One kind's figures in one scrape."""

    instances: int = 0
    depth: int = 0
    depth_max: int = 0
    oldest: float = 0.0
    totals: _Totals = field(default_factory=_Totals)


class ActorMetrics:
    """The shell base's metrics, read at scrape time over one orchestrator's live actors, by kind."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry
        self._lock = threading.Lock()
        self._live: dict[int, Metered] = {}
        self._retired: dict[str, _Totals] = {}

    def register(self, actor: Metered) -> None:
        """The actor started (on its own thread, before anything else it does)."""
        if self._telemetry.enabled:
            with self._lock:
                self._live[id(actor)] = actor

    def retire(self, actor: Metered) -> None:
        """The actor's loop has ended: fold its counts into its kind's totals."""
        if self._telemetry.enabled:
            with self._lock:
                if self._live.pop(id(actor), None) is not None:
                    self._retired.setdefault(type(actor).__name__, _Totals()).add(actor.mailbox)

    def collect(self) -> Iterator[Metric]:
        now = self._telemetry.monotonic()
        with self._lock:
            live = list(self._live.values())
            kinds = {kind: _Kind(totals=_Totals(t.received, t.failures, t.seconds, t.high_water, list(t.buckets)))
                     for kind, t in self._retired.items()}
        busiest: list[tuple[int, float, str, str]] = []
        for actor in live:
            box = actor.mailbox
            kind = kinds.setdefault(type(actor).__name__, _Kind())
            waiting, age = box.qsize(), box.oldest_age(now)
            kind.instances += 1
            kind.depth += waiting
            kind.depth_max = max(kind.depth_max, waiting)
            kind.oldest = max(kind.oldest, age)
            kind.totals.add(box)
            if waiting:
                busiest.append((waiting, age, type(actor).__name__, actor.name))
        label = ["kind"]
        instances = GaugeMetricFamily(ACTOR_INSTANCES, "Live actors of a kind.", labels=label)
        depth = GaugeMetricFamily(ACTOR_MAILBOX_DEPTH, "Messages waiting in the mailboxes of a kind's actors, "
                                                       "summed.", labels=label)
        depth_max = GaugeMetricFamily(ACTOR_MAILBOX_DEPTH_MAX, "The deepest single mailbox of a kind now.",
                                      labels=label)
        high_water = GaugeMetricFamily(ACTOR_MAILBOX_HIGH_WATER, "The deepest any mailbox of a kind has been "
                                                                 "since the orchestrator started.", labels=label)
        oldest = GaugeMetricFamily(ACTOR_OLDEST_MESSAGE_AGE, "How long the oldest waiting message of a kind's "
                                                             "actors has waited.", labels=label)
        received = CounterMetricFamily(ACTOR_MESSAGES_RECEIVED, "Messages put in a kind's mailboxes.", labels=label)
        processed = CounterMetricFamily(ACTOR_MESSAGES_PROCESSED, "Messages a kind's actors have handled (failed "
                                                                  "ones too).", labels=label)
        failures = CounterMetricFamily(ACTOR_MESSAGE_FAILURES, "Messages whose handling raised (an ask's caller "
                                                               "got the error; a tell's actor died), and starts "
                                                               "that raised.", labels=label)
        seconds = HistogramMetricFamily(ACTOR_PROCESSING_SECONDS, "Time to handle one message.", labels=label)
        for name, kind in sorted(kinds.items()):
            t = kind.totals
            instances.add_metric([name], kind.instances)
            depth.add_metric([name], kind.depth)
            depth_max.add_metric([name], kind.depth_max)
            high_water.add_metric([name], t.high_water)
            oldest.add_metric([name], kind.oldest)
            received.add_metric([name], t.received)
            processed.add_metric([name], sum(t.buckets))
            failures.add_metric([name], t.failures)
            seconds.add_metric([name], _cumulative(PROCESSING_BUCKETS, t.buckets), t.seconds)
        yield from (instances, depth, depth_max, high_water, oldest, received, processed, failures, seconds)
        depth_family = GaugeMetricFamily(ACTOR_BUSIEST_DEPTH, "Mailbox depth of the busiest few actors (at "
                                         f"most {METRICS_BUSIEST_ACTORS}, by depth).", labels=["kind", "name"])
        age_family = GaugeMetricFamily(ACTOR_BUSIEST_AGE, "Oldest waiting message of the busiest few actors.",
                                       labels=["kind", "name"])
        for waiting, age, kind_name, name in sorted(busiest, reverse=True)[:METRICS_BUSIEST_ACTORS]:
            depth_family.add_metric([kind_name, name], waiting)
            age_family.add_metric([kind_name, name], age)
        yield depth_family
        yield age_family


def _cumulative(bounds: tuple[float, ...], counts: list[int]) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    running = 0
    for bound, n in zip((*bounds, float("inf")), counts, strict=True):
        running += n
        out.append(("+Inf" if bound == float("inf") else repr(bound), running))
    return out


# -- the watch ---------------------------------------------------------------------------------------------

WATCH_EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "unusable")
RELIST_CAUSES = ("expired", "silence", "error_frame", "degraded", "unusable_frame", "list_failed", "other")
WATCH_PHASES = ("idle", "listing", "watching", "waiting", "stopped")
# From the server's write to the Workspace's receipt: about a millisecond on loopback, tens on a cluster.
DELIVERY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def frame_type(frame: Decoded) -> str:
    """A watch frame's `type` label: the event's type, BOOKMARK, ERROR, or `unusable`."""
    if isinstance(frame, WatchEvent):
        return frame.type
    if isinstance(frame, Bookmark):
        return "BOOKMARK"
    if isinstance(frame, ErrorFrame):
        return "ERROR"
    return "unusable"


def relist_cause(event: watch_core.Input, report: watch_core.Terminated, degraded: bool) -> str:
    """Why the watch re-lists, from the input that ended the stream and the keeper's report of it. A
    re-list while degraded (or the one that declares it) is `degraded`, whatever failed this time."""
    if report.action == "degraded" or degraded:
        return "degraded"
    if report.termination is watch_core.Termination.EXPIRED:
        return "expired"
    if report.termination is watch_core.Termination.SILENCE:
        return "silence"
    if isinstance(event, watch_core.FrameReceived):
        if isinstance(event.frame, ErrorFrame):
            return "error_frame"
        if isinstance(event.frame, FrameError):
            return "unusable_frame"
    if isinstance(event, watch_core.ListFailed | watch_core.Tick):  # a failed list, or one out of time
        return "list_failed"
    return "other"


@dataclass(frozen=True)
class WatchState:
    """What the WatchActor publishes after each step, read at scrape time."""

    phase: str
    degraded: bool
    failures: int
    waiters: int
    tracked: int
    resource_version: str | None


class WatchMetrics:
    """The one Sandbox watch: events by type, re-lists by cause, reconnects, delivery latency (counted as
    they happen), and its state — phase, degraded, the age of the resume version, seconds since the last
    frame — published by the WatchActor after each step and read at scrape time."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry
        self._on = telemetry.enabled
        registry = telemetry.registry if self._on else None
        events = Counter(WATCH_EVENTS, "Watch frames received, by type (an unusable line is `unusable`).",
                         ["type"], registry=registry)
        self._events = {t: events.labels(t) for t in WATCH_EVENT_TYPES}
        relists = Counter(WATCH_RELISTS, "Re-lists decided, by cause (every one while degraded is `degraded`).",
                          ["cause"], registry=registry)
        self._relists = {c: relists.labels(c) for c in RELIST_CAUSES}
        self._reconnects = Counter(WATCH_RECONNECTS, "Watches opened after the first one (a resume or after a "
                                                     "re-list).", registry=registry)
        self._delivery = Histogram(WATCH_DELIVERY_LATENCY, "From the API server's write to the WorkspaceActor's "
                                                           "receipt of the delivery (only where the server "
                                                           "stamps its writes: the fake cluster).",
                                   buckets=DELIVERY_BUCKETS, registry=registry)
        self._state: WatchState | None = None
        self._version_since = 0.0
        self._frame_at = 0.0
        self._opened = False
        if self._on:
            telemetry.registry.register(self)

    def frame(self, frame: Decoded) -> None:
        if self._on:
            self._frame_at = self._telemetry.monotonic()
            self._events[frame_type(frame)].inc()

    def relist(self, cause: str) -> None:
        if self._on:
            self._relists[cause if cause in self._relists else "other"].inc()

    def watch_opened(self) -> None:
        if self._on:
            if self._opened:
                self._reconnects.inc()
            self._opened = True

    def delivered(self, written_at: float) -> None:
        """A WorkspaceActor received a delivery of a write the server stamped at `written_at` (wall)."""
        if self._on:
            self._delivery.observe(max(self._telemetry.wall() - written_at, 0.0))

    def publish(self, state: WatchState) -> None:
        if self._on:
            now = self._telemetry.monotonic()
            previous = self._state
            if previous is None:
                self._frame_at = now  # "seconds since the last frame, or since the watch started"
            if previous is None or previous.resource_version != state.resource_version:
                self._version_since = now
            self._state = state

    def collect(self) -> Iterator[Metric]:
        state = self._state
        if state is None:
            return
        now = self._telemetry.monotonic()
        yield GaugeMetricFamily(WATCH_UP, "1 while the watch is not degraded (nor stopped).",
                                value=0.0 if state.degraded or state.phase == "stopped" else 1.0)
        yield GaugeMetricFamily(WATCH_DEGRADED, "1 while the watch is blind past its failure bound, re-listing.",
                                value=1.0 if state.degraded else 0.0)
        phase = GaugeMetricFamily(WATCH_PHASE, "The watch's phase: 1 for the current one.", labels=["phase"])
        for name in WATCH_PHASES:
            phase.add_metric([name], 1.0 if state.phase == name else 0.0)
        yield phase
        yield GaugeMetricFamily(WATCH_FAILURES, "Failures in a row (the bound turns the watch degraded).",
                                value=state.failures)
        yield GaugeMetricFamily(WATCH_WAITERS, "Sandboxes with a registered recipient.", value=state.waiters)
        yield GaugeMetricFamily(WATCH_TRACKED, "Sandboxes the watch follows now.", value=state.tracked)
        yield GaugeMetricFamily(WATCH_LAST_FRAME_AGE, "Seconds since the last frame (or since the watch started).",
                                value=max(now - self._frame_at, 0.0))
        if state.resource_version is not None:
            yield GaugeMetricFamily(WATCH_VERSION_AGE, "Seconds since the resume version last moved (absent while "
                                                       "re-listing, when there is none).",
                                    value=max(now - self._version_since, 0.0))


# -- the store -----------------------------------------------------------------------------------------

# A 1 KB persist takes about 0.03 ms, a 100 KB one about 0.5 ms (docs/benchmarks.md); the alert is a p99
# over 50 ms, so the buckets are fine below it and coarse above.
PERSIST_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
# A run's blob is about 1 KB, a Pool of 40 about 100 KB (ADR-0065).
BLOB_BUCKETS = (1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0)


class StoreMetrics:
    """The run store: persist latency and blob size (each persist), rows by status (recounted by the
    StoreActor at most once a second after writes), sweeps, and the live rows set aside as unrestorable."""

    def __init__(self, telemetry: Telemetry, statuses: tuple[str, ...]) -> None:
        self._on = telemetry.enabled
        registry = telemetry.registry if self._on else None
        self._persist = Histogram(STORE_PERSIST_SECONDS, "Time to write one run's row (the StoreActor's "
                                                         "upsert, JSON encoding included).",
                                  buckets=PERSIST_BUCKETS, registry=registry)
        self._failures = Counter(STORE_PERSIST_FAILURES, "Persists that raised (the disk, or our bug).",
                                 registry=registry)
        self._blob = Histogram(STORE_BLOB_BYTES, "Size of the blob written by one persist.", buckets=BLOB_BUCKETS,
                               registry=registry)
        sweeps = Counter(STORE_SWEEPS, "Sweeps of finished rows older than 7 days, by outcome.", ["outcome"],
                         registry=registry)
        self._sweeps = {o: sweeps.labels(o) for o in ("ok", "failed")}
        self._swept = Counter(STORE_SWEPT_ROWS, "Rows the sweeps removed.", registry=registry)
        self._statuses = statuses
        self._rows: dict[str, int] | None = None
        self._set_aside = 0
        if self._on:
            telemetry.registry.register(self)

    def persisted(self, seconds: float, size: int) -> None:
        if self._on:
            self._persist.observe(seconds)
            self._blob.observe(size)

    def persist_failed(self) -> None:
        if self._on:
            self._failures.inc()

    def swept(self, removed: int | None) -> None:
        """A sweep ended: `removed` rows, or None when it failed."""
        if self._on:
            self._sweeps["ok" if removed is not None else "failed"].inc()
            if removed:
                self._swept.inc(removed)

    def rows(self, counts: dict[str, int]) -> None:
        if self._on:
            self._rows = dict(counts)

    def set_aside(self, count: int) -> None:
        """How many live rows this process could not restore (each left on disk as it is)."""
        if self._on:
            self._set_aside = count

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(STORE_SET_ASIDE_ROWS, "Live rows that could not be restored: set aside, left in "
                                                      "state.db as they are (the log names each).",
                                value=self._set_aside)
        rows = self._rows
        if rows is None:
            return
        family = GaugeMetricFamily(STORE_ROWS, "Rows in the store by status (recounted at most once a second).",
                                   labels=["status"])
        for status in self._statuses:
            family.add_metric([status], rows.get(status, 0))
        yield family


# -- the Kubernetes client ------------------------------------------------------------------------------

KUBE_VERBS = ("get", "list", "watch", "create", "apply", "patch", "delete")


class WriteGate(Protocol):
    capacity: int

    @property
    def in_flight(self) -> int: ...

    @property
    def waiting(self) -> int: ...


class KubeClientLike(Protocol):
    """What `KubeMetrics.attach` needs of `kube.client.KubeClient` (which imports this module)."""

    metrics: KubeMetrics

    @property
    def writes(self) -> WriteGate: ...


class KubeMetrics:
    """The one in-process Kubernetes client: requests by verb and answer code (`none`: no answer), 401s
    retried with a re-read token, and the write gate read at scrape time."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._on = telemetry.enabled
        registry = telemetry.registry if self._on else None
        self._requests = Counter(KUBE_REQUESTS, "Requests to the API server, by verb and answer code (`none`: "
                                                "no answer came).", ["verb", "code"], registry=registry)
        self._retries = Counter(KUBE_UNAUTHORIZED_RETRIES, "Requests answered 401 and sent again once with the "
                                                           "token file re-read.", registry=registry)
        self._gate: WriteGate | None = None
        if self._on:
            telemetry.registry.register(self)

    def request(self, verb: str, code: int | None) -> None:
        if self._on:
            self._requests.labels(verb if verb in KUBE_VERBS else "other",
                                  "none" if code is None else str(code)).inc()

    def unauthorized_retry(self) -> None:
        if self._on:
            self._retries.inc()

    def attach(self, client: KubeClientLike) -> None:
        """Record `client`'s requests here, and read its write gate at scrape time."""
        client.metrics = self
        self._gate = client.writes

    def collect(self) -> Iterator[Metric]:
        gate = self._gate
        if gate is None:
            return
        yield GaugeMetricFamily(KUBE_WRITES_IN_FLIGHT, "Kubernetes writes in flight.", value=gate.in_flight)
        yield GaugeMetricFamily(KUBE_WRITES_WAITING, "Kubernetes writes waiting for a slot of the cap.",
                                value=gate.waiting)
        yield GaugeMetricFamily(KUBE_WRITE_CAP, "The cap on Kubernetes writes in flight (8-16).",
                                value=gate.capacity)


# -- the Harness -----------------------------------------------------------------------------------------

ADMISSION_OUTCOMES = ("admitted", "not_kept", "error", "unreachable", "protocol", "crashed")
MEMORY_KILL_READ_OUTCOMES = ("read", "error", "unreachable", "protocol", "malformed", "crashed")
NOTICE_KINDS = ("memory-limit", "conversation-new", "pick-answer")


class HarnessMetrics:
    """The Harness as the Orchestrator calls it: admissions and memory-kill reads by outcome (the
    AgentActors), and the notices told to Agents by kind (read off the runs' feed on its way to the hub)."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._on = telemetry.enabled
        registry = telemetry.registry if self._on else None
        admissions = Counter(HARNESS_ADMISSIONS, "Admissions posted to a Harness, by outcome (`error`: the "
                                                 "Harness answered with an error; `crashed`: our bug).",
                             ["outcome"], registry=registry)
        self._admissions = {o: admissions.labels(o) for o in ADMISSION_OUTCOMES}
        reads = Counter(HARNESS_MEMORY_KILL_READS, "Reads of a Harness's /memory-kills before an admission, by "
                                                   "outcome (`malformed`: the list was refused as untrusted "
                                                   "input).", ["outcome"], registry=registry)
        self._reads = {o: reads.labels(o) for o in MEMORY_KILL_READ_OUTCOMES}
        notices = Counter(HARNESS_NOTICES, "Notices told to Agents in admissions, by kind (each notice the "
                                           "ledger raises is told once, at the next admission in its scope).",
                          ["kind"], registry=registry)
        self._notices = {k: notices.labels(k) for k in (*NOTICE_KINDS, "other")}

    def admission(self, outcome: str) -> None:
        if self._on:
            self._admissions.get(outcome, self._admissions["crashed"]).inc()

    def memory_kill_read(self, outcome: str) -> None:
        if self._on:
            self._reads.get(outcome, self._reads["crashed"]).inc()

    def feed_tap(self, hub: Recipient) -> Recipient:
        """A recipient for the runs' feed that counts the notices of each admission, then hands it on."""
        return _NoticeTap(self, hub) if self._on else hub

    def _noticed(self, kind: object) -> None:
        self._notices.get(kind if isinstance(kind, str) else "", self._notices["other"]).inc()


class Recipient(Protocol):
    """`actorkit.Recipient` (which imports this module, so it cannot be imported here)."""

    def tell(self, message: Any) -> None: ...


class _NoticeTap:
    def __init__(self, metrics: HarnessMetrics, hub: Recipient) -> None:
        self._metrics = metrics
        self._hub = hub

    def tell(self, message: Any) -> None:
        """`run.feed.Published`: its `admitted` lines carry the notices told."""
        for event in getattr(message, "events", ()):
            line = getattr(event, "line", None)
            if isinstance(line, AdmittedLine):
                for notice in line.notices:
                    self._metrics._noticed(notice.kind)
        self._hub.tell(message)


# -- runs ----------------------------------------------------------------------------------------------

WORKSPACE_PHASES = (*typing.get_args(WorkspaceState), "releasing")
WAIT_ONS = typing.get_args(WaitOn)


@dataclass(frozen=True)
class RunView:
    """What the scrape needs of one live run, published by its RunActor after each step."""

    state: str
    phases: tuple[str, ...]  # its Workspaces' phases
    waits: tuple[tuple[str, float], ...]  # (on, since wall) of each open wait


class RunLike(Protocol):
    """What `RunMetrics.update` reads of `run.core.RunCore` (read on the RunActor's thread)."""

    run_id: str
    state: str

    @property
    def workspaces(self) -> Mapping[str, Any]: ...

    def waiting(self) -> list[tuple[str, Any]]: ...


class RunMetrics:
    """Live runs by workflow state (the most common `METRICS_STATE_LABELS` states named, the rest `other`:
    state names come from workflows, not from us), their Workspaces by phase, open waits by `on` and the
    oldest of each."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry
        self._on = telemetry.enabled
        self._lock = threading.Lock()
        self._runs: dict[str, RunView] = {}
        if self._on:
            telemetry.registry.register(self)

    def update(self, run: RunLike) -> None:
        if self._on:
            view = RunView(run.state,
                           tuple("releasing" if r.releasing else r.phase for r in run.workspaces.values()),
                           tuple((w.on, w.since) for _, w in run.waiting()))
            with self._lock:
                self._runs[run.run_id] = view

    def forget(self, run_id: str) -> None:
        if self._on:
            with self._lock:
                self._runs.pop(run_id, None)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            views = list(self._runs.values())
        now = self._telemetry.wall()
        states: dict[str, int] = {}
        phases = dict.fromkeys(WORKSPACE_PHASES, 0)
        waits = dict.fromkeys(WAIT_ONS, 0)
        oldest = dict.fromkeys(WAIT_ONS, 0.0)
        for view in views:
            states[view.state] = states.get(view.state, 0) + 1
            for phase in view.phases:
                key = phase if phase in phases else "other"
                phases[key] = phases.get(key, 0) + 1
            for on, since in view.waits:
                key = on if on in waits else "other"
                waits[key] = waits.get(key, 0) + 1
                oldest[key] = max(oldest.get(key, 0.0), now - since)
        ranked = sorted(states.items(), key=lambda kv: (-kv[1], kv[0]))
        named = dict(ranked[:METRICS_STATE_LABELS])
        rest = sum(n for _, n in ranked[METRICS_STATE_LABELS:])
        if rest:
            named["other"] = named.get("other", 0) + rest
        runs = GaugeMetricFamily(RUNS_LIVE, "Live runs by workflow state (the most common ones named, the rest "
                                            "`other`).", labels=["state"])
        for state, n in sorted(named.items()):
            runs.add_metric([state], n)
        yield runs
        workspaces = GaugeMetricFamily(WORKSPACES, "Workspaces of live runs by phase.", labels=["phase"])
        for phase, n in phases.items():
            workspaces.add_metric([phase], n)
        yield workspaces
        open_waits = GaugeMetricFamily(RUN_WAITS_OPEN, "Open waits of Workspaces by what they wait on (a node "
                                                       "with room, or quota).", labels=["on"])
        oldest_wait = GaugeMetricFamily(RUN_WAIT_OLDEST, "How long the oldest open wait on each has lasted.",
                                        labels=["on"])
        for on, n in waits.items():
            open_waits.add_metric([on], n)
            oldest_wait.add_metric([on], max(oldest[on], 0.0))
        yield open_waits
        yield oldest_wait


# -- the orchestrator's Telemetry ----------------------------------------------------------------------

class Telemetry:
    """One orchestrator's metrics: its own registry, and a recorder for each part that records.

    `clock`: what the mailboxes stamp and ages are read on (the real monotonic clock by default; a test
    injects a `VirtualClock` to age a message without waiting). `enabled=False` is `OFF`.
    """

    def __init__(self, *, clock: Clock | None = None, enabled: bool = True) -> None:
        self.enabled = enabled
        self.monotonic: Callable[[], float] = time.monotonic if clock is None else clock.monotonic
        self.wall: Callable[[], float] = time.time if clock is None else clock.wall
        self.registry = CollectorRegistry()
        self.actors = ActorMetrics(self)
        self.watch = WatchMetrics(self)
        self.store = StoreMetrics(self, STORE_STATUSES)
        self.kube = KubeMetrics(self)
        self.harness = HarnessMetrics(self)
        self.runs = RunMetrics(self)
        if enabled:
            self.registry.register(self.actors)

    def exposition(self) -> bytes:
        """The Prometheus text format 0.0.4, as `/metrics` serves it."""
        return generate_latest(self.registry)


OFF = Telemetry(enabled=False)
"""For what runs outside an orchestrator: records nothing, registers nothing."""

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""What `/metrics` is served as: the Prometheus text format `generate_latest` writes."""
