"""The run's Turn: from the state that asks for it to its pick, its fault or the run's move. Pure.

A Turn is one workflow state's `turn` for one Agent seat, in the seat's one conversation of the run
(ADR-0062: every later Turn continues it, `kept: true`). Its phase moves along `TURN` at the bottom.

    waiting ──Ready──▶ reading ──KillsRead──▶ admitting ──Accepted──▶ running ──Picked──▶ answered
                                                 ▲ NotKept, HarnessJudged(cut), AdmissionUnsure │ Settled:
                                                 └──────── KillsRead ◀── (a read first) ────────┘ nudged
    any live phase ── TurnFault, a kernel kill's cut, Settled past the nudge ──▶ ended;  StateLeft ──▶ ended

- `waiting` for its Workspace (a Menu-only agent starts at once); `Ready` tells the seat `StartTurn`, which
  reads the kill list (ADR-0062) and answers `KillsRead`. Each read raises notices into the ledger; the
  first sets the Turn's mark; the admission carries what the ledger holds in its scope.
- `running` once the Harness took the admission (CONTRACTS §3: answered 200 is heard; the conversation's
  count is saved, `kept` comes from it). A pick the state's `on` names moves the run; a Turn that ends
  without one is prompted again `NUDGE_LIMIT` times, then faults.
- A Harness restart is judged by the seat against the Turn; a cut Turn is re-admitted, or faulted by a
  kernel kill. A lost conversation waits `LOST_GRACE_SECONDS` (and for a judgment under way) in case a
  restart explains it. What an admission never answered carried is pending again.

`TurnKeeper` is an object `RunCore` owns: each call answers a `TurnOut` — the lines to feed and the messages
to tell the seat, in order, whether a restore needs a save, and the run's move (an event, or a pick's state),
which the engine performs. Next stage: `core.py`, the engine that adopts it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jr2_actors.agent import messages as seat
from jr2_actors.agent.messages import (
    Accepted,
    AdmissionUnsure,
    AnswerFailed,
    GuardKill,
    HarnessJudged,
    KillsRead,
    NotKept,
    Picked,
    Said,
    Settled,
    TurnAborted,
    TurnFault,
)
from jr2_actors.harness.admission import Notice
from jr2_actors.run.admission import admission
from jr2_actors.run.feed.lines import (
    AdmittedLine,
    FeedLine,
    MemoryKillLine,
    PickLine,
    SaidLine,
    TurnFaultLine,
    TurnLine,
)
from jr2_actors.run.messages import ToAgent
from jr2_actors.run.notices import NOT_HELD, Entry, Ledger, mark_of, nudge_eligible, said_once
from jr2_actors.run.notices import conversation_new as conversation_new_notice
from jr2_actors.run.turn_record import (
    UNSURE_LIMIT,
    AnsweredPick,
    HarnessGone,
    ReadFor,
    Ready,
    RunAt,
    StateLeft,
    TurnInput,
    TurnOut,
    TurnPhase,
    TurnRecord,
)
from jr2_actors.values.constants import LOST_GRACE_SECONDS
from jr2_actors.values.step import Machine, Walk
from jr2_actors.values.workflow import EVENTS, StateDef, Workflow

SAID_CHARS = 500  # of an Agent's words, said in the feed
NUDGE_LIMIT = 1  # a Turn that ends without a pick is prompted again this often, then it is a fault
ANSWERS_KEPT = 8  # answered picks remembered for an answer that turns out not to have reached its call


class TurnKeeper:
    """The run's Turns: the one under way, their count, each seat's conversation and what it was answered."""

    def __init__(self, run_id: str, workflow: Workflow, ledger: Ledger, *, instance_harness: str = "") -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.ledger = ledger
        self.instance_harness = instance_harness
        self.turn: TurnRecord | None = None
        self.count = 0  # Turns the run has started
        self.conversations: dict[str, int] = {}  # agent → Turns its conversation has had
        # The newest answered picks (memory alone): an answer that did not reach its call becomes a notice.
        self.answers: dict[int, AnsweredPick] = {}
        self.abort_before: set[str] = set()  # seats whose first Turn in this process aborts first (a restore)
        self._walk: Walk[Any] = Walk(TURN)
        self._at = RunAt(0.0, 0.0, False, {})
        self._o = TurnOut()

    # -- what the engine calls -----------------------------------------------------------------------

    def new_turn(self, state: StateDef, at: RunAt) -> TurnOut:
        return self._call(at, lambda: self._new_turn(state))

    def start_waiting(self, at: RunAt) -> TurnOut:
        return self._call(at, self._start_waiting_turn)

    def stop(self, at: RunAt) -> TurnOut:
        return self._call(at, self._stop_turn)

    def from_seat(self, event: seat.ToRun, at: RunAt) -> TurnOut:
        return self._call(at, lambda: self._seat(event))

    def harness_gone(self, event: HarnessGone, at: RunAt) -> TurnOut:
        turn = self.turn
        return self._call(at, lambda: None if turn is None else self._step(turn, event))

    def tick(self, at: RunAt) -> TurnOut:
        """A lost stream no restart explained within its grace faults the Turn."""
        def lost() -> None:
            turn = self.turn
            if (at.running and turn is not None and turn.lost_reason and at.now >= turn.lost_until
                    and turn.phase != "ended" and turn.restart is None):
                reason, turn.lost_reason = turn.lost_reason, ""
                self._step(turn, TurnFault(turn.agent, turn.id, "ended", reason))
        return self._call(at, lost)

    def _call(self, at: RunAt, do: Callable[[], None]) -> TurnOut:
        self._at, self._o = at, TurnOut()
        do()
        out, self._o = self._o, TurnOut()
        return out

    # -- what the handlers ask of the run ------------------------------------------------------------

    def _feed(self, line: FeedLine) -> None:
        self._o.out.append(line)

    def _event(self, event: str, reason: str) -> None:
        """The run takes `event` (`agent.fault`) once the handler is done: it is each handler's last word."""
        self._o.event = (event, reason)

    def _save(self) -> None:
        self._o.persist = True

    def _not_running(self, turn: TurnRecord, event: HarnessGone) -> None:
        """Nothing runs on the Harness for this Turn yet: its admission follows, and takes the notice."""

    def _harness_gone(self, turn: TurnRecord, event: HarnessGone) -> None:
        """ADR-0062: a restart is judged against the Turn it could have touched — the seat compares the process
        that accepted its Submission with the one answering now (`HarnessJudged`). A Turn only reading the
        kill list has nothing running; its seat still looks, so a held Turn waits on no Submission the
        restart ended (CONTRACTS §3)."""
        if self.workflow.agents[turn.agent].workspace != event.path:
            return
        if turn.phase in ("admitting", "running") and turn.read_for is None:
            turn.restart = event
        self._tell(turn, seat.CheckHarness(turn.id))

    def _judged(self, turn: TurnRecord, event: HarnessJudged) -> None:
        """ADR-0062: a Turn the restart cut is re-admitted (`kept: true`, the re-admit text); only a kernel
        kill faults it, and its notice names the Turn's Agent. A restart that touched nothing of the Turn
        faults nothing; its kernel notice, if any, names no one and waits for the next admission."""
        gone, turn.restart = turn.restart, None
        if gone is None or not event.cut:
            return
        turn.lost_reason = ""  # the restart explains a lost stream
        if gone.oom:
            if self.ledger.name_kernel_kill(gone.path, gone.moment, turn.agent):
                self._save()
            self._tell(turn, seat.AbortTurn(turn.id))
            self._go(turn, "ended")
            self._feed(TurnFaultLine(turn.agent, turn.id, gone.reason))
            self._event("agent.fault", gone.reason)
            return
        self._read_for(turn, "resume")

    def _admission_unsure(self, turn: TurnRecord, event: AdmissionUnsure) -> None:
        """An admission of unknown fate, found out by the seat's abort: taken (its notices heard) or not (pending
        again). Either way it is sent again, a bounded number of times, saying `kept` (ADR-0062): nothing running
        is not "not held"; a Harness that holds none refuses it (404), and the Turn takes the lost path."""
        self._count_conversation(turn.agent)
        if event.accepted:
            self._heard(turn)
        # else what it carried stays unheard: the re-admission carries it again, whatever its scope leaves out
        turn.unsure += 1
        if turn.unsure > UNSURE_LIMIT:
            self._unheard(turn)
            self._go(turn, "ended")
            reason = f"admission refused: {event.problem or 'no answer'} ({turn.unsure} admissions unanswered)"
            self._feed(TurnFaultLine(turn.agent, turn.id, reason))
            self._event("agent.fault", reason)
            return
        self._read_for(turn, "resume")

    def _count_conversation(self, agent: str) -> None:
        # ADR-0062: `kept` comes from this count, so it is saved (lost, a held conversation gets no `kept`).
        self.conversations[agent] = self.conversations.get(agent, 0) + 1
        self._save()

    def _new_turn(self, state: StateDef) -> None:
        assert state.turn is not None
        self.count += 1
        agent = state.turn.agent
        self.turn = TurnRecord(self.count, agent, self._conversation(agent), state.name)
        self._save()
        self._start_waiting_turn()

    def _conversation(self, agent: str) -> str:
        """ADR-0062: one conversation per Agent seat and run; every later Turn continues it (`kept`)."""
        return f"{self.run_id}-{agent}"

    def _start_waiting_turn(self) -> None:
        turn = self.turn
        if turn is not None and turn.phase == "waiting" and self._at.running:
            self._step(turn, Ready())

    def _ready(self, turn: TurnRecord, event: Ready) -> None:
        path = self.workflow.agents[turn.agent].workspace
        if path is None:
            endpoint = self.instance_harness
        else:
            record = self._at.workspaces.get(path)
            if record is None or record.phase != "running" or record.releasing:
                return  # its Workspace is not running yet: the Turn starts when it is
            endpoint = record.endpoint
        self._go(turn, "reading")
        turn.read_for = "resume" if turn.resumed else "turn"
        turn.started_wall = turn.started_wall or self._at.wall
        # A restored run does not know what its conversations hold: a Submission of an earlier Turn whose answer
        # never landed (or whose admission's answer was lost with the process) may still run, and would refuse
        # every admission 409. Each seat's first Turn after a restore aborts first, as the restored Turn does
        # (CONTRACTS §3: a seat admits only after the previous Submission, or its abort, settled).
        abort_first = turn.resumed or turn.agent in self.abort_before
        self.abort_before.discard(turn.agent)
        self._tell(turn, seat.StartTurn(turn.id, turn.conversation, endpoint, in_workspace=path is not None,
                                        abort_first=abort_first))
        self._feed(TurnLine(turn.agent, turn.id, turn.state))

    def _tell(self, turn: TurnRecord, message: seat.ToSeat) -> None:
        self._o.out.append(ToAgent(turn.agent, message))

    def _stop_turn(self) -> None:
        if self.turn is not None:
            self._step(self.turn, StateLeft())
        self.turn = None

    def _stop(self, turn: TurnRecord, event: StateLeft) -> None:
        if turn.phase not in ("waiting", "ended"):
            self._tell(turn, seat.AbortTurn(turn.id))
        self._unheard(turn)
        self._go(turn, "ended")

    def _seat(self, event: seat.ToRun) -> None:
        if isinstance(event, TurnAborted):  # the run waits for no abort: a Turn it stops is over for it at once
            if event.conversation_held:  # its admission's fate unknown: the next admission says `kept`
                self._count_conversation(event.agent)
            return
        if isinstance(event, AnswerFailed):
            self._answer_lost(event)
            return
        turn = self.turn
        if turn is None or event.turn_id != turn.id or not self._at.running:
            if isinstance(event, Accepted | AdmissionUnsure):
                # Taken (or maybe: `_admission_unsure`), it is held whether the run wants that Turn or not: `kept`.
                self._count_conversation(event.agent)
            return  # a late report of a Turn that is over
        self._step(turn, event)

    def _step(self, turn: TurnRecord, event: TurnInput) -> None:
        """The Turn takes `event` along its edge in `TURN` (an edge taken inside another is checked too)."""
        with self._walk.take(turn.phase, event, f"run {self.run_id} turn {turn.id}") as handler:
            handler(self, turn, event)

    def _go(self, turn: TurnRecord, phase: TurnPhase) -> None:
        self._walk.move(phase)
        turn.phase = phase

    def _heard(self, turn: TurnRecord) -> None:
        """The Submission spoke: the Harness read the admission's surface."""
        turn.heard = True
        if turn.carried:
            turn.carried.clear()
            self._save()  # a restore must not carry them again

    def _admitted(self, turn: TurnRecord, event: Accepted) -> None:
        self._go(turn, "running")
        self._count_conversation(turn.agent)
        # CONTRACTS §3: an admission answered 200 has been read — the Harness rendered its Briefing, notices
        # included, when it accepted it. Its notices are never raised again.
        self._heard(turn)

    def _not_kept(self, turn: TurnRecord, event: NotKept) -> None:
        # ADR-0062: the Harness holds no such conversation. Every notice the Turn's admissions carried
        # is pending again first, and the Turn is admitted as a new conversation with its task — after
        # a read of the list, as every admission into a Workspace is.
        turn.kept = False
        self._unheard(turn, every=True)
        self._read_for(turn, "renew-resume" if turn.admitted_as == "resume" else "renew")

    def _guard_kill(self, turn: TurnRecord, event: GuardKill) -> None:
        self._heard(turn)
        path = self.workflow.agents[turn.agent].workspace
        kill = event.kill_id or f"stream@{turn.conversation}:{event.place}"
        if path is not None and self.ledger.stream_kill(path, kill, turn.agent, event.peak, event.limit):
            self._save()
        self._feed(MemoryKillLine(turn.agent, turn.id, event.peak, event.limit))

    def _said(self, turn: TurnRecord, event: Said) -> None:
        self._heard(turn)
        self._feed(SaidLine(turn.agent, turn.id, event.text[:SAID_CHARS]))

    def _turn_ended(self, turn: TurnRecord, event: Settled) -> None:
        self._heard(turn)
        if event.picked or turn.nudges >= NUDGE_LIMIT:
            self._go(turn, "ended")
            self._event("agent.fault", f"{turn.agent} ended its Turn without a pick")
        else:
            turn.nudges += 1
            self._save()
            self._read_for(turn, "nudge")

    def _answer_lost(self, event: AnswerFailed) -> None:
        """ADR-0062: a pick's answer that never reached its call, after the route left the Agent's state: the
        next Turn of that conversation hears it, with the answer."""
        answered = self.answers.pop(event.turn_id, None)
        if answered is None:
            return
        if answered.call_id != event.call_id:
            return
        notice = Notice("pick-answer", {"pick": answered.pick, "cut": True, "answer": answered.answer})
        conversation = answered.conversation
        if self.ledger.conversation(conversation, notice, source=f"{conversation}|answer|{answered.call_id}"):
            self._save()

    def _turn_fault(self, turn: TurnRecord, event: TurnFault) -> None:
        if event.cause == "settled":
            self._heard(turn)
        path = self.workflow.agents[turn.agent].workspace
        if event.cause in ("lost", "stream") and path is not None and not turn.lost_reason:
            # The stream's 404 can come before the watch shows why: a kernel kill ends the conversation and
            # then faults the Turn as `memory limit (OOMKilled, …)`, never "lost" (ADR-0062). Wait for the
            # Workspace's report a moment; with none, the loss stands.
            turn.lost_reason = event.reason
            turn.lost_until = self._at.now + LOST_GRACE_SECONDS
            return
        if event.cause == "refused":
            self._unheard(turn)
        self._go(turn, "ended")
        self._feed(TurnFaultLine(turn.agent, turn.id, event.reason))
        self._event("agent.fault", event.reason)

    def _read_for(self, turn: TurnRecord, purpose: ReadFor) -> None:
        """Every admission into a Workspace is preceded by a read of its Harness's list (ADR-0062); a
        Menu-only agent's answers at once with nothing asked."""
        turn.read_for = purpose
        path = self.workflow.agents[turn.agent].workspace
        if path is None:
            turn.read_for = None
            self._admit(turn, purpose)
            return
        self._tell(turn, seat.ReadKills(turn.id))

    def _kills_read(self, turn: TurnRecord, read: KillsRead) -> None:
        purpose, turn.read_for = turn.read_for or "turn", None
        if read.found_running:
            # CONTRACTS §3: after a restore, judged by what the Harness holds — a Submission ran, so the
            # admission whose answer the crash lost had been taken: its notices were heard, and the
            # conversation is held (its re-admission says `kept: true`).
            self._heard(turn)
            if not self.conversations.get(turn.agent):
                self._count_conversation(turn.agent)
        path = self.workflow.agents[turn.agent].workspace
        kills = None if read.read is None else read.read.kills  # None: the read could not tell
        if path is not None and self.ledger.list_read(path, kills):
            self._save()
        if turn.mark is None:  # the Turn's first read sets its mark, ledgered with its admissions
            turn.mark = mark_of(kills, turn.started_wall)
            self._save()
        eligible = nudge_eligible(kills, turn.mark, turn.conversation)
        self._admit(turn, purpose, eligible=eligible)

    def _admit(self, turn: TurnRecord, purpose: ReadFor, *, eligible: set[str] | None = None,
               conversation_new: str = "", readmit: bool = False) -> None:
        """A Turn's admission (`turn`), a nudge (`nudge`) or the re-admission of a restored Turn (`resume`);
        `readmit`: a refused re-admission, admitted again as a Turn with the re-admit text first. `renew` and
        `renew-resume`: the admission after a refusal (`NotKept`) of a kept one, or of a re-admission."""
        if purpose in ("renew", "renew-resume"):
            readmit = purpose == "renew-resume"
            purpose, conversation_new = "turn", NOT_HELD
        assert purpose in ("turn", "nudge", "resume")
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
            self._save()  # ledgered before it is sent: a notice counts delivered from here
        notices = said_once([e.notice for e in entries])
        cwd = None
        if path is not None:
            record = self._at.workspaces.get(path)
            cwd = next(iter((record.repos if record is not None else {}).values()), "/work")
        admitted = admission(self.workflow, turn.state, agent.name, purpose, readmit=readmit, cwd=cwd,
                             notices=notices, kept=kept)
        turn.kept = kept
        turn.admitted_as = purpose if not readmit else "resume"
        turn.heard = False
        turn.carried = list(entries)
        turn.took.extend(e for e in entries if e not in turn.took)
        self._go(turn, "admitting")
        self._feed(AdmittedLine(turn.agent, turn.id, kept, purpose == "nudge", notices))
        self._tell(turn, seat.Admit(turn.id, admitted))

    def _unheard(self, turn: TurnRecord, *, every: bool = False) -> None:
        """ADR-0062: the Turn ends, or its admission failed, before the Harness read that admission's surface:
        what it carried is pending again, each with the source it was raised with. `every`: the Harness no
        longer holds the conversation, so nothing of the Turn was heard — every entry its admissions carried
        is pending again, first."""
        back = turn.took if every else ([] if turn.heard else turn.carried)
        back = [e for e in back if e not in self.ledger.pending]
        if back:
            self.ledger.raise_again(back)
            self._save()
        turn.carried = []
        if every:
            turn.took = []

    def _picked(self, turn: TurnRecord, event: Picked) -> None:
        self._heard(turn)
        target = self.workflow.states[turn.state].on.get(event.pick)
        if target is None or event.pick in EVENTS:
            return  # TurnCore answers a pick the Turn does not allow; nothing moves
        self._go(turn, "answered")
        turn.picked = event.pick
        answer = {"reply": f"moved to {target}"}
        self.answers[turn.id] = AnsweredPick(turn.agent, turn.conversation, event.call_id, event.pick, answer)
        while len(self.answers) > ANSWERS_KEPT:
            del self.answers[min(self.answers)]
        self._tell(turn, seat.AnswerPick(turn.id, event.call_id, True, answer))
        self._feed(PickLine(turn.agent, turn.id, event.pick, target))
        self.turn = None  # answered: the Turn ends with the state that asked for it (ADR-0024)
        self._o.enter = target


