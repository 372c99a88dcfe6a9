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

Persistence (ADR-0065): every step that changed what a restore needs asks for `Persist` first — the shell
saves the blob before it performs any other action of that step. `snapshot()` is plain JSON and
`RunCore.restore(blob, …)` continues where the run was: its Workspaces come back with what they knew
(`Restored`), and the watch's first list reconciles them.

Time: monotonic `now` for deadlines, wall `wall` for what is shown and stored. The core reads no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from jr2_actors.agent import core as seat
from jr2_actors.constants import FEED_IDS_RESERVED, LOST_GRACE_SECONDS
from jr2_actors.harness import briefing
from jr2_actors.run.feedlines import (
    AdmittedLine,
    AfterLine,
    EndedLine,
    EventLine,
    FeedEvent,
    FeedLine,
    MemoryKillLine,
    PickLine,
    RunningLine,
    SaidLine,
    StartedLine,
    StateLine,
    TurnFaultLine,
    TurnLine,
    UnknownLine,
    WorkspaceFaultLine,
    line_fields,
    line_from,
)
from jr2_actors.run.notices import (
    Entry,
    Ledger,
    Mark,
    Notice,
    entry_from,
    entry_json,
    mark_from,
    mark_of,
    nudge_eligible,
)
from jr2_actors.run.notices import conversation_new as conversation_new_notice
from jr2_actors.step import OffTable, Step
from jr2_actors.workflow import EVENTS, StateDef, Workflow, parse_workflow
from jr2_actors.workspace import core as ws

RunStatusName = Literal["running", "done", "failed", "cancelled", "error", "lost"]
ReleaseWhy = ws.ReleaseWhy
FEED_KEEP = 500  # feed lines kept in the run (and its blob) for a reader to resume from
SAID_CHARS = 500  # of an Agent's words, said in the feed
NUDGE_LIMIT = 1  # a Turn that ends without a pick is prompted again this often, then it is a fault
ANSWERS_KEPT = 8  # answered picks remembered for an answer that turns out not to have reached its call
BLOB_VERSION = 1

# -- inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    pass


@dataclass(frozen=True)
class Cancel:
    reason: str = "cancelled"


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class FromWorkspace:
    """A report of one of the run's WorkspaceActors, as it sent it."""

    report: ws.Report


@dataclass(frozen=True)
class KillsRead:
    """The Agent's read of its Harness's `/memory-kills` before an admission; `kills` None: could not tell."""

    turn: int
    kills: tuple[Mapping[str, Any], ...] | None
    problem: str = ""


@dataclass(frozen=True)
class Admitted:
    turn: int


@dataclass(frozen=True)
class NotKept:
    """The Harness answered 404 `kept: false`: it does not hold the conversation the admission named."""

    turn: int


@dataclass(frozen=True)
class Picked:
    turn: int
    call_id: str
    pick: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GuardKill:
    """A guard kill read on the Turn's stream (`kill_id` None: an older Harness; its place is its source)."""

    turn: int
    kill_id: str | None
    peak: str | None
    limit: str | None
    place: str = ""


@dataclass(frozen=True)
class Said:
    turn: int
    text: str


@dataclass(frozen=True)
class TurnEnded:
    """The Submission settled `completed` or `aborted`."""

    turn: int
    picked: bool


@dataclass(frozen=True)
class AnswerLost:
    """A pick's answer did not reach the Harness: the model's call still waits for it."""

    turn: int
    call_id: str
    problem: str


@dataclass(frozen=True)
class TurnFault:
    turn: int
    reason: str
    cause: str = "settled"  # settled | refused | lost | ended


Input = (Start | Cancel | Tick | FromWorkspace | KillsRead | Admitted | NotKept | Picked | GuardKill | Said
         | TurnEnded | TurnFault | AnswerLost)


# -- actions -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Persist:
    """Save the blob now, before any other action of this step (ADR-0065)."""

    status: RunStatusName
    reason: str | None


