"""RunCore: one run's workflow engine over a parsed workflow (CONTRACTS.md §5). Pure.

Theory of operation. A run is in one workflow state at a time. Entering a state:
- places the Workspaces it `holds` — a Workspace already held is kept; one the new state no longer holds
  is torn down (ADR-0064: deleted when it never ran); a Workspace held again while its predecessor is
  still being torn down is placed only once that teardown is over (same name, so a successor never races
  the delete);
- starts its `turn` once the agent's Workspace runs (a Menu-only agent starts at once);
- arms its `after`, which bounds the whole state, a `placing` wait included (ADR-0064: jr2 sets no
  deadline of its own on a wait; the workflow's `after` does).

What moves the run (`EVENTS` below is the table docs/architecture.md prints):
- a pick the Turn makes (`Picked`) is answered (`over: true`) and moves the run along `on`;
- `workspace.lost` (a Workspace's Sandbox lost or gone) and `agent.fault` (a Turn's fault, an Agent that
  ends its Turn without a pick after a nudge) go where the state's `on` says, and when it says nothing
  the run ends `failed` with the event's reason as its fault (`Evicted: …`, `provider limit: …`,
  `memory limit (OOMKilled, limit …): …`);
- `after` fires; a cancel ends the run `cancelled`; a Workspace that faults ends it `error`;
- a `{final: done|failed}` state ends it `done` or `failed`.
A run that ends stops its Turn, tears its Workspaces down (done: deleted; stopped or failed: what ran is
kept for inspection, what never ran is deleted) and is over when every teardown is.

Persistence (ADR-0065): every step that changed what a restore needs asks for `Save` first — the shell
saves the blob before it performs any other action of that step. `snapshot()` is plain JSON and
`RunCore.restore(blob, …)` continues where the run was: its Workspaces come back with what they knew
(`Restored`), and the watch's first list reconciles them.

Time: monotonic `now` for deadlines, wall `wall` for what is shown and stored. The core reads no clock.
Next stage: `actor.py`, the RunActor that performs its steps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from jr2_actors.run import blob
from jr2_actors.run.blob import FEED_KEEP
from jr2_actors.run.feed.lines import (
    AfterLine,
    EndedLine,
    EventLine,
    FeedEvent,
    FeedLine,
    RunningLine,
    StartedLine,
    StateLine,
    UnknownLine,
    WorkspaceFaultLine,
)
from jr2_actors.run.messages import (
    Action,
    Cancel,
    Finished,
    FromWorkspace,
    Input,
    PlaceWorkspace,
    ReleaseWorkspace,
    RunStatusName,
    RunStep,
    RunTick,
    Save,
    Start,
    ToAgent,
    WorkspaceRecord,
)
from jr2_actors.run.notices import Ledger
from jr2_actors.run.turn import NUDGE_LIMIT, TurnKeeper
from jr2_actors.run.turn_record import HarnessGone, RunAt, TurnOut, TurnRecord
from jr2_actors.values.constants import FEED_IDS_RESERVED, RUN_PATH_KEEP
from jr2_actors.values.step import OffTable, Step
from jr2_actors.values.workflow import Parse, Workflow, parse_workflow
from jr2_actors.workspace import messages as ws


class RunCore:
    def __init__(self, run_id: str, workflow: Workflow, document: Mapping[str, Any], *,
                 instance_harness: str = "") -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.document = dict(document)  # the §5 document as submitted: the blob restores from it
        self.instance_harness = instance_harness
        self.status: RunStatusName = "running"
        self.state = workflow.start
        self.path: list[str] = [workflow.start]  # the states entered, in order (the newest RUN_PATH_KEEP)
        self.path_dropped = 0  # how many older entries `path` no longer holds
        self.fault: str | None = None
        self.started_wall: float | None = None  # When it started and ended (wall), for runs/status
        self.ended_wall: float | None = None
        # How long it ran, once ended: on the monotonic clock from `_started_mono` (a wall step cannot bend
        # it); `blob.restore` says what a run opened by an earlier process counts from.
        self.duration_seconds: float | None = None
        self._started_mono: float | None = None
        self.workspaces: dict[str, WorkspaceRecord] = {}
        self.ended_workspaces: dict[str, str] = {}  # path → deleted | kept: what a teardown left
        self.ledger = Ledger()
        self.turns = TurnKeeper(run_id, workflow, self.ledger, instance_harness=instance_harness)
        self.feed: deque[FeedEvent] = deque(maxlen=FEED_KEEP)
        self.feed_next = 1
        self.feed_dropped = 0  # the newest id that left the kept lines (0: none): a reader before it missed lines
        self._feed_saved = 1  # the id the last saved blob reserves up to: a restore numbers from there
        self.after_wall: float | None = None
        self._after_mono: float | None = None
        self._finished = False
        self._out: list[Action | FeedEvent] = []
        self._persist = False
        self._now = 0.0
        self._wall = 0.0

    # -- the one entry point -------------------------------------------------------------------------

    def step(self, event: Input, now: float, wall: float) -> RunStep:
        self._out, self._persist = [], False
        self._now, self._wall = now, wall
        if isinstance(event, Start):
            if self.turns.count or self.workspaces:
                raise OffTable(f"run {self.run_id}: started twice")
            self.started_wall, self._started_mono = wall, now
            self._feed(StartedLine(self.workflow.name, self.state))
            self._enter(self.state)
        elif isinstance(event, Cancel):
            if self.status == "running":
                self._end("cancelled", event.reason)
        elif isinstance(event, RunTick):
            self._tick()
        elif isinstance(event, FromWorkspace):
            self._workspace(event.report)
        else:
            self._adopt(self.turns.from_seat(event.report, self._at()))
        self._maybe_finished()
        out, self._out = self._out, []
        actions = [x for x in out if not isinstance(x, FeedEvent)]
        if self._persist:
            self._feed_saved = self.feed_next + FEED_IDS_RESERVED  # what the snapshot saved now reserves
            # The row stays live until every teardown is over: a crash in between restores the run and
            # finishes its deletes (ADR-0064) — a finished row is never restored (ADR-0065).
            actions.insert(0, Save(self.status if self._finished else "running", self.fault))
        return Step(tuple(actions), tuple(x for x in out if isinstance(x, FeedEvent)), self.deadline)

    @property
    def deadline(self) -> float | None:
        if self.status != "running":
            return None
        turn = self.turn
        # A lost stream waits for a restart's judgment under way: the restart may explain it.
        lost = turn.lost_until if turn is not None and turn.lost_reason and turn.restart is None else None
        return min((t for t in (self._after_mono, lost) if t is not None), default=None)

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def turn(self) -> TurnRecord | None:
        """The Turn under way (its keeper's)."""
        return self.turns.turn

    # -- the Turn ------------------------------------------------------------------------------------

    def _at(self) -> RunAt:
        return RunAt(self._now, self._wall, self.status == "running", self.workspaces)

    def _adopt(self, out: TurnOut) -> None:
        """What a call of the Turn asked: its lines and messages, a save, then its move of the run."""
        for x in out.out:
            if isinstance(x, ToAgent):
                self._out.append(x)
            else:
                self._feed(x)
        self._persist = self._persist or out.persist
        if out.enter is not None:
            self._enter(out.enter)
        elif out.event is not None:
            self._event(*out.event)

    def _stop_turn(self) -> None:
        self._adopt(self.turns.stop(self._at()))

    def _start_waiting_turn(self) -> None:
        self._adopt(self.turns.start_waiting(self._at()))

    # -- states ----------------------------------------------------------------------------------------

    def _enter(self, name: str) -> None:
        state = self.workflow.states[name]
        previous = self.state
        self.state = name
        self._persist = True
        self._stop_turn()
        if previous != name or not self.feed or self.feed[-1].kind != "started":
            self._feed(StateLine(name, previous))
            self.path.append(name)
            if len(self.path) > RUN_PATH_KEEP:
                del self.path[0]
                self.path_dropped += 1
        if state.final is not None:
            self._end(state.final, self.fault if state.final == "failed" else None)
            return
        held = set(state.holds)
        for path, record in self.workspaces.items():
            if path not in held and not record.releasing:
                self._release(record, "teardown")
        for path in state.holds:
            self._hold(path)
        if state.after_seconds is not None:
            self._after_mono = self._now + state.after_seconds
            self.after_wall = self._wall + state.after_seconds
        else:
            self._after_mono = self.after_wall = None
        if state.turn is not None:
            self._adopt(self.turns.new_turn(state, self._at()))

    def _hold(self, path: str) -> None:
        record = self.workspaces.get(path)
        if record is not None and record.releasing:
            record.held_again = True  # placed again once its predecessor's teardown is over
            return
        if record is not None and record.phase in ("lost", "faulted"):
            # ADR-0064: a state that holds a lost Workspace again gets a new one under the same name: the old
            # one is torn down first, then placed again (as a successor is).
            self._release(record, "teardown")
            record.held_again = True
            return
        if record is not None:
            return  # kept across states that hold it again
        self.workspaces[path] = WorkspaceRecord(path)
        self._out.append(PlaceWorkspace(path))

    def _release(self, record: WorkspaceRecord, why: ws.ReleaseWhy) -> None:
        record.releasing = True
        record.held_again = False
        record.waiting = None
        self._out.append(ReleaseWorkspace(record.path, why))

    def _end(self, status: RunStatusName, fault: str | None) -> None:
        if self.status != "running":
            return
        self.status = status
        self.fault = fault
        self.ended_wall = self._wall
        if self._started_mono is not None:
            self.duration_seconds = round(max(0.0, self._now - self._started_mono), 3)
        self._persist = True
        self._after_mono = self.after_wall = None
        self._stop_turn()
        why: ws.ReleaseWhy = {"done": "teardown", "cancelled": "run-stopped"}.get(status, "run-faulted")  # type: ignore[assignment]
        for record in self.workspaces.values():
            if not record.releasing:
                self._release(record, why)
            record.held_again = False
        self._feed(EndedLine(status, fault))

    def _maybe_finished(self) -> None:
        if self.status != "running" and not self._finished and not any(r.releasing for r in
                                                                           self.workspaces.values()):
            self._finished = True
            self._persist = True  # the finished run's row shows what each teardown left
            self._out.append(Finished(self.status, self.fault))

    def _tick(self) -> None:
        self._adopt(self.turns.tick(self._at()))
        if self.status == "running" and self._after_mono is not None and self._now >= self._after_mono:
            state = self.workflow.states[self.state]
            assert state.after_to is not None
            self._feed(AfterLine(self.state, state.after_seconds or 0.0, state.after_to))
            self._enter(state.after_to)

    def _event(self, event: str, reason: str) -> None:
        """`workspace.lost` or `agent.fault`: where the state's `on` says, else the run fails with the reason."""
        if self.status != "running":
            return
        target = self.workflow.states[self.state].on.get(event)
        self._feed(EventLine(event, reason, target))
        if target is None:
            self._end("failed", reason)
        else:
            self.fault = reason
            self._enter(target)

    # -- Workspaces --------------------------------------------------------------------------------------

    def _workspace(self, report: ws.Report) -> None:
        record = self.workspaces.get(report.path)
        if record is None:
            return  # a Workspace of no concern any more
        if isinstance(report, ws.Released):
            record.releasing = False
            again = record.held_again
            del self.workspaces[report.path]
            self.ended_workspaces[report.path] = "deleted" if report.deleted else "kept"
            self._persist = True  # a restore must not tear down (or write) again what is gone
            if again and self.status == "running":
                self._hold(report.path)
            return
        if isinstance(report, ws.Saved):
            if report.restored != record.restored:
                record.restored = report.restored
                self._persist = True
            return
        if record.releasing:
            if isinstance(report, ws.Faulted) and report.actor:
                # Its actor died mid-teardown (our bug): nothing is left to finish the delete, so the teardown
                # is over and the run can finish; what is there is the idle GC's (its Lease has stopped).
                self._workspace(ws.Released(report.path, deleted=False))
            elif isinstance(report, (ws.PlacingLine, ws.PlacedLine, ws.WaitEndedLine)):
                self._feed(report)  # the Workspace's own lines pass through as they are
            elif isinstance(report, ws.Phase):
                record.phase = report.phase
            return
        if isinstance(report, ws.Phase):
            record.phase = report.phase
        elif isinstance(report, ws.Waiting):
            record.waiting = report.entry  # a changed reason updates `waiting`, adds no feed line
        elif isinstance(report, (ws.PlacingLine, ws.PlacedLine, ws.WaitEndedLine)):
            self._feed(report)  # the Workspace's own lines pass through as they are
        elif isinstance(report, ws.Running):
            record.phase, record.repos, record.endpoint = "running", dict(report.repos), report.endpoint
            self._feed(RunningLine(report.path))
            self._start_waiting_turn()
        elif isinstance(report, ws.Lost):
            record.phase = "lost"
            self._event("workspace.lost", report.reason)
        elif isinstance(report, ws.Faulted):
            record.phase = "faulted"
            self._feed(WorkspaceFaultLine(report.path, report.reason))
            self._end("error", f"{report.path}: {report.reason}")
        elif isinstance(report, ws.LastEndSeen):
            # ADR-0062: a kernel kill is one notice under (Workspace, the time the container ended); it
            # names the Turn's Agent when a Turn ran in that Workspace, else no one.
            # Raised naming no one: the Turn it cut, once its seat judged the restart, names its Agent.
            if self.ledger.kernel_kill(report.path, report.moment, report.reason, self._limit(report.path)):
                self._persist = True
        elif isinstance(report, ws.HarnessEnded):
            if self.turn is not None:
                reason = report.memory_fault or f"the Harness ended ({report.reason}, exit {report.exit_code}): " \
                                                f"{report.message}".rstrip(": ")
                self._adopt(self.turns.harness_gone(HarnessGone(record.path, reason, report.memory_fault is not None,
                                                                report.moment), self._at()))
        elif isinstance(report, ws.Unknown):
            self._feed(UnknownLine(report.path, report.message))

    def _limit(self, path: str) -> str:
        definition = self.workflow.workspaces.get(path)
        return definition.memory if definition is not None else ""

    # -- the feed ----------------------------------------------------------------------------------------

    def _feed(self, line: FeedLine) -> None:
        """An id at or past what the last saved blob reserves is saved (its reservation moved
        on) before the line leaves, so a restore never gives an id a reader holds to another line."""
        event = FeedEvent(self.feed_next, self._wall, line)
        self.feed_next += 1
        if event.id >= self._feed_saved:
            self._persist = True
        if len(self.feed) == self.feed.maxlen:
            self.feed_dropped = self.feed[0].id
        self.feed.append(event)
        self._out.append(event)

    def abandon(self, reason: str) -> list[FeedEvent]:
        """The run's actor died too often to go on (the orchestrator's supervision): the run ends `error`
        with `reason`, here, with no actor of it left to tear anything down. Answers its new feed lines."""
        self._out = []
        self.status, self.fault, self.turns.turn = "error", reason, None
        self._feed(EndedLine("error", reason))
        out, self._out = self._out, []
        return [e for e in out if isinstance(e, FeedEvent)]

    def never_ran(self) -> list[tuple[str, str]]:
        """(path, uid) of each Workspace whose Sandbox was written but never placed: ADR-0064 deletes those."""
        return [(path, r.restored.uid) for path, r in sorted(self.workspaces.items())
                if not r.restored.placed and r.restored.uid]

    # -- what is shown -----------------------------------------------------------------------------------

    def waiting(self) -> list[tuple[str, ws.WaitEntry]]:
        return [(path, r.waiting) for path, r in self.workspaces.items() if r.waiting is not None]

    # -- the blob ----------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The run's whole state as plain JSON (ADR-0065: one blob per run; `blob.py`)."""
        return blob.snapshot(self)

    @classmethod
    def restore(cls, doc: Mapping[str, Any], now: float, wall: float, *, instance_harness: str = "",
                feed_after: int = 0, parse: Parse = parse_workflow) -> tuple[RunCore, RunStep]:
        """The run as its blob left it (`blob.py`), and the step that re-creates its children (the watch's
        first list reconciles each: lost, still placing, or running again). `parse` reads its workflow (an
        orchestrator's `WorkflowMemo`: a restore of thousands of runs of one workflow checks it once)."""
        kept = blob.restore(doc, feed_after=feed_after, parse=parse)
        core = cls(kept.run_id, kept.workflow, kept.document, instance_harness=instance_harness)
        return core, core._adopt_kept(kept, now, wall)

    def _adopt_kept(self, kept: blob.KeptRun, now: float, wall: float) -> RunStep:
        self.status, self.state, self.path, self.path_dropped = kept.status, kept.state, kept.path, kept.path_dropped
        self.fault, self.started_wall, self.ended_wall = kept.fault, kept.started_wall, kept.ended_wall
        self.duration_seconds = kept.duration_seconds
        if kept.started_wall is not None and kept.status == "running":
            # Opened by an earlier process, whose monotonic clock is gone: the time before this restore is the
            # wall clock's difference (clamped at 0), the time after it is this process's monotonic clock.
            self._started_mono = now - max(0.0, wall - kept.started_wall)
        self.ledger = self.turns.ledger = kept.ledger
        self.turns.count, self.turns.conversations = kept.turns, kept.conversations
        self.turns.abort_before = set(self.workflow.agents)  # what their conversations hold is not known here
        self.ended_workspaces = kept.ended_workspaces
        self.feed.extend(kept.feed)
        self.feed_next, self.feed_dropped = kept.feed_next, kept.feed_dropped
        self._feed_saved = self.feed_next  # the first new line saves a new reservation before it leaves
        self._now, self._wall = now, wall
        self._out, self._persist = [], False
        if kept.after_wall is not None:
            self.after_wall = kept.after_wall
            self._after_mono = now + max(kept.after_wall - wall, 0.0)
        for path, record in kept.workspaces.items():
            self.workspaces[path] = record
            # ADR-0064: a teardown under way writes nothing but its delete; then it is finished
            self._out.append(PlaceWorkspace(path, replace(record.restored, releasing=True) if record.releasing
                                            else record.restored))
            if record.releasing:
                self._out.append(ReleaseWorkspace(path, "teardown" if self.status in ("running", "done")
                                                  else "run-faulted"))
        if kept.turn is not None:
            self.turns.turn = kept.turn
            self._start_waiting_turn()
        self._maybe_finished()
        out, self._out = self._out, []
        return Step(tuple(x for x in out if not isinstance(x, FeedEvent)),
                    tuple(x for x in out if isinstance(x, FeedEvent)), self.deadline)


# The engine's table: what each event does, in a state that handles it and in one that does not.
EVENT_TABLE: tuple[tuple[str, str, str], ...] = (
    ("a pick the state's `on` names", "answered `over: true`; the run enters `on[pick]`", "—"),
    ("`workspace.lost`", "the run enters `on['workspace.lost']`", "the run ends `failed`, the loss's words its fault"),
    ("`agent.fault`", "the run enters `on['agent.fault']`", "the run ends `failed`, the fault's words its fault"),
    ("a Turn ended without a pick", f"prompted again ({NUDGE_LIMIT}×), then `agent.fault`", "same"),
    ("`after` fires", "the run enters `after.to`", "—"),
    ("a Workspace faults", "—", "the run ends `error`"),
    ("cancel", "—", "the run ends `cancelled`"),
    ("a `{final: done|failed}` state is entered", "the run ends `done` or `failed`", "—"),
)


def events_markdown() -> str:
    rows = ["| event | in a state that handles it | otherwise |", "| --- | --- | --- |"]
    rows += [f"| {e} | {handled} | {otherwise} |" for e, handled, otherwise in EVENT_TABLE]
    return "\n".join(rows)