# -- the machine -------------------------------------------------------------------------------------

S = TurnKeeper
LIVE: tuple[TurnPhase, ...] = ("waiting", "reading", "admitting", "running")
TOLD: tuple[TurnPhase, ...] = ("reading", "admitting", "running")  # the seat has been told of the Turn
# One table holds the run's Turn (`step.Machine`). The seat reports on a Turn only once it was told of it
# (`StartTurn` leaves `waiting`), in any order a fault or a restart may leave (a test feeds them so): each
# report is a row in every phase from `reading` on, and where it may lead is the table's; a late report of
# a Turn the run has left never reaches it (its id is not the Turn's). A `TurnFault` may come in `waiting`
# too: the run's shell says so when the seat's actor dies. The run's own inputs (`Ready`, `HarnessGone`,
# `StateLeft`) off their rows are our bug. docs/architecture.md prints the table; a test keeps the copy true.
TURN: Machine[Any] = Machine("the run's Turn", (
    (("waiting",), Ready, ("reading",), S._ready),
    (TOLD, KillsRead, ("admitting",), S._kills_read),
    (TOLD, Accepted, ("running",), S._admitted),
    (TOLD, NotKept, ("admitting",), S._not_kept),
    (TOLD, Picked, ("answered",), S._picked),
    (TOLD, GuardKill, (), S._guard_kill),
    (TOLD, Said, (), S._said),
    (TOLD, Settled, ("ended", "admitting"), S._turn_ended),
    (LIVE, TurnFault, ("ended",), S._turn_fault),
    # ADR-0062: a Harness that ends while no Turn runs faults nothing; under a Turn, the seat judges whether
    # the process that ended held its Submission: a cut Turn is re-admitted, or faulted by a kernel kill.
    (("waiting",), HarnessGone, (), S._not_running),
    (TOLD, HarnessGone, (), S._harness_gone),
    (TOLD, HarnessJudged, ("ended", "admitting"), S._judged),
    (TOLD, AdmissionUnsure, ("ended", "admitting"), S._admission_unsure),
    ((*LIVE, "ended"), StateLeft, ("ended",), S._stop),
))


def turn_markdown() -> str:
    """The run's Turn table, for docs/architecture.md."""
    return TURN.markdown()
