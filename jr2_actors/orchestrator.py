"""`Orchestrator`: the facade — one KubeClient, one WatchActor, one StoreActor, the RunActors.

    with Orchestrator(cluster.client(), state_dir=tmp, signing_key=cluster.signing_key) as orch:
        run_id = orch.submit(load_workflow(text) or its document)
        orch.status(run_id)

`start()` takes the state directory's lock (`store/lock.py`: one owner per `state.db`), opens the store
(a file that is not ours is refused in one line), and restores every live run from it (ADR-0065: live
rows only) before it takes a new one; each comes back with what its Workspaces knew, and the watch's first
list reconciles them; a row that cannot be restored is set aside, left as it is, and counted. `submit`
answers once the run's first row is written (201 means on disk); a store that cannot write refuses the
submission (`Unavailable`, the API's 503) and a live run holds until its next row lands. `stop()` stops
the runs' actors, all at once within one actor's budget (their Turns' readers and attaches end; their
Sandboxes are left for the next start to re-adopt — a stop is not a cancel), lets the store finish every
persist already asked, then stops the watch.
It is also the API's `Backend` and the `jr2_orchestrator` pytest fixture's object. Its metrics are its
own (`self.telemetry`, one registry per orchestrator), so two orchestrators in one process never mix.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, cast

import pykka
import requests

from jr2_actors.harness.pools import HarnessPools, shared_session
from jr2_actors.kube.client import KubeClient
from jr2_actors.revival import Revival
from jr2_actors.run.actor import RunActor, RunEnv, row_status
from jr2_actors.run.core import RunCore
from jr2_actors.run.feed.hub import FeedHub, FeedRead
from jr2_actors.run.listing.table import RunRow, RunTable, with_member
from jr2_actors.run.listing.wire import listing_doc, status_doc, stored_listing_doc
from jr2_actors.run.messages import Cancel, RunFinished, RunStep, Save, Start, Status
from jr2_actors.shell import ActorFault, Timers, tell_quietly
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.shell.last_answer import LastAnswer
from jr2_actors.shell.pools import CountedPool  # a driven VirtualClock sees its jobs
from jr2_actors.shell.stopping import Stops
from jr2_actors.store import messages as store
from jr2_actors.store.actor import STORE_DOWN, StoreActor
from jr2_actors.store.lock import StateLock
from jr2_actors.telemetry import Telemetry
from jr2_actors.values.constants import (
    ACTOR_STOP_SECONDS,
    HEALTH_STALL_SECONDS,
    HEALTH_STORE_CHECK_SECONDS,
    ORCHESTRATOR_ASK_SECONDS,
    PERSIST_ASK_SECONDS,
    RUNS_FINISHED_LISTED,
    STORE_STOP_FLOOR_SECONDS,
    WATCH_HEALTH_MAX_AGE_SECONDS,
    WATCH_HEALTH_WAIT_SECONDS,
)
from jr2_actors.values.errors import Unavailable
from jr2_actors.values.run_ids import Keyed, new_run_id
from jr2_actors.values.timefmt import rfc3339_ms
from jr2_actors.values.workflow import Workflow, WorkflowError
from jr2_actors.values.workflow_memo import WorkflowMemo
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.messages import Health as WatchHealthAsk
from jr2_actors.watch.messages import OwnStamps, RunEnded, WatchHealth
from jr2_actors.workspace.renewals import RenewalLane

log = logging.getLogger(__name__)

DEFAULT_SANDBOX_IMAGE = "ghcr.io/jr2/sandbox:latest"


class Orchestrator:
    def __init__(self, client: KubeClient, *, state_dir: str, signing_key: bytes, namespace: str | None = None,
                 clock: Clock | None = None, sandbox_image: str = DEFAULT_SANDBOX_IMAGE, instance_harness: str = "",
                 stall_bound: float | None = None, workspace_options: Mapping[str, Any] | None = None,
                 kube_threads: int = 12, attach_threads: int = 8, agent_threads: int = 8,
                 telemetry: Telemetry | None = None) -> None:
        if not signing_key:
            raise ValueError("the orchestrator needs a signing key")
        self.client = client
        self.namespace = namespace or client.namespace
        self.state_dir = state_dir
        self.clock = clock or SystemClock()
        self._signing_key = signing_key
        self._sandbox_image = sandbox_image
        self._instance_harness = instance_harness
        self._stall_bound = stall_bound
        self._workspace_options = dict(workspace_options or {})
        self._threads = (kube_threads, attach_threads, agent_threads)
        self.feed_hub = FeedHub()
        self.workflows = WorkflowMemo()  # the workflows parsed: each distinct document checked once
        self.run_table = RunTable()  # GET /runs reads the rows the runs tell, never asks a run
        self._lock = threading.Lock()
        self._runs: dict[str, pykka.ActorRef[Any]] = {}
        self._entering: dict[str, bool] = {}  # runs whose actor is starting: True once it told RunFinished
        self._finished = threading.Condition(self._lock)
        self._env: RunEnv | None = None
        self._watch: pykka.ActorRef[Any] | None = None
        self._watch_health: LastAnswer | None = None  # A listing never queues behind the watch's events
        self._store: pykka.ActorRef[Any] | None = None
        self._pools: list[CountedPool] = []
        self._renewals: RenewalLane | None = None
        self._harness_session: requests.Session | None = None
        self._timers: Timers | None = None
        self._stopping = False
        self._revival: Revival | None = None  # supervision, handed the store once it runs
        self._state_lock = StateLock(state_dir)
        self._broken = ""  # a singleton died: for good, until the process restarts
        self._cancels: set[str] = set()  # runs cancelled while their actor was being restored
        self._submitting: set[str] = set()  # ids whose first row is being written
        self._set_aside: set[str] = set()  # live rows that could not be restored, left as they are
        self._starting = 0  # actors and revivals being started outside the lock: `stop()` waits for them
        self._stops = Stops()
        self.telemetry = telemetry or Telemetry()
        client.measure(self.telemetry.kube)

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> Orchestrator:
        """Raises `StateDirInUse` (another owner), `StoreUnusable` (a file not ours), each one line; what it
        had started is stopped again."""
        self._state_lock.acquire()  # before the store is opened: one owner reads and writes state.db
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self._store = StoreActor.start(self.state_dir, clock=self.clock, parent=self, telemetry=self.telemetry)
        restored = self._store.ask(store.Restore(), timeout=ORCHESTRATOR_ASK_SECONDS)  # StoreUnusable: not ours
        assert isinstance(restored, store.RestoredRuns)
        self._revival = Revival(client=self.client, clock=self.clock, feed_hub=self.feed_hub, store_ref=self._store,
                                restore=self._restore, forget=self._forget)
        # The renewal lane notes the Lease stamps it writes where the watch reads them: a Workspace's own
        # renewal is not delivered back to it, with no message per renewal.
        own_stamps = OwnStamps()
        options: dict[str, Any] = {"namespace": self.namespace, "clock": self.clock, "parent": self,
                                   "telemetry": self.telemetry, "own_stamps": own_stamps}
        if self._stall_bound is not None:
            options["stall_bound"] = self._stall_bound
        self._watch = WatchActor.start(self.client, **options)
        self._watch_health = LastAnswer(self._watch, WatchHealthAsk(), wait=WATCH_HEALTH_WAIT_SECONDS,
                                        max_age=WATCH_HEALTH_MAX_AGE_SECONDS)
        kube, attach, agent = (CountedPool(n, thread_name_prefix=f"jr2-{name}", clock=self.clock)
                               for n, name in zip(self._threads, ("kube", "attach", "agent"), strict=True))
        self._pools = [kube, attach, agent]
        self._renewals = RenewalLane(clock=self.clock, stamps=own_stamps)  # it owns every Lease's due times
        self._harness_session = shared_session(self.telemetry.harness.read_pools(HarnessPools()))  # every Harness call
        self._timers = Timers(self.clock, name="jr2-run-timers")
        self._env = RunEnv(client=self.client, watch=self._watch, store=self._store,
                           feed=self.telemetry.runs.feed_tap(self.feed_hub),
                           signing_key=self._signing_key, kube_pool=kube, attach_pool=attach, agent_pool=agent,
                           timers=self._timers, clock=self.clock, sandbox_image=self._sandbox_image,
                           instance_harness=self._instance_harness, workspace_options=self._workspace_options,
                           telemetry=self.telemetry, table=self.run_table, renewals=self._renewals,
                           harness_session=self._harness_session, stops=self._stops)
        tell_quietly(self._store, store.Healthy())  # its first finding, for /healthz to read
        for bad in restored.unreadable:
            self._put_aside(bad.run_id, bad.problem)
        count = sum(self._restore(record) for record in restored.runs)
        if count:
            log.info("restored %d live run(s) from %s", count, self.state_dir)

    def stop(self, budget: float = ACTOR_STOP_SECONDS) -> None:
        """Within one `budget` in all: each wait below takes what is left of it, so N busy runs cost the
        slowest, not their sum. The runs' share ends `STORE_STOP_FLOOR_SECONDS` before the budget does, so the
        store's stop (the persists asked before it) fits in the budget even when the runs used all of theirs."""
        deadline = time.monotonic() + budget
        runs_deadline = deadline - min(STORE_STOP_FLOOR_SECONDS, budget / 2)
        self._stops.open()  # the runs hand their seats' and Workspaces' stops to it as they stop
        with self._finished:
            self._stopping = True  # nothing new starts; what began to is entered in a moment
            self._finished.wait_for(lambda: self._starting == 0, _left(runs_deadline))
        if self._revival is not None:
            self._revival.stop(runs_deadline)
        with self._lock:
            refs = list(self._runs.values())
        # Every run at once, each its children at once: a stop is no cancel (Sandboxes stay, Leases stop).
        self._stops.ask(refs)
        self._stops.wait(runs_deadline)
        if self._revival is not None:
            self._revival.join(runs_deadline)
        # The store's poison pill follows every persist asked before it; the watch stops beside it.
        self._stops.ask(ref for ref in (self._store, self._watch) if ref is not None)
        self._stops.wait(max(deadline, time.monotonic() + STORE_STOP_FLOOR_SECONDS))
        # What the stopped actors left in flight is nobody's now: an API server that does not answer must not
        # hold the kube pool's shutdown (and serve's SIGTERM budget) for a read timeout.
        self.client.interrupt()
        for pool in self._pools:
            pool.close(_left(deadline))
        if self._renewals is not None:
            self._renewals.shutdown(wait=True)
        if self._harness_session is not None:
            self._harness_session.close()  # every client on it closed with its actor, each ending its own calls
        if self._timers is not None:
            self._timers.stop()
        self.feed_hub.close()
        self._state_lock.release()  # last: nothing of this orchestrator touches state.db any more

    def __enter__(self) -> Orchestrator:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- runs ----------------------------------------------------------------------------------------

    def submit(self, workflow: Workflow | Mapping[str, Any] | object, run_input: Mapping[str, Any] | None = None,
               *, run_id: str | None = None, keyed: Keyed | None = None) -> str:
        """Start a run of a §5 document (or a parsed `Workflow` with its document); a bad document raises
        `WorkflowError` naming the key. `run_input` is kept with the run (the workflow format reads none yet).

        ADR-0065: returns once the run's first row is written — its `Start` step is taken here and saved
        before its actor starts, so an accepted run survives a crash right after. A store that cannot write
        raises `Unavailable` with the reason, and nothing of the run exists. `keyed` is kept with that row."""
        document = workflow if isinstance(workflow, Mapping) else getattr(workflow, "document", None)
        if not isinstance(document, Mapping):
            raise WorkflowError("", "the workflow must be a mapping (a §5 document)")
        parsed = self.workflows.parse(document)  # a release's thousands of one workflow: checked once
        env = self._ready()
        run_id = run_id or new_run_id()
        core = RunCore(run_id, parsed, dict(document), instance_harness=self._instance_harness)
        with self._lock:
            if self._stopping:
                raise Unavailable("the orchestrator is stopping")
            if run_id in self._runs or run_id in self._submitting:
                raise ValueError(f"run {run_id} exists")
            self._submitting.add(run_id)
        try:
            first = core.step(Start(), self.clock.monotonic(), self.clock.wall())
            self._save_first(core, first, keyed)
            self.run_table.enter(RunRow(run_id, listing_doc(core)))  # listed from now; its actor keeps it current
            if self._started(run_id, lambda: RunActor.start(core, env, self, first_step=first)) is None:
                # The row is on disk: the next start runs it.
                log.info("run %s of %s saved while stopping; the next start runs it", run_id, parsed.name)
                return run_id
        finally:
            with self._lock:
                self._submitting.discard(run_id)
        log.info("run %s of %s submitted", run_id, parsed.name)
        return run_id

    def _save_first(self, core: RunCore, first: RunStep, keyed: Keyed | None) -> None:
        assert self._store is not None
        action = next((a for a in first.actions if isinstance(a, Save)), None)
        assert action is not None, "a run's Start step saves its row"
        try:
            self._store.ask(store.Persist(core.run_id, row_status(action.status), core.snapshot(), action.reason,
                                          create=True, keyed=keyed), timeout=PERSIST_ASK_SECONDS)
        except store.StoreError as e:  # the id is taken (a row set aside at boot keeps it)
            raise ValueError(str(e)) from None
        except STORE_DOWN as e:
            log.warning("a run of %s was refused: the store cannot write (%s: %s)", core.workflow.name,
                        type(e).__name__, e)
            if isinstance(e, pykka.Timeout):  # the create may still land: what follows it in order takes it back
                tell_quietly(self._store, store.Withdraw(core.run_id))
            raise Unavailable(f"the store cannot write: {e}") from None

    def made_by(self, key: str) -> tuple[str, Keyed] | None:
        """The run a request with this `Idempotency-Key` made, and what its row kept, while the row is kept."""
        try:
            found = self._ready().store.ask(store.FindKey(key), timeout=ORCHESTRATOR_ASK_SECONDS)
            return cast("tuple[str, Keyed] | None", found)
        except (store.DiskWriteFailed, store.StoreUnusable, pykka.Timeout, pykka.ActorDeadError) as e:
            raise Unavailable(f"the store cannot be read: {e}") from None

    def status(self, run_id: str) -> dict[str, Any] | None:
        """RunStatus of a live run, or of a finished one from the store until the sweep removes it."""
        ref = self._live(run_id)
        if ref is not None:
            try:
                doc = cast(dict[str, Any], ref.ask(Status(), timeout=ORCHESTRATOR_ASK_SECONDS))
            except pykka.ActorDeadError:
                pass  # it just finished: the store has its last row
            else:
                problem = self.cluster_problem() if doc.get("status") == "running" else None
                return doc if problem is None else {**doc, "cluster": problem}
        stored = self._stored(run_id)
        return None if stored is None else status_doc(stored[0])

    def cluster_problem(self) -> dict[str, Any] | None:
        """While the watch has not listed or fails, what `status` and `runs` add: since when, the last error."""
        if self._watch_health is None:
            return None
        watch = self._watch_health.get()  # its last answer while the watch is busy (None once 5 s old)
        if not isinstance(watch, WatchHealth) or (watch.listed and not watch.failures):
            return None
        doc: dict[str, Any] = {"reachable": False, "listed": watch.listed, "failures": watch.failures}
        if watch.failing_for is not None:
            doc["since"] = rfc3339_ms(self.clock.wall() - watch.failing_for)
        if watch.last_error:
            doc["error"] = watch.last_error
        return doc

    def runs(self, prefix: str = "") -> list[dict[str, Any]]:
        """`GET /runs`: live runs only (ADR-0065) whose id starts with `prefix`, from the run table (no run asked)."""
        out = self.run_table.rows(prefix)
        problem = self.cluster_problem() if out else None
        return out if problem is None else [{**line, "cluster": problem} for line in out]

    def runs_encoded(self, prefix: str = "") -> list[bytes]:
        """`runs(prefix)`, each line as the JSON the run told (joined, not encoded, per call); while
        the cluster does not answer, each gets `runs`'s `"cluster"` member, spliced in before its `}`."""
        out = self.run_table.encoded(prefix)  # the table is the live set: neither this lock nor a filter
        problem = self.cluster_problem() if out else None
        return out if problem is None else with_member(out, "cluster", problem)

    def finished_runs(self, prefix: str = "", limit: int = RUNS_FINISHED_LISTED) -> list[dict[str, Any]]:
        """`runs --all`: finished runs still in the store (ADR-0065's week), newest end first, not restored."""
        if self._store is None:
            return []
        records = cast(list[store.RunRecord],
                       self._store.ask(store.ListFinished(prefix, limit), timeout=ORCHESTRATOR_ASK_SECONDS))
        with self._lock:
            shown_elsewhere = set(self._runs) | self._set_aside
        return [stored_listing_doc(r.run_id, r.blob) for r in records if r.run_id not in shown_elsewhere]

    def document(self, run_id: str) -> dict[str, Any] | None:
        """The workflow document a run was submitted with (`resubmit`): every run's first row holds it."""
        record = None if self._is_set_aside(run_id) else self._fetch(run_id)
        document = record.blob.get("document") if record is not None else None
        return document if isinstance(document, dict) else None

    def cancel(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            ref = self._runs.get(run_id)
            if ref is not None:  # kept until the run finishes: an actor revived meanwhile is told again
                self._cancels.add(run_id)
        if ref is not None:
            tell_quietly(ref, Cancel())  # a dead actor's inbox is dropped: its revival carries the cancel
        return self.status(run_id)

    def feed(self, run_id: str, after: int, wait: float) -> FeedRead | None:
        """The run's feed after `after`: from the hub while it holds the run, else from its row (until swept)."""
        if self.feed_hub.known(run_id):
            return self.feed_hub.read(run_id, after, wait)
        stored = self._stored(run_id)
        if stored is None:
            return None
        core, live = stored
        return FeedRead([e for e in core.feed if e.id > after], not live, core.feed_dropped)

    def wait_finished(self, run_id: str, timeout: float) -> dict[str, Any] | None:
        """Block until the run has finished (embedding tests, the demo): its final RunStatus (so `["status"]`
        says how it ended), or None when it has not finished within `timeout`."""
        with self._finished:
            if not self._finished.wait_for(lambda: run_id not in self._runs, timeout):
                return None
        return self.status(run_id)

    # -- the API's Backend ---------------------------------------------------------------------------

    def interrupt_feeds(self) -> None:
        self.feed_hub.interrupt()

    def health(self) -> tuple[bool, str]:
        """Ready now? Read from what the actors publish (as `/metrics` is), never asked: false when progress stops
        (the watch, the store's writes, an actor stuck), never for being busy; a dead singleton, until a restart."""
        if self._watch is None or self._store is None:
            return False, "not started"
        if self._broken:
            return False, self._broken
        waiting = None if self._revival is None else self._revival.waiting()
        if waiting is not None:
            return False, f"run {waiting[0]} died and waits for the store to restore it: {waiting[1]}"
        watch, stored, checked = self.telemetry.watch.state, self.telemetry.store, self.telemetry.store.checked_at
        if stored.write_error or checked is None or self.clock.monotonic() - checked > HEALTH_STORE_CHECK_SECONDS:
            tell_quietly(self._store, store.Healthy())  # its finding is published for the next probe
        if watch is None or not watch.listed:  # not ready before the cluster has answered once
            return False, f"the Sandbox watch has not listed yet ({watch.failures if watch else 0} failures so far)"
        if watch.degraded or watch.phase == "stopped":
            return False, f"the Sandbox watch is degraded ({watch.failures} failures in a row)"
        if stored.write_error:
            return False, f"the store cannot write: {stored.write_error}"
        if checked is None:
            return False, "the store has not said yet whether it can write"
        stalled = self.telemetry.actors.stalled(HEALTH_STALL_SECONDS)
        return (False, stalled) if stalled else (True, "")

    def metrics(self) -> str:
        """`GET /metrics`: this orchestrator's registry in the Prometheus text format 0.0.4."""
        return self.telemetry.exposition().decode()

    # -- what the RunActors tell -----------------------------------------------------------------------

    def tell(self, message: Any) -> None:
        if isinstance(message, RunFinished):
            self._forget(message.run_id)
        elif isinstance(message, ActorFault) and message.kind in ("WatchActor", "StoreActor"):
            # Our bug killed one of the process's singletons: /healthz says so, so the pod is restarted.
            self._broken = f"the {message.kind} died: {message.error}"
            log.error("%s", self._broken)
        elif isinstance(message, ActorFault) and self._revival is not None:
            self._revival.run_died(message)

    # -- internals -----------------------------------------------------------------------------------

    def _ready(self) -> RunEnv:
        if self._env is None:
            raise RuntimeError("the orchestrator is not started")
        return self._env

    def _live(self, run_id: str) -> pykka.ActorRef[Any] | None:
        with self._lock:
            return self._runs.get(run_id)

    def _forget(self, run_id: str) -> None:
        """The run is over here (it finished, or a revival gave it up)."""
        with self._finished:
            self._runs.pop(run_id, None)
            if run_id in self._entering:
                self._entering[run_id] = True  # ended before `_started` entered it
            self._cancels.discard(run_id)
            self.run_table.forget(run_id)  # before a waiter wakes: finished means unlisted
            self._finished.notify_all()
        if self._watch is not None:  # no waiter comes back for its Sandboxes: the watch keeps nothing of theirs
            tell_quietly(self._watch, RunEnded(run_id))

    def _fetch(self, run_id: str) -> store.RunRecord | None:
        if self._store is None:
            return None
        record = self._store.ask(store.Fetch(run_id), timeout=ORCHESTRATOR_ASK_SECONDS)
        return record if isinstance(record, store.RunRecord) else None

    def _stored(self, run_id: str) -> tuple[RunCore, bool] | None:
        """The run as its row keeps it (nothing started), and whether it is live; None for a row set aside."""
        if self._is_set_aside(run_id):
            return None
        record = self._fetch(run_id)
        if record is None:
            return None
        core, _ = RunCore.restore(record.blob, self.clock.monotonic(), self.clock.wall())
        return core, record.status == "live"

    def _is_set_aside(self, run_id: str) -> bool:
        with self._lock:  # the restore's thread adds to it while the API's threads read it
            return run_id in self._set_aside

    def _put_aside(self, run_id: str, problem: str) -> None:
        """A live row that cannot be restored: one line naming it; the row stays as it is on disk, counted
        in `/metrics`, and every other run goes on."""
        log.error("run %s cannot be restored from its row (%s); it is set aside, its row left as it is",
                  run_id, problem)
        with self._lock:
            self._set_aside.add(run_id)
            count = len(self._set_aside)
        self.telemetry.store.set_aside(count)

    def _restore(self, record: store.RunRecord) -> bool:
        env = self._ready()
        try:
            core, step = RunCore.restore(record.blob, self.clock.monotonic(), self.clock.wall(),
                                         instance_harness=self._instance_harness,
                                         feed_after=self.feed_hub.last_id(record.run_id), parse=self.workflows.parse)
        except Exception as e:  # the row is outside input: whatever it holds, it must not stop another's restore
            self._put_aside(record.run_id, f"{type(e).__name__}: {e}")
            return False
        self.run_table.enter(RunRow(core.run_id, listing_doc(core)))  # before its actor starts: it owns the core
        ref = self._started(core.run_id, lambda: RunActor.start(core, env, self, restored=True, restore_step=step))
        if ref is None:
            return False
        with self._lock:
            cancelled = core.run_id in self._cancels
        if cancelled:
            tell_quietly(ref, Cancel())
        return True

    def _started(self, run_id: str, start: Callable[[], pykka.ActorRef[Any]]) -> pykka.ActorRef[Any] | None:
        """Start a run's actor outside the lock (which guards only the run table), then enter it; None once
        stopping. `stop()` waits for a start under way, so it stops every actor started."""
        with self._lock:
            if self._stopping:
                if run_id not in self._runs:  # its row is on disk for the next start; no actor lists it here
                    self.run_table.forget(run_id)
                return None
            self._starting += 1
            self._entering[run_id] = False
        ref = None
        try:
            ref = start()
        except BaseException:
            with self._lock:
                reviving = run_id in self._runs  # its dead ref stays listed while its revival tries again
            if not reviving:
                self.run_table.forget(run_id)  # no actor keeps it current, nor forgets it: unlisted (its row stays)
            raise
        finally:
            with self._finished:
                self._starting -= 1
                # A run whose first step ended it told `RunFinished` before it was entered: entered now, its
                # dead ref would be listed for good.
                ended = self._entering.pop(run_id, False)
                if ref is not None and not ended:
                    self._runs[run_id] = ref
                self._finished.notify_all()
        return ref


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0)
