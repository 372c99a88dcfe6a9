"""The run's Turn: from the state that asks for it to its pick, its fault or the run's move. Pure.

A Turn is one workflow state's `turn` for one Agent seat, in the seat's one conversation of the run
(ADR-0062: every later Turn continues it, `kept: true`). Its phase moves along `TURN` at the bottom.

    waiting ──Ready──▶ reading ──KillsRead──▶ admitting ──Accepted──▶ running ──Picked──▶ answered
                                                 ▲ NotKept, HarnessJudged(cut), AdmissionUnsure │ Settled:
                                                 └──────── KillsRead ◀── (a read first) ────────┘ nudged
    any live phase ── TurnFault, a kernel kill's cut, Settled past the nudge ──▶ ended;  Stop ──▶ ended

- `waiting` for its Workspace (a Menu-only agent starts at once); `Ready` tells the seat `StartTurn`, which
  reads the kill list (ADR-0062) and answers `KillsRead`. Each read raises notices into the ledger; the
  first sets the Turn's mark; the admission carries what the ledger holds in its scope.
- `running` once the Harness took the admission (CONTRACTS §3: answered 200 is heard; the conversation's
  count is saved, `kept` comes from it). A pick the state's `on` names moves the run; a Turn that ends
  without one is prompted again `NUDGE_LIMIT` times, then faults.
- A Harness restart is judged by the seat against the Turn; a cut Turn is re-admitted, or faulted by a
  kernel kill. A lost conversation waits `LOST_GRACE_SECONDS` (and for a judgment under way) in case a
  restart explains it. What an admission never answered carried is pending again.

The handlers are `RunCore`'s (this class is its Turn half): they feed, tell the seat and move the run.
"""

from __future__ import annotations

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
from jr2_actors.harness import briefing
from jr2_actors.run.feedlines import (
    AdmittedLine,
    FeedEvent,
    FeedLine,
    MemoryKillLine,
    PickLine,
    SaidLine,
    TurnFaultLine,
    TurnLine,
)
from jr2_actors.run.messages import Action, RunStatusName, ToAgent, WorkspaceRecord
from jr2_actors.run.notices import Entry, Ledger, Notice, mark_of, nudge_eligible
from jr2_actors.run.notices import conversation_new as conversation_new_notice
from jr2_actors.run.turn_record import (
    UNSURE_LIMIT,
    HarnessGone,
    Purpose,
    ReadFor,
    Ready,
    Stop,
    TurnInput,
    TurnPhase,
    TurnRecord,
)
from jr2_actors.values.constants import LOST_GRACE_SECONDS
from jr2_actors.values.step import Machine
from jr2_actors.values.workflow import EVENTS, StateDef, Workflow

SAID_CHARS = 500  # of an Agent's words, said in the feed
NUDGE_LIMIT = 1  # a Turn that ends without a pick is prompted again this often, then it is a fault
ANSWERS_KEPT = 8  # answered picks remembered for an answer that turns out not to have reached its call