@dataclass(frozen=True)
class PlaceWorkspace:
    path: str
    restored: ws.Restored | None = None


@dataclass(frozen=True)
class ReleaseWorkspace:
    path: str
    why: ReleaseWhy


@dataclass(frozen=True)
class ToAgent:
    """Tell an Agent seat one of its messages (`agent/core.py`): start a Turn (which reads the kill list and
    answers `KillsRead`), read again, admit, answer a pick, abort."""

    agent: str
    message: seat.ToSeat


@dataclass(frozen=True)
class Finished:
    """Every teardown is over: the run has ended with this status."""

    status: RunStatusName
    fault: str | None


Action = Persist | PlaceWorkspace | ReleaseWorkspace | ToAgent | Finished


# -- reports: the feed -------------------------------------------------------------------------------

RunStep = Step[Action, FeedEvent]


# -- the run's own records ---------------------------------------------------------------------------

@dataclass
class WorkspaceRecord:
    path: str
    phase: str = "placing"  # the WorkspaceCore's state as last reported, or "releasing"
    restored: ws.Restored = field(default_factory=ws.Restored)
    waiting: ws.WaitEntry | None = None
    repos: dict[str, str] = field(default_factory=dict)
    endpoint: str = ""
    releasing: bool = False
    held_again: bool = False  # held by the state entered while its teardown runs: place it afterwards


@dataclass
class TurnRecord:
    id: int
    agent: str
    conversation: str
    state: str  # the workflow state that asked for it
    phase: str = "waiting"  # waiting (for its Workspace) | reading | admitting | running | answered | ended
    nudges: int = 0
    kept: bool = False  # the admission names a conversation the Harness was taken to keep
    picked: str = ""
    resumed: bool = False  # restored after an Orchestrator restart
    started_wall: float = 0.0
    mark: Mark | None = None  # ADR-0062: the newest kill its first read saw ("none"), or its start less 1 s
    reading: str = ""  # what the pending read is for: turn | nudge | resume | renew | renew-resume
    admitted_as: str = ""  # what the newest admission was: turn | nudge | resume (memory alone)
    # What the newest admission carried, and whether the Harness read its surface (the Submission spoke): in
    # the blob as `turn.carried` / `turn.heard`, so a restored Turn whose newest admission the Harness never
    # read carries those notices again (ADR-0062: delivered is not yet heard; issue 16).
    carried: list[Entry] = field(default_factory=list)
    # Every entry the Turn's admissions carried, until the Turn ends (in the blob as `turn.took`): a Harness
    # that no longer holds the conversation heard none of it (ADR-0062).
    took: list[Entry] = field(default_factory=list)
    heard: bool = False
    lost_reason: str = ""  # a lost conversation, held back a moment in case a kernel kill explains it
    lost_until: float = 0.0


