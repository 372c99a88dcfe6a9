"""RunActor: one run, a thin shell over `RunCore` (DESIGN.md).

It is the parent of its run's WorkspaceActors (one per Workspace path held) and AgentActors (one per Agent
seat that takes a Turn). It feeds the core what they report, and performs what the core decides — in
order, with the one rule ADR-0065 keeps the store synchronous for: when a step asks to `Save`, the
blob is saved (an ask of the StoreActor: the row is in the OS's hands on return) before any other action
of that step leaves the actor. Feed lines go to the `FeedHub` (and the log): a saved step's lines ride
with its persist and the StoreActor publishes them right after its commit (a reader is woken by
the store's thread, not after this actor's wake-up from the ask; the row is still on disk first); the
lines of a step that saves nothing are published here; `Status` is answered for the
API; the run's end is told to the orchestrator (`RunFinished`) once every teardown is over.

A persist the store cannot write now (`STORE_DOWN`: a read-only or full disk, a store that does not
answer) does not end the run: the step is held — none of its other actions leaves, its feed lines are not
published, and every message that arrives meanwhile waits in order — while the same save is tried again on
`PERSIST_RETRY_BACKOFF`. Once it lands the step goes on and the waiting messages are taken in order; a stop
meanwhile leaves the last row written, which a restart restores (ADR-0065).

A child that dies of our bug (an `ActorFault`) is an event the run can act on: a Workspace's actor is a
faulted Workspace, an Agent's a Turn fault.
Next stage: the feed (`feed/hub.py`), the listing (`listing/table.py`) and the store it saves to.
"""

from __future__ import annotations

import logging
from collections import deque
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

import pykka
import requests

from jr2_actors.agent import actor as agent_actor
from jr2_actors.agent import messages as seat
from jr2_actors.harness.tokens import INSTANCE_HARNESS, harness_token
from jr2_actors.kube.client import KubeClient
from jr2_actors.run import messages as run
from jr2_actors.run import metrics as run_metrics
from jr2_actors.run.core import RunCore
from jr2_actors.run.feed.hub import Published
from jr2_actors.run.feed.lines import FeedEvent
from jr2_actors.run.feed.wire import feed_doc
from jr2_actors.run.listing.table import RunRow
from jr2_actors.run.listing.wire import listing_doc, status_doc
from jr2_actors.run.metrics import RunTelemetry, RunView
from jr2_actors.run.readlog import ReadLog
from jr2_actors.shell import ActorFault, Deadline, Recipient, Shell, Timers, jitter_source, tell_quietly
from jr2_actors.shell.clock import Clock
from jr2_actors.shell.stopping import Stops
from jr2_actors.store import messages as store
from jr2_actors.store.actor import STORE_DOWN, save
from jr2_actors.values.constants import PERSIST_ASK_SECONDS, PERSIST_RETRY_BACKOFF
from jr2_actors.watch.identity import sandbox_name
from jr2_actors.workspace import messages as ws
from jr2_actors.workspace.actor import WorkspaceActor
from jr2_actors.workspace.manifest import WorkspaceSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunEnv:
    """What every RunActor of one orchestrator shares: the one client, the one watch, the store, pools."""

    client: KubeClient
    watch: pykka.ActorRef[Any]
    store: pykka.ActorRef[Any]
    feed: Recipient
    signing_key: bytes = field(repr=False)
    kube_pool: Executor
    attach_pool: Executor
    agent_pool: Executor
    timers: Timers
    clock: Clock
    sandbox_image: str
    instance_harness: str = ""
    idle_timeout: str = "30m"
    workspace_options: dict[str, Any] = field(default_factory=dict)
    telemetry: RunTelemetry | None = field(default=None, repr=False)  # the orchestrator's metrics
    table: Recipient | None = None  # The orchestrator's RunTable, told the run's row after each step
    # the lane every Workspace's Lease renewal leaves from (`workspace/renewals.py`), handed on as it is
    renewals: object = None
    harness_session: requests.Session | None = field(default=None, repr=False)  # Every Harness call's
    stops: Stops = field(default_factory=Stops, repr=False)  # the orchestrator's stop waits for the children too


@dataclass(frozen=True)
class _Tick:
    pass


@dataclass(frozen=True)
class _SaveAgain:
    """The held step's persist is due to be tried again."""


def row_status(status: run.RunStatusName) -> str:
    """The store's status for a run's: a running run's row is `live`."""
    return "live" if status == "running" else status