class TurnSide:
    """`RunCore`'s Turn half: the state it shares with the engine, and the Turn's handlers."""

    run_id: str
    workflow: Workflow
    status: RunStatusName
    instance_harness: str
    workspaces: dict[str, WorkspaceRecord]
    turn: TurnRecord | None
    turns: int
    conversations: dict[str, int]
    answers: dict[int, tuple[str, str, str, str, dict[str, Any]]]
    ledger: Ledger
    _abort_before: set[str]  # seats whose first Turn in this process aborts first (a restore)
    _out: list[Action | FeedEvent]
    _persist: bool
    _now: float
    _wall: float
    _turn_edge: tuple[str, type] | None = None

    # The engine's, for the Turn's handlers.
    def _feed(self, line: FeedLine) -> None:
        raise NotImplementedError

    def _event(self, event: str, reason: str) -> None:
        raise NotImplementedError

    def _enter(self, name: str) -> None:
        raise NotImplementedError

    def _not_running(self, turn: TurnRecord, event: HarnessGone) -> None:
        """Nothing runs on the Harness for this Turn yet: its admission follows, and takes the notice."""

    def _harness_gone(self, turn: TurnRecord, event: HarnessGone) -> None:
        """ADR-0062: a restart is judged against the Turn it could have touched — the seat compares the process
        that accepted its Submission with the one answering now (`HarnessJudged`). A Turn only reading the
        kill list has nothing running; its seat still looks, so a held Turn waits on no Submission the
        restart ended (CONTRACTS §3)."""
        if self.workflow.agents[turn.agent].workspace != event.path:
            return
        if turn.phase in ("admitting", "running") and turn.reading is None:
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
                self._persist = True
            self._tell(turn, seat.AbortTurn(turn.id))
            self._turn_go(turn, "ended")
            self._feed(TurnFaultLine(turn.agent, turn.id, gone.reason))
            self._event("agent.fault", gone.reason)
            return
        self._read_for(turn, "resume")

    def _admission_unsure(self, turn: TurnRecord, event: AdmissionUnsure) -> None:
        """An admission whose fate was unknown, resolved by the seat's abort: taken (its notices heard, the
        conversation held) or not (its notices pending again). Either way it is sent again as a re-admission,
        which a Harness answers safely whatever it holds — a bounded number of times."""
        if event.accepted:
            self._count_conversation(turn.agent)
            self._heard(turn)
        # else what it carried stays unheard: the re-admission carries it again, whatever its scope leaves out
        turn.unsure += 1
        if turn.unsure > UNSURE_LIMIT:
            self._unheard(turn)
            self._turn_go(turn, "ended")
            reason = f"admission refused: {event.problem or 'no answer'} ({turn.unsure} admissions unanswered)"
            self._feed(TurnFaultLine(turn.agent, turn.id, reason))
            self._event("agent.fault", reason)
            return
        self._read_for(turn, "resume")

    def _count_conversation(self, agent: str) -> None:
        # ADR-0062: `kept` is computed from this count, so it is saved: a restore that lost it would re-admit
        # a held conversation without `kept: true`.
        self.conversations[agent] = self.conversations.get(agent, 0) + 1
        self._persist = True

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
        if turn is not None and turn.phase == "waiting" and self.status == "running":
            self._turn_step(turn, Ready())

    def _ready(self, turn: TurnRecord, event: Ready) -> None:
        path = self.workflow.agents[turn.agent].workspace
        if path is None:
            endpoint = self.instance_harness
        else:
            record = self.workspaces.get(path)
            if record is None or record.phase != "running" or record.releasing:
                return  # its Workspace is not running yet: the Turn starts when it is
            endpoint = record.endpoint
        self._turn_go(turn, "reading")
        turn.reading = "resume" if turn.resumed else "turn"
        turn.started_wall = turn.started_wall or self._wall
        # A restored run does not know what its conversations hold: a Submission of an earlier Turn whose answer
        # never landed (or whose admission's answer was lost with the process) may still run, and would refuse
        # every admission 409. Each seat's first Turn after a restore aborts first, as the restored Turn does
        # (CONTRACTS §3: a seat admits only after the previous Submission, or its abort, settled; sim seed 28).
        abort_first = turn.resumed or turn.agent in self._abort_before
        self._abort_before.discard(turn.agent)
        self._tell(turn, seat.StartTurn(turn.id, turn.conversation, endpoint, in_workspace=path is not None,
                                        abort_first=abort_first))
        self._feed(TurnLine(turn.agent, turn.id, turn.state))

    def _tell(self, turn: TurnRecord, message: seat.ToSeat) -> None:
        self._out.append(ToAgent(turn.agent, message))

    def _stop_turn(self) -> None:
        if self.turn is not None:
            self._turn_step(self.turn, Stop())
        self.turn = None

    def _stop(self, turn: TurnRecord, event: Stop) -> None:
        if turn.phase not in ("waiting", "ended"):
            self._tell(turn, seat.AbortTurn(turn.id))
        self._unheard(turn)
        self._turn_go(turn, "ended")

    def _seat(self, event: seat.ToRun) -> None:
        if isinstance(event, TurnAborted):
            return  # the run waits for no abort: a Turn it stops is over for it at once
        if isinstance(event, AnswerFailed):
            self._answer_lost(event)
            return
        turn = self.turn
        if turn is None or event.turn_id != turn.id or self.status != "running":
            if isinstance(event, Accepted) or (isinstance(event, AdmissionUnsure) and event.accepted):
                # Kept means accepted: a conversation the Harness took is held, whether or not the run still
                # wants that Turn, so its next admission says `kept: true`.
                self._count_conversation(event.agent)
            return  # a late report of a Turn that is over
        self._turn_step(turn, event)

    def _turn_step(self, turn: TurnRecord, event: TurnInput) -> None:
        """The Turn takes `event` along its edge in `TURN` (an edge taken inside another is checked too)."""
        edge = TURN.edge(f"run {self.run_id} turn {turn.id}", turn.phase, event)
        outer, self._turn_edge = self._turn_edge, (turn.phase, type(event))
        try:
            edge.handler(self, turn, event)
        finally:
            self._turn_edge = outer

    def _turn_go(self, turn: TurnRecord, phase: TurnPhase) -> None:
        TURN.move(f"run {self.run_id} turn {turn.id}", self._turn_edge, phase)
        turn.phase = phase

    def _heard(self, turn: TurnRecord) -> None:
        """The Submission spoke: the Harness read the admission's surface."""
        turn.heard = True
        if turn.carried:
            turn.carried.clear()
            self._persist = True  # a restore must not carry them again

    def _admitted(self, turn: TurnRecord, event: Accepted) -> None:
        self._turn_go(turn, "running")
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
            self._persist = True
        self._feed(MemoryKillLine(turn.agent, turn.id, event.peak, event.limit))

    def _said(self, turn: TurnRecord, event: Said) -> None:
        self._heard(turn)
        self._feed(SaidLine(turn.agent, turn.id, event.text[:SAID_CHARS]))

    def _turn_ended(self, turn: TurnRecord, event: Settled) -> None:
        self._heard(turn)
        if event.picked or turn.nudges >= NUDGE_LIMIT:
            self._turn_go(turn, "ended")
            self._event("agent.fault", f"{turn.agent} ended its Turn without a pick")
        else:
            turn.nudges += 1
            self._persist = True
            self._read_for(turn, "nudge")

    def _answer_lost(self, event: AnswerFailed) -> None:
        """ADR-0062: a pick's answer that never reached its call, after the route left the Agent's state: the
        next Turn of that conversation hears it, with the answer."""
        answered = self.answers.pop(event.turn_id, None)
        if answered is None:
            return
        _agent, conversation, call_id, pick, answer = answered
        if call_id != event.call_id:
            return
        notice = Notice("pick-answer", {"pick": pick, "cut": True, "answer": answer})
        if self.ledger.conversation(conversation, notice, source=f"{conversation}|answer|{call_id}"):
            self._persist = True

    def _turn_fault(self, turn: TurnRecord, event: TurnFault) -> None:
        if event.cause == "settled":
            self._heard(turn)
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
        self._turn_go(turn, "ended")
        self._feed(TurnFaultLine(turn.agent, turn.id, event.reason))
        self._event("agent.fault", event.reason)

    def _read_for(self, turn: TurnRecord, purpose: ReadFor) -> None:
        """Every admission into a Workspace is preceded by a read of its Harness's list (ADR-0062); a
        Menu-only agent's answers at once with nothing asked."""
        turn.reading = purpose
        path = self.workflow.agents[turn.agent].workspace
        if path is None:
            turn.reading = None
            self._admit(turn, purpose)
            return
        self._tell(turn, seat.ReadKills(turn.id))

    def _kills_read(self, turn: TurnRecord, read: KillsRead) -> None:
        purpose, turn.reading = turn.reading or "turn", None
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
            self._persist = True
        if turn.mark is None:  # the Turn's first read sets its mark, ledgered with its admissions
            turn.mark = mark_of(kills, turn.started_wall)
            self._persist = True
        eligible = nudge_eligible(kills, turn.mark, turn.conversation)
        self._admit(turn, purpose, eligible=eligible)

    def _admit(self, turn: TurnRecord, purpose: ReadFor, *, eligible: set[str] | None = None,
               conversation_new: str = "", readmit: bool = False) -> None:
        """A Turn's admission (`turn`), a nudge (`nudge`) or the re-admission of a restored Turn (`resume`);
        `readmit`: a refused re-admission, admitted again as a Turn with the re-admit text first. `renew` and
        `renew-resume`: the admission after a refusal (`NotKept`) of a kept one, or of a re-admission."""
        if purpose in ("renew", "renew-resume"):
            readmit = purpose == "renew-resume"
            purpose, conversation_new = "turn", "the Harness no longer holds the conversation"
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
            self._persist = True  # ledgered before it is sent: a notice counts delivered from here
        notices = said_once([e.notice for e in entries])
        body: dict[str, Any] = {
            "definition": {"agent": agent.name, "instructions": agent.instructions, "access": agent.access,
                           "menu": self.workflow.menu_body(agent.name)},
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
        self._turn_go(turn, "admitting")
        self._feed(AdmittedLine(turn.agent, turn.id, kept, purpose == "nudge", notices))
        self._tell(turn, seat.Admit(turn.id, body))

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

    def _message(self, turn: TurnRecord, purpose: Purpose, *, readmit: bool = False) -> str:
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
        self._heard(turn)
        target = self.workflow.states[turn.state].on.get(event.pick)
        if target is None or event.pick in EVENTS:
            return  # TurnCore answers a pick the Turn does not allow; nothing moves
        self._turn_go(turn, "answered")
        turn.picked = event.pick
        answer = {"reply": f"moved to {target}"}
        self.answers[turn.id] = (turn.agent, turn.conversation, event.call_id, event.pick, answer)
        while len(self.answers) > ANSWERS_KEPT:
            del self.answers[min(self.answers)]
        self._tell(turn, seat.AnswerPick(turn.id, event.call_id, True, answer))
        self._feed(PickLine(turn.agent, turn.id, event.pick, target))
        self.turn = None  # answered: the Turn ends with the state that asked for it (ADR-0024)
        self._enter(target)


def said_once(notices: list[Notice]) -> tuple[Notice, ...]:
    """ADR-0062: two notices with the same words are said once."""
    seen: list[Notice] = []
    for n in notices:
        if n not in seen:
            seen.append(n)
    return tuple(seen)


# -- the machine -------------------------------------------------------------------------------------

S = TurnSide
LIVE: tuple[TurnPhase, ...] = ("waiting", "reading", "admitting", "running")
# One table holds the run's Turn (`step.Machine`). The seat's reports come from another actor, in any order
# a fault or a restart may leave (a test feeds them so): each is a row in every live phase, and where it
# may lead is the table's; a late report of a Turn the run has left never reaches it (its id is not the
# Turn's). The run's own inputs (`Ready`, `HarnessGone`, `Stop`) off their rows are our bug.
# docs/architecture.md prints the table; a test keeps the copy true.
TURN: Machine[Any] = Machine("the run's Turn", (
    (("waiting",), Ready, ("reading",), S._ready),
    (LIVE, KillsRead, ("admitting",), S._kills_read),
    (LIVE, Accepted, ("running",), S._admitted),
    (LIVE, NotKept, ("admitting",), S._not_kept),
    (LIVE, Picked, ("answered",), S._picked),
    (LIVE, GuardKill, (), S._guard_kill),
    (LIVE, Said, (), S._said),
    (LIVE, Settled, ("ended", "admitting"), S._turn_ended),
    (LIVE, TurnFault, ("ended",), S._turn_fault),
    # ADR-0062: a Harness that ends while no Turn runs faults nothing; under a Turn, the seat judges whether
    # the process that ended held its Submission: a cut Turn is re-admitted, or faulted by a kernel kill.
    (("waiting",), HarnessGone, (), S._not_running),
    (("reading", "admitting", "running"), HarnessGone, (), S._harness_gone),
    (LIVE, HarnessJudged, ("ended", "admitting"), S._judged),
    (LIVE, AdmissionUnsure, ("ended", "admitting"), S._admission_unsure),
    ((*LIVE, "ended"), Stop, ("ended",), S._stop),
))


def turn_markdown() -> str:
    """The run's Turn table, for docs/architecture.md."""
    return TURN.markdown()