class RunCore:
    def __init__(self, run_id: str, workflow: Workflow, document: Mapping[str, Any], *,
                 instance_harness: str = "") -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.document = dict(document)  # the §5 document as submitted: the blob restores from it
        self.instance_harness = instance_harness
        self.status: RunStatusName = "running"
        self.state = workflow.start
        self.fault: str | None = None
        self.started_wall: float | None = None  # issue 19: when it started and ended (wall), for runs/status
        self.ended_wall: float | None = None
        self.workspaces: dict[str, WorkspaceRecord] = {}
        self.ended_workspaces: dict[str, str] = {}  # path → deleted | kept: what a teardown left
        self.turn: TurnRecord | None = None
        self.turns = 0
        self.conversations: dict[str, int] = {}  # agent → Turns its conversation has had
        # The newest answered picks (memory alone): an answer that did not reach its call becomes a notice.
        self.answers: dict[int, tuple[str, str, str, str, dict[str, Any]]] = {}
        self.ledger = Ledger()
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
            if self.turns or self.workspaces:
                raise OffTable(f"run {self.run_id}: started twice")
            self.started_wall = wall
            self._feed(StartedLine(self.workflow.name, self.state))
            self._enter(self.state)
        elif isinstance(event, Cancel):
            if self.status == "running":
                self._end("cancelled", event.reason)
        elif isinstance(event, Tick):
            self._tick()
        elif isinstance(event, FromWorkspace):
            self._workspace(event.report)
        else:
            self._agent(event)
        self._maybe_finished()
        out, self._out = self._out, []
        actions = [x for x in out if not isinstance(x, FeedEvent)]
        if self._persist:
            self._feed_saved = self.feed_next + FEED_IDS_RESERVED  # what the snapshot saved now reserves
            # The row stays live until every teardown is over: a crash in between restores the run and
            # finishes its deletes (ADR-0064) — a finished row is never restored (ADR-0065).
            actions.insert(0, Persist(self.status if self._finished else "running", self.fault))
        return Step(tuple(actions), tuple(x for x in out if isinstance(x, FeedEvent)), self.deadline)

    @property
    def deadline(self) -> float | None:
        if self.status != "running":
            return None
        lost = self.turn.lost_until if self.turn is not None and self.turn.lost_reason else None
        return min((t for t in (self._after_mono, lost) if t is not None), default=None)

    @property
    def finished(self) -> bool:
        return self._finished

    # -- states ----------------------------------------------------------------------------------------

    def _enter(self, name: str) -> None:
        state = self.workflow.states[name]
        previous = self.state
        self.state = name
        self._persist = True
        self._stop_turn()
        if previous != name or not self.feed or self.feed[-1].kind != "started":
            self._feed(StateLine(name, previous))
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
            self._new_turn(state)

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

    def _release(self, record: WorkspaceRecord, why: ReleaseWhy) -> None:
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
        self._persist = True
        self._after_mono = self.after_wall = None
        self._stop_turn()
        why: ReleaseWhy = {"done": "teardown", "cancelled": "run-stopped"}.get(status, "run-faulted")  # type: ignore[assignment]
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
        turn = self.turn
        if (self.status == "running" and turn is not None and turn.lost_reason and self._now >= turn.lost_until
                and turn.phase != "ended"):
            reason, turn.lost_reason = turn.lost_reason, ""
            self._turn_fault(turn, TurnFault(turn.id, reason, "ended"))
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
                record.phase = report.state
            return
        if isinstance(report, ws.Phase):
            record.phase = report.state
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
            agent = self._running_agent(report.path)
            if self.ledger.kernel_kill(report.path, report.moment, report.reason, self._limit(report.path),
                                       agent):
                self._persist = True
        elif isinstance(report, ws.HarnessEnded):
            self._harness_ended(record, report)
        elif isinstance(report, ws.Unknown):
            self._feed(UnknownLine(report.path, report.message))

    def _harness_ended(self, record: WorkspaceRecord, report: ws.HarnessEnded) -> None:
        """ADR-0063: a Harness restart ends the Turns waiting on it; a kernel kill faults the Turn as such.
        ADR-0062: a kill while no Turn runs faults nothing — nor while the Turn only reads the kill list (its
        first read, or between a Submission and its nudge): its admission follows, and takes the notice."""
        turn = self.turn
        if turn is None or turn.phase in ("waiting", "ended") or turn.reading:
            return
        agent = self.workflow.agents[turn.agent]
        if agent.workspace != record.path:
            return
        reason = report.memory_fault or f"the Harness ended ({report.reason}, exit {report.exit_code}): " \
                                        f"{report.message}".rstrip(": ")
        self._tell(turn, seat.AbortTurn(str(turn.id)))
        turn.phase = "ended"
        self._event("agent.fault", reason)

    def _running_agent(self, path: str) -> str | None:
        """CONTRACTS.md §3: the Agent whose Turn the kill happened in — admitted (or being admitted), not one
        still waiting for its Workspace or reading the kill list."""
        turn = self.turn
        if turn is None or turn.phase not in ("admitting", "running", "answered"):
            return None
        return turn.agent if self.workflow.agents[turn.agent].workspace == path else None

    def _limit(self, path: str) -> str:
        definition = self.workflow.workspaces.get(path)
        return definition.memory if definition is not None else ""

    # -- Turns -------------------------------------------------------------------------------------------

    def _new_turn(self, state: StateDef) -> None:
        assert state.turn is not None
        self.turns += 1
        agent = state.turn.agent
        self.turn = TurnRecord(self.turns, agent, self._conversation(agent), state.name)
        self._persist = True
        self._start_waiting_turn()

    def _conversation(self, agent: str) -> str:
        """ADR-0062: one conversation per Agent seat and run; every later Turn continues it (`kept`)."""
        return f"{self.run_id}-{agent}"

    def _start_waiting_turn(self) -> None:
        turn = self.turn
        if turn is None or turn.phase != "waiting" or self.status != "running":
            return
        path = self.workflow.agents[turn.agent].workspace
        if path is None:
            endpoint = self.instance_harness
        else:
            record = self.workspaces.get(path)
            if record is None or record.phase != "running" or record.releasing:
                return  # its Workspace is not running yet: the Turn starts when it is
            endpoint = record.endpoint
        turn.phase = "reading"
        turn.reading = "resume" if turn.resumed else "turn"
        turn.started_wall = turn.started_wall or self._wall
        self._tell(turn, seat.StartTurn(str(turn.id), turn.conversation, endpoint, in_workspace=path is not None,
                                        abort_first=turn.resumed))
        self._feed(TurnLine(turn.agent, turn.id, turn.state))

    def _tell(self, turn: TurnRecord, message: seat.ToSeat) -> None:
        self._out.append(ToAgent(turn.agent, message))

    def _stop_turn(self) -> None:
        turn = self.turn
        if turn is not None and turn.phase not in ("waiting", "ended"):
            self._tell(turn, seat.AbortTurn(str(turn.id)))
        if turn is not None:
            self._unheard(turn)
        self.turn = None

    def _agent(self, event: Input) -> None:
        if isinstance(event, AnswerLost):
            self._answer_lost(event)
            return
        turn = self.turn
        if turn is None or getattr(event, "turn", None) != turn.id or self.status != "running":
            return  # a late report of a Turn that is over
        if isinstance(event, KillsRead):
            self._read(turn, event)
            return
        if isinstance(event, Admitted):
            turn.phase = "running"
            # ADR-0062: `kept` is computed from this count, so it is saved: a restore that lost it would
            # re-admit a held conversation without `kept: true`.
            self.conversations[turn.agent] = self.conversations.get(turn.agent, 0) + 1
            self._persist = True
            return
        if isinstance(event, NotKept):
            # ADR-0062: the Harness holds no such conversation. Every notice the Turn's admissions carried
            # is pending again first, and the Turn is admitted as a new conversation with its task — after
            # a read of the list, as every admission into a Workspace is.
            turn.kept = False
            self._unheard(turn, every=True)
            self._read_for(turn, "renew-resume" if turn.admitted_as == "resume" else "renew")
            return
        if isinstance(event, (Picked, GuardKill, Said, TurnEnded)) or (isinstance(event, TurnFault)
                                                                       and event.cause == "settled"):
            turn.heard = True  # the Submission spoke: the Harness read the admission's surface
            if turn.carried:
                turn.carried.clear()
                self._persist = True  # a restore must not carry them again
        if isinstance(event, Picked):
            self._picked(turn, event)
        elif isinstance(event, GuardKill):
            path = self.workflow.agents[turn.agent].workspace
            kill = event.kill_id or f"stream@{turn.conversation}:{event.place}"
            if path is not None and self.ledger.stream_kill(path, kill, turn.agent, event.peak, event.limit):
                self._persist = True
            self._feed(MemoryKillLine(turn.agent, turn.id, event.peak, event.limit))
        elif isinstance(event, Said):
            self._feed(SaidLine(turn.agent, turn.id, event.text[:SAID_CHARS]))
        elif isinstance(event, TurnEnded):
            if turn.phase == "answered":
                return
            if event.picked or turn.nudges >= NUDGE_LIMIT:
                turn.phase = "ended"
                self._event("agent.fault", f"{turn.agent} ended its Turn without a pick")
            else:
                turn.nudges += 1
                self._persist = True
                self._read_for(turn, "nudge")
        elif isinstance(event, TurnFault):
            self._turn_fault(turn, event)

    def _answer_lost(self, event: AnswerLost) -> None:
        """ADR-0062: a pick's answer that never reached its call, after the route left the Agent's state: the
        next Turn of that conversation hears it, with the answer."""
        answered = self.answers.pop(event.turn, None)
        if answered is None:
            return
        _agent, conversation, call_id, pick, answer = answered
        if call_id != event.call_id:
            return
        notice = Notice("pick-answer", {"pick": pick, "cut": True, "answer": answer})
        if self.ledger.conversation(conversation, notice, source=f"{conversation}|answer|{call_id}"):
            self._persist = True

    def _turn_fault(self, turn: TurnRecord, event: TurnFault) -> None:
        if turn.phase == "ended":
            return
        path = self.workflow.agents[turn.agent].workspace
        if event.cause in ("lost", "stream") and path is not None and not turn.lost_reason:
            # The stream's 404 can come before the watch shows why: a kernel kill ends the conversation and
            # then faults the Turn as `memory limit (OOMKilled, …)`, never "lost" (ADR-0062). Wait for the
            # Workspace's report a moment; with none, the loss stands.
            turn.lost_reason = event.reason
            turn.lost_until = self._now + LOST_GRACE_SECONDS
            return
        if event.cause == "refused":
            self._unheard(turn)
        turn.phase = "ended"
        self._feed(TurnFaultLine(turn.agent, turn.id, event.reason))
        self._event("agent.fault", event.reason)

    def _read_for(self, turn: TurnRecord, purpose: str) -> None:
        """Every admission into a Workspace is preceded by a read of its Harness's list (ADR-0062); a
        Menu-only agent's answers at once with nothing asked."""
        turn.reading = purpose
        path = self.workflow.agents[turn.agent].workspace
        if path is None:
            turn.reading = ""
            self._admit(turn, purpose)
            return
        self._tell(turn, seat.ReadKills(str(turn.id)))

    def _read(self, turn: TurnRecord, read: KillsRead) -> None:
        purpose, turn.reading = turn.reading or "turn", ""
        path = self.workflow.agents[turn.agent].workspace
        if path is not None and self.ledger.list_read(path, read.kills):
            self._persist = True
        if turn.mark is None:  # the Turn's first read sets its mark, ledgered with its admissions
            turn.mark = mark_of(read.kills, turn.started_wall)
            self._persist = True
        eligible = nudge_eligible(read.kills, turn.mark, turn.conversation)
        self._admit(turn, purpose, eligible=eligible)

    def _admit(self, turn: TurnRecord, purpose: str, *, eligible: set[str] | None = None,
               conversation_new: str = "", readmit: bool = False) -> None:
        """A Turn's admission (`turn`), a nudge (`nudge`) or the re-admission of a restored Turn (`resume`);
        `readmit`: a refused re-admission, admitted again as a Turn with the re-admit text first. `renew` and
        `renew-resume`: the admission after a refusal (`NotKept`) of a kept one, or of a re-admission."""
        if purpose in ("renew", "renew-resume"):
            readmit = purpose == "renew-resume"
            purpose, conversation_new = "turn", "the Harness no longer holds the conversation"
        agent = self.workflow.agents[turn.agent]
        path = agent.workspace
        kept = self.conversations.get(turn.agent, 0) > 0 and not conversation_new
        entries: list[Entry] = []
        if conversation_new:
            self.ledger.conversation(turn.conversation, conversation_new_notice(conversation_new))
        again: set[str | None] = set()
        if purpose == "resume" and turn.carried and not turn.heard:
            # ADR-0062: what the restored Turn's newest admission carried, which the Harness never took, is
            # pending again first, and this re-admission carries it whatever its scope leaves out.
            again = {e.guard_kill for e in turn.carried}
            self.ledger.raise_again(turn.carried)
            turn.carried = []
        if purpose == "nudge" and kept:
            entries = self.ledger.take_guard_kills(path, eligible or set())
        else:
            if purpose == "resume" and path is not None:
                # A re-admission of the same Turn takes every notice in scope but the guard kills the mark
                # leaves out (none at all when its read could not tell).
                held = self.ledger.take_guard_kills(path, {e.guard_kill for e in self.ledger.pending
                                                           if e.guard_kill is not None}
                                                    - (eligible or set()) - again)
                entries = self.ledger.take(path, turn.conversation)
                self.ledger.raise_again(held)
            else:
                entries = self.ledger.take(path, turn.conversation)
        if entries or conversation_new:
            self._persist = True  # ledgered before it is sent: a notice counts delivered from here
        notices = said_once([e.notice for e in entries])
        body: dict[str, Any] = {
            "definition": {"agent": agent.name, "instructions": agent.instructions, "access": agent.access,
                           "menu": list(self.workflow.menu(agent.name))},
            "message": self._message(turn, purpose, readmit=readmit),
            "allowed": list(self.workflow.states[turn.state].allowed),
        }
        if path is not None:
            record = self.workspaces.get(path)
            repos = record.repos if record is not None else {}
            body["cwd"] = next(iter(repos.values()), "/work")
        if notices:
            body["notices"] = [n.wire() for n in notices]
        if kept:
            body["kept"] = True
        turn.kept = kept
        turn.admitted_as = purpose if not readmit else "resume"
        turn.heard = False
        turn.carried = list(entries)
        turn.took.extend(e for e in entries if e not in turn.took)
        turn.phase = "admitting"
        self._feed(AdmittedLine(turn.agent, turn.id, kept, purpose == "nudge", notices))
        self._tell(turn, seat.Admit(str(turn.id), body))

    def _unheard(self, turn: TurnRecord, *, every: bool = False) -> None:
        """ADR-0062: the Turn ends, or its admission failed, before the Harness read that admission's surface:
        what it carried is pending again, each with the source it was raised with. `every`: the Harness no
        longer holds the conversation, so nothing of the Turn was heard — every entry its admissions carried
        is pending again, first."""
        back = turn.took if every else ([] if turn.heard else turn.carried)
        back = [e for e in back if e not in self.ledger.pending]
        if back:
            self.ledger.raise_again(back)
            self._persist = True
        turn.carried = []
        if every:
            turn.took = []

    def _message(self, turn: TurnRecord, purpose: str, *, readmit: bool = False) -> str:
        """ADR-0062: the re-admit text goes before the task only where something was cut (a restored
        Turn, or its refused re-admission); a Turn, a continued Turn, and a refused nudge or wake send the
        task alone, because nothing was cut."""
        state = self.workflow.states[turn.state]
        assert state.turn is not None
        if purpose == "nudge":
            return briefing.NUDGE
        if purpose == "resume" or readmit:
            return briefing.readmit(state.turn.prompt)
        return state.turn.prompt

    def _picked(self, turn: TurnRecord, event: Picked) -> None:
        target = self.workflow.states[turn.state].on.get(event.pick)
        if target is None or event.pick in EVENTS:
            return  # TurnCore answers a pick the Turn does not allow; nothing moves
        turn.phase = "answered"
        turn.picked = event.pick
        answer = {"reply": f"moved to {target}"}
        self.answers[turn.id] = (turn.agent, turn.conversation, event.call_id, event.pick, answer)
        while len(self.answers) > ANSWERS_KEPT:
            del self.answers[min(self.answers)]
        self._tell(turn, seat.AnswerPick(str(turn.id), event.call_id, True, answer))
        self._feed(PickLine(turn.agent, turn.id, event.pick, target))
        self.turn = None  # answered: the Turn ends with the state that asked for it (ADR-0024)
        self._enter(target)

    # -- the feed ----------------------------------------------------------------------------------------

    def _feed(self, line: FeedLine) -> None:
        """Issue 16 item 5: an id at or past what the last saved blob reserves is saved (its reservation moved
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
        self.status, self.fault, self.turn = "error", reason, None
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
        """The run's whole state as plain JSON (ADR-0065: one blob per run)."""
        turn = self.turn
        return {
            "version": BLOB_VERSION,
            "runId": self.run_id,
            "document": self.document,
            "status": self.status,
            "state": self.state,
            "fault": self.fault,
            "startedWall": self.started_wall,
            "endedWall": self.ended_wall,
            "afterWall": self.after_wall,
            "turns": self.turns,
            "conversations": dict(self.conversations),
            "turn": None if turn is None else {"id": turn.id, "agent": turn.agent, "conversation": turn.conversation,
                                               "state": turn.state, "nudges": turn.nudges,
                                               "mark": None if turn.mark is None else turn.mark.json(),
                                               "startedWall": turn.started_wall,
                                               "carried": [entry_json(e) for e in turn.carried],
                                               "took": [entry_json(e) for e in turn.took],
                                               "heard": turn.heard},
            "endedWorkspaces": dict(self.ended_workspaces),
            "workspaces": {path: {"restored": _restored_json(r.restored), "releasing": r.releasing,
                                  "heldAgain": r.held_again,
                                  "waiting": _wait_json(r.waiting)} for path, r in self.workspaces.items()},
            "ledger": self.ledger.snapshot(),
            "feed": [{"id": e.id, "at": e.at, "kind": e.kind, "fields": line_fields(e.line)} for e in self.feed],
            "feedNext": self.feed_next,
            # Ids below this may have gone to readers by the next save; a restore numbers from it.
            "feedReserved": self.feed_next + FEED_IDS_RESERVED,
            "feedDropped": self.feed_dropped,
        }

    @classmethod
    def restore(cls, blob: Mapping[str, Any], now: float, wall: float, *,
                instance_harness: str = "", feed_after: int = 0) -> tuple[RunCore, RunStep]:
        """The run as its blob left it, and the step that re-creates its children (the watch's first list
        reconciles each: lost, still placing, or running again). New feed lines are numbered from what the
        blob reserved (issue 16 item 5: lines of steps that saved nothing reached readers; an older blob, which
        reserved nothing, skips `FEED_IDS_RESERVED`) and after `feed_after`, the newest id readers may
        already hold (a run revived in the same process), never reusing an id."""
        if blob.get("version") != BLOB_VERSION:
            raise ValueError(f"run blob version {blob.get('version')!r} is not {BLOB_VERSION}")
        document = blob["document"]
        core = cls(str(blob["runId"]), parse_workflow(document), document, instance_harness=instance_harness)
        core.status = blob["status"]
        core.state = blob["state"]
        core.fault = blob.get("fault")
        core.started_wall, core.ended_wall = (float(v) if isinstance(v, int | float) else None  # an older blob: None
                                              for v in (blob.get("startedWall"), blob.get("endedWall")))
        core.turns = int(blob.get("turns", 0))
        core.conversations = {str(k): int(v) for k, v in dict(blob.get("conversations") or {}).items()}
        core.ledger = Ledger.restore(blob.get("ledger") or {})
        core.ended_workspaces = {str(k): str(v) for k, v in dict(blob.get("endedWorkspaces") or {}).items()}
        feed_next = int(blob.get("feedNext", 1))
        reserved = blob.get("feedReserved")
        core.feed_next = max(int(reserved) if reserved is not None else feed_next + FEED_IDS_RESERVED,
                             feed_next, feed_after + 1)
        core._feed_saved = core.feed_next  # the first new line saves a new reservation before it leaves
        for e in blob.get("feed") or []:
            core.feed.append(FeedEvent(int(e["id"]), float(e["at"]), line_from(str(e["kind"]), e["fields"])))
        dropped = blob.get("feedDropped")  # an older blob: a full window lost what came before its first line
        core.feed_dropped = int(dropped) if dropped is not None else \
            (core.feed[0].id - 1 if len(core.feed) == FEED_KEEP else 0)
        core._now, core._wall = now, wall
        core._out, core._persist = [], False
        after_wall = blob.get("afterWall")
        if after_wall is not None and core.status == "running":
            core.after_wall = float(after_wall)
            core._after_mono = now + max(core.after_wall - wall, 0.0)
        for path, w in dict(blob.get("workspaces") or {}).items():
            restored = _restored_from(w.get("restored") or {})
            record = WorkspaceRecord(path, "reconciling" if restored.placed else "placing", restored=restored,
                                     releasing=bool(w.get("releasing")),
                                     held_again=bool(w.get("heldAgain")), waiting=_wait_from(w.get("waiting")))
            core.workspaces[path] = record
            if record.releasing:  # ADR-0064: a teardown under way writes nothing but its delete
                restored = replace(restored, releasing=True)
            core._out.append(PlaceWorkspace(path, restored))
            if record.releasing:  # its teardown was under way: finish it
                why: ReleaseWhy = "teardown" if core.status in ("running", "done") else "run-faulted"
                core._out.append(ReleaseWorkspace(path, why))
        turn = blob.get("turn")
        if turn is not None and core.status == "running":
            mark = turn.get("mark")
            # ADR-0062: delivered is not yet heard. The newest admission's notices come back with the Turn when
            # the Harness never read its surface (the Submission said nothing before the process ended).
            unread = not turn.get("heard")
            core.turn = TurnRecord(int(turn["id"]), str(turn["agent"]), str(turn["conversation"]),
                                   str(turn["state"]), nudges=int(turn.get("nudges", 0)), resumed=True,
                                   mark=mark_from(mark) if mark is not None else None,
                                   started_wall=float(turn.get("startedWall") or 0.0),
                                   carried=[entry_from(e) for e in turn.get("carried") or []] if unread else [],
                                   took=[entry_from(e) for e in turn.get("took") or []])
            core._start_waiting_turn()
        core._maybe_finished()
        out, core._out = core._out, []
        return core, Step(tuple(x for x in out if not isinstance(x, FeedEvent)),
                          tuple(x for x in out if isinstance(x, FeedEvent)), core.deadline)


def said_once(notices: list[Notice]) -> tuple[Notice, ...]:
    """ADR-0062: two notices with the same words are said once."""
    seen: list[Notice] = []
    for n in notices:
        if n not in seen:
            seen.append(n)
    return tuple(seen)


def _restored_json(r: ws.Restored) -> dict[str, Any]:
    return {"placed": r.placed, "uid": r.uid, "wait": None if r.wait is None else
            {"on": r.wait.on, "message": r.wait.message, "since": r.wait.since_wall}}


def _restored_from(doc: Mapping[str, Any]) -> ws.Restored:
    wait = doc.get("wait")
    return ws.Restored(bool(doc.get("placed")), str(doc.get("uid") or ""),
                       ws.RestoredWait(wait["on"], str(wait["message"]), float(wait["since"])) if wait else None)


def _wait_json(w: ws.WaitEntry | None) -> dict[str, Any] | None:
    return None if w is None else {"on": w.on, "message": w.message, "since": w.since}


def _wait_from(doc: Any) -> ws.WaitEntry | None:
    return None if not doc else ws.WaitEntry(doc["on"], str(doc["message"]), float(doc["since"]))


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