class RunActor(Shell):
    log_key = "run"  # its name is the run id: every line its thread (and its children's) logs carries it

    def __init__(self, core: RunCore, env: RunEnv, parent: Recipient, *, restored: bool = False,
                 restore_step: run.RunStep | None = None, first_step: run.RunStep | None = None) -> None:
        """`first_step`: the run's `Start` step, taken and saved by the orchestrator's submit (ADR-0065: the
        row is on disk before the submission is answered); the actor performs the rest of it."""
        super().__init__(telemetry=env.telemetry)
        self.metrics = run_metrics.OFF if env.telemetry is None else env.telemetry.runs
        self.core = core
        self.env = env
        self.parent = parent
        self.name = core.run_id
        self._restore_step = restore_step
        self._first_step = first_step
        self._restored = restored
        self._workspaces: dict[str, pykka.ActorRef[Any]] = {}
        self._agents: dict[str, pykka.ActorRef[Any]] = {}
        self._deadline: Deadline | None = None
        self._done = False
        self._read_log = ReadLog()
        self._held: run.RunStep | None = None  # a step whose persist has not landed: nothing after it leaves
        self._waiting: deque[Any] = deque()  # what arrived while a step was held, taken in order after it
        self._save_failures = 0
        self._save_again: int | None = None
        self._jitter = jitter_source(None)

    def started(self) -> None:
        self._deadline = Deadline(self.env.timers, self.actor_ref, _Tick())
        if self._restore_step is not None:
            # The feed so far comes back with the run: a reader resumes from its Last-Event-ID across restarts.
            tell_quietly(self.env.feed, Published(self.core.run_id, tuple(self.core.feed),
                                                  dropped=self.core.feed_dropped))
            self._perform(self._restore_step)
        elif self._first_step is not None:
            self._perform(self._first_step, saved=True)  # its lines are ours to publish
        else:
            self._step(run.Start())

    def cleanup(self) -> None:
        self.env.timers.cancel(self._save_again)
        self.metrics.forget(self.core.run_id)
        if self._deadline is not None:
            self._deadline.cancel()
        self.env.stops.handed([*self._agents.values(), *self._workspaces.values()])

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, run.Status):
            return status_doc(self.core)
        if isinstance(message, _SaveAgain):
            self._save_again = None
            self._resume()
        elif self._held is not None:
            self._waiting.append(message)  # ADR-0065: nothing moves before the held step's row is written
        else:
            self._take(message)
        return None

    def _take(self, message: Any) -> None:
        if isinstance(message, _Tick):
            if self._deadline is not None:
                self._deadline.fired()
            self._step(run.RunTick())
        elif isinstance(message, run.Cancel):
            self._step(message)  # the core's input as it is
        elif isinstance(message, ws.Report):
            if isinstance(message, ws.Released):
                self._workspaces.pop(message.path, None)
            self._step(run.FromWorkspace(message))
        elif isinstance(message, ActorFault):
            self._child_failed(message)
        elif isinstance(message, seat.ToRun):
            if isinstance(message, seat.KillsRead):
                self._log_read(message)
            self._step(run.FromSeat(message))  # the seat's report as it is

    # -- the core's decisions, performed -----------------------------------------------------------------

    def _step(self, event: run.Input) -> None:
        self._perform(self.core.step(event, self.env.clock.monotonic(), self.env.clock.wall()))

    def _perform(self, step: run.RunStep, *, saved: bool = False) -> None:
        # ADR-0065: the row is written before this step's next side effect leaves the actor.
        if not saved and not self._save(step):
            self._hold(step)
            return
        self._carry_out(step, published=not saved and _persists(step))

    def _save(self, step: run.RunStep) -> bool:
        """Write the step's row if it asks for one; False when the store cannot write now (our bug —
        `StoreError` — still raises: the supervisor restores the run from its last row)."""
        action = next((a for a in step.actions if isinstance(a, run.Save)), None)
        if action is None:
            return True
        # The step's feed lines are the store's to publish, once its row is committed (ADR-0065).
        lines = (self.env.feed, Published(self.core.run_id, step.reports)) if step.reports else None
        try:
            save(self.env.store, store.Persist(self.core.run_id, row_status(action.status), self.core.snapshot(),
                                                     action.reason, then=lines), PERSIST_ASK_SECONDS)
        except STORE_DOWN as e:
            self._save_failures += 1
            if self._save_failures == 1:
                log.warning("run %s: its row could not be written (%s: %s); it holds before its next step and "
                            "tries again", self.core.run_id, type(e).__name__, e)
            return False
        if self._save_failures:
            log.warning("run %s: its row is written again after %d failed tries; it goes on", self.core.run_id,
                        self._save_failures)
            self._save_failures = 0
        return True

    def _hold(self, step: run.RunStep) -> None:
        self._held = step
        ref = self.actor_ref
        due = self.env.clock.monotonic() + PERSIST_RETRY_BACKOFF.delay(self._save_failures, self._jitter)
        self._save_again = self.env.timers.schedule(due, lambda: tell_quietly(ref, _SaveAgain()))

    def _resume(self) -> None:
        """Try the held step's save again (the core has not moved since, so the snapshot is the same); once
        it lands, the step goes on and what waited is taken in order, until a step holds again."""
        step = self._held
        if step is None:
            return
        if not self._save(step):
            self._hold(step)
            return
        self._held = None
        self._carry_out(step, published=True)
        while self._held is None and self._waiting:
            self._take(self._waiting.popleft())

    def _carry_out(self, step: run.RunStep, *, published: bool = False) -> None:
        """`published`: the step's lines rode with its persist, and the store has published them."""
        if step.reports:
            for event in step.reports:
                log.info("run %s: %s", self.core.run_id, _line(event))
            if not published:
                tell_quietly(self.env.feed, Published(self.core.run_id, step.reports))
        # GET /runs reads this row; told before the actions, so it lands before `RunFinished` — and
        # never after it (a seat's late report, stepped once the run ended, must not list a finished run again).
        if not self._done:
            tell_quietly(self.env.table, RunRow(self.core.run_id, listing_doc(self.core)))
        for action in step.actions:
            self._act(action)
        if self._deadline is not None:
            self._deadline.arm(step.deadline)
        self.metrics.update(RunView.of(self.core))  # the run's state, Workspaces and waits, for the scrape

    def _act(self, action: run.Action) -> None:
        if isinstance(action, run.Save):
            return
        if isinstance(action, run.PlaceWorkspace):
            self._place(action)
        elif isinstance(action, run.ReleaseWorkspace):
            ref = self._workspaces.get(action.path)
            if ref is None:  # its actor is gone: nothing holds the Sandbox, the teardown is over
                self.actor_ref.tell(ws.Released(action.path, deleted=False))
            else:
                tell_quietly(ref, ws.Release(action.why))
        elif isinstance(action, run.ToAgent):
            self._to_agent(action)
        elif isinstance(action, run.Finished):
            self._finish(action)

    def _to_agent(self, action: run.ToAgent) -> None:
        message = action.message
        if isinstance(message, seat.StartTurn):
            # The token is the shell's to make: the signing key never enters the core or the blob.
            path = self.core.workflow.agents[action.agent].workspace
            holder = sandbox_name(self.core.run_id, path) if path else INSTANCE_HARNESS
            token = harness_token(self.env.signing_key, holder)
            self._agent(action.agent).tell(replace(message, token=token))
        elif isinstance(message, (seat.AbortTurn, seat.ReadKills)):
            tell_quietly(self._agents.get(action.agent), message)  # only a seat that exists has a Turn to stop
        else:
            self._agent(action.agent).tell(message)

    def _place(self, action: run.PlaceWorkspace) -> None:
        definition = self.core.workflow.workspaces[action.path]
        spec = WorkspaceSpec(self.core.run_id, self.core.workflow.name, definition,
                             image=definition.image or self.env.sandbox_image, idle_timeout=self.env.idle_timeout)
        self._workspaces[action.path] = WorkspaceActor.start(
            spec, client=self.env.client, watch=self.env.watch, parent=self.actor_ref,
            signing_key=self.env.signing_key, kube_pool=self.env.kube_pool, attach_pool=self.env.attach_pool,
            clock=self.env.clock, restored=action.restored, timers=self.env.timers, telemetry=self.env.telemetry,
            renewals=self.env.renewals, harness_session=self.env.harness_session, **self.env.workspace_options)

    def _agent(self, name: str) -> pykka.ActorRef[Any]:
        ref = self._agents.get(name)
        if ref is None or not ref.is_alive():
            ref = agent_actor.AgentActor.start(name, parent=self.actor_ref, pool=self.env.agent_pool,
                                               clock=self.env.clock, timers=self.env.timers,
                                               telemetry=self.env.telemetry,
                                               harness_session=self.env.harness_session)
            self._agents[name] = ref
        return ref

    def _finish(self, action: run.Finished) -> None:
        if self._done:
            return
        self._done = True
        tell_quietly(self.env.feed, Published(self.core.run_id, (), finished=True))
        log.info("run %s ended %s%s", self.core.run_id, action.status, f": {action.fault}" if action.fault else "")
        tell_quietly(self.parent, run.RunFinished(self.core.run_id, action.status, action.fault))
        self.actor_ref.stop(block=False)

    # -- what the children say -------------------------------------------------------------------------

    def _log_read(self, message: seat.KillsRead) -> None:
        """ADR-0062's logging of the reads before admissions (`run/readlog.py` holds the rules)."""
        if not message.asked:
            return
        if message.read is None:
            lines = [line] if (line := self._read_log.failed(message.source, message.problem)) else []
        else:
            lines = self._read_log.read(message.source, message.read.problems)
        for line in lines:
            log.warning("run %s: %s", self.core.run_id, line)

    def _child_failed(self, fault: ActorFault) -> None:
        log.error("run %s: %s %s failed: %s", self.core.run_id, fault.kind, fault.name, fault.error)
        if fault.kind == "WorkspaceActor":
            self._workspaces.pop(fault.name, None)
            self._step(run.FromWorkspace(ws.Faulted(fault.name, f"its actor failed: {fault.error}", actor=True)))
        elif fault.kind == "AgentActor" and self.core.turn is not None and self.core.turn.agent == fault.name:
            self._agents.pop(fault.name, None)
            self._step(run.FromSeat(seat.TurnFault(fault.name, self.core.turn.id, "actor",
                                                   f"the Agent's actor failed: {fault.error}")))


def _persists(step: run.RunStep) -> bool:
    return any(isinstance(a, run.Save) for a in step.actions)


def _line(event: FeedEvent) -> str:
    doc = feed_doc(event)
    doc.pop("id", None)
    doc.pop("at", None)
    kind = doc.pop("kind")
    return f"{kind} " + " ".join(f"{k}={v}" for k, v in doc.items())
