"""SeatCore: an Agent seat's decisions over its Turns (DESIGN.md, ADR-0062, CONTRACTS.md §3). Pure.

The seat takes the run's messages (`ToSeat`) and its jobs' results (`SeatResult`), and returns the jobs
its shell runs (`SeatJob`: the Harness's calls, the stream's reads, a timer) and the reports it tells the
run (`ToRun`). Each Turn's own machine is a `TurnCore`; the seat decides what lies between them:

- **The admission waits for its read.** `StartTurn` asks the list's read (`ReadKillsJob`), answered to the
  run as `KillsRead` (None: could not tell, never an empty list; a Menu-only seat reads nothing). The run
  raises its notices, persists, then tells `Admit`; the seat posts it (`AdmitJob`) and reads the stream.
- **One Submission at a time per conversation.** A `StartTurn` for a conversation whose previous Submission
  may still run is held (the seat is `held`): its read, then its admission, wait for the previous settle.
  Past `PREVIOUS_SETTLE_SECONDS` the seat aborts it, and as long again later the held Turn goes on.
- **A restart settles the old process's Submissions** (CONTRACTS §3). A held Turn asks which Harness
  process answers now (`ProbeJob`); a previous Submission accepted by another process is gone, and the
  held Turn goes on at once.
- **A restart is judged against the Turn** (ADR-0062). `CheckHarness` probes (asked again for 30 s while
  the new container starts); only an open Submission of the process that ended is cut — the Turn is then
  idle for its re-admission — and `HarnessJudged` says which. A Harness that says no boot ids, or none
  answering, cannot be told apart: a cut.
- **An admission whose fate is unknown** (a reset, a cut probe, a 5xx) is resolved, not fatal: the seat
  aborts (`aborted`: the Harness had taken it) and reports `AdmissionUnsure`; the conversation's next Turn
  aborts first too. One answered while the run aborts the Turn is aborted once its answer is in.
- **The run ends a Turn.** `AbortTurn` cuts the read, drops what the Turn says later, aborts and reports
  `TurnAborted` once; `EndTurn` ends it with the run's fault.

The seat's position is its phase (`empty`, `open`, `held`), and `MACHINE` its table: an input with no row is
our bug (`OffTable`). A result names its Turn; one of a Turn the seat has left is dropped with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from jr2_actors.agent import core as turn
from jr2_actors.agent import messages as seat
from jr2_actors.agent.messages import (
    AbortDone,
    AbortJob,
    AbortTurn,
    AdmissionUnsure,
    Admit,
    AdmitDone,
    AdmitJob,
    AnswerDone,
    AnswerJob,
    AnswerPick,
    ArmSettle,
    BootDone,
    CheckHarness,
    CutAdmission,
    CutRead,
    EndTurn,
    HarnessJudged,
    KillsDone,
    KillsRead,
    ProbeJob,
    ReadDone,
    ReadDue,
    ReadJob,
    ReadKills,
    ReadKillsJob,
    SeatJob,
    SettleDue,
    StartTurn,
    ToRun,
    TurnAborted,
    TurnId,
)
from jr2_actors.values.step import Machine, Step, Walk

SeatPhase = Literal["empty", "open", "held"]
MAX_ALLOWED = 256
SeatStep = Step[SeatJob, ToRun]


@dataclass
class SeatTurn:
    """One Turn as the seat keeps it: its machine, where its Harness is, and what is out for it."""

    core: turn.TurnCore
    endpoint: str
    stream_url: str = ""
    read_seq: int = 0  # the read (or timed read) the Turn waits for; anything older is dropped
    admitting: bool = False
    abort_when_admitted: bool = False
    abort_first: bool = False  # restored, or after an unsure admission: a 409 is "not yet"
    held: StartTurn | None = None  # its start waits for the previous Submission of its conversation to settle
    settle_aborted: bool = False  # as the previous Turn, the seat aborted its Submission for taking too long
    boot: str = ""  # the Harness process that accepted its newest admission ("" when it did not say)
    judge: bool = False  # a restart was reported while its admission was in flight: judged on its answer
    judge_boot: str | None = None  # the process the probe found answering then
    landed: bool = False  # stopped while admitting, its admission's fate unknown (it may be held): its abort says so

    @property
    def turn_id(self) -> TurnId:
        return self.core.turn_id


class SeatCore:
    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.turn: SeatTurn | None = None
        # The previous Turn of the same conversation while its Submission may still run.
        self.previous: SeatTurn | None = None
        self.unsure: set[str] = set()  # conversations whose last admission failed after it may have arrived
        self._jobs: list[SeatJob] = []
        self._reports: list[ToRun] = []
        self._notes: list[str] = []
        self._walk = Walk(MACHINE, f"seat {agent}")

    @property
    def phase(self) -> SeatPhase:
        if self.turn is None:
            return "empty"
        return "held" if self.turn.held is not None else "open"

    def turns(self) -> tuple[SeatTurn, ...]:
        """The Turns the seat still keeps (the shell keeps a Harness client for each)."""
        return tuple(t for t in (self.turn, self.previous) if t is not None)

    def step(self, event: object) -> SeatStep:
        self._jobs, self._reports, self._notes = [], [], []
        with self._walk.take(self.phase, event) as handler:
            was = self.phase
            handler(self, event)
            if self.phase != was:
                self._walk.move(self.phase)
        return Step(tuple(self._jobs), tuple(self._reports), note="; ".join(self._notes))

    # -- the run's messages --------------------------------------------------------------------------

    def _start(self, m: StartTurn) -> None:
        new = SeatTurn(turn.TurnCore(self.agent, m.turn_id, m.conversation_id), m.endpoint,
                       abort_first=m.abort_first)
        old, conversation = self.turn, m.conversation_id
        if old is not None and old.core.busy and old is not self.previous:
            if old.core.conversation_id == conversation:
                if old.core.phase != "stopping" and not old.core.closing:
                    self._notes.append(f"turn {m.turn_id} starts while turn {old.turn_id} is open; the open one "
                                       "is aborted first")
                    self._abort_quietly(old)
                self.previous = old
                self._jobs.append(ArmSettle(old.turn_id))
            else:
                self._notes.append(f"turn {m.turn_id} starts while turn {old.turn_id} is open; the open one is "
                                   "left unread")
                self._stop_following(old)
        self.turn = new
        previous = self.previous
        if previous is not None and previous.core.busy and previous.core.conversation_id == conversation:
            # CONTRACTS.md §3: the next admission waits for the previous Submission's settle — its read of
            # the kill list too, so that read sees what the Submission's last moments left.
            new.held = m
            self._jobs.append(ProbeJob(new.turn_id, judge=False))  # a restart since settled it already
            return
        self._begin(new, m)

    def _begin(self, t: SeatTurn, m: StartTurn) -> None:
        if m.conversation_id in self.unsure:
            # An admission of this conversation failed after it may have reached the Harness: what it may have
            # started is aborted before this Turn, as a restored Turn's old Submission is.
            self.unsure.discard(m.conversation_id)
            m = replace(m, abort_first=True)
            t.abort_first = True
        if not m.in_workspace and not m.abort_first:
            self._reports.append(KillsRead(self.agent, t.turn_id, None, source=t.endpoint, asked=False))
            return
        self._jobs.append(ReadKillsJob(t.turn_id, abort_first=m.abort_first, read=m.in_workspace))

    def _read_kills(self, m: ReadKills) -> None:
        t = self._current(m.turn_id, m)
        if t is not None and t.held is None:
            self._jobs.append(ReadKillsJob(t.turn_id, abort_first=False, read=True))

    def _admit(self, m: Admit) -> None:
        t = self._current(m.turn_id, m)
        if t is None:
            return
        if t.held is not None:
            self._notes.append(f"an admission of turn {t.turn_id} before its start: dropped")
            return
        step = t.core.step(seat.Admitting(m.admission.allowed[:MAX_ALLOWED]))
        self._apply(t, step)
        if step.note:
            return
        t.admitting = True
        # CONTRACTS.md §3: a 409 to an admission into a conversation the Harness holds is "not yet".
        self._jobs.append(AdmitJob(t.turn_id, m.admission, m.admission.kept or t.abort_first))

    def _answer_pick(self, m: AnswerPick) -> None:
        t = self._current(m.turn_id, m)
        if t is not None:
            self._apply(t, t.core.step(seat.Answering(m.call_id, m.over, m.answer)))

    def _abort(self, m: AbortTurn) -> None:
        t = self._current(m.turn_id, m)
        if t is None:
            return
        self._stop_following(t)  # before the abort leaves: nothing the stream says later is reported
        t.core.step(seat.Stop())
        if t.admitting:
            t.abort_when_admitted = True  # posted once the admission's answer is in
        elif t.core.phase == "stopping":
            self._jobs.append(AbortJob(t.turn_id, asked=True, unsure=False))
        else:
            self._reports.append(TurnAborted(self.agent, t.turn_id, False))

    def _end(self, m: EndTurn) -> None:
        t = self._current(m.turn_id, m)
        if t is not None:
            self._stop_following(t)
            self._apply(t, t.core.step(seat.Stop(m.fault)))

    def _check(self, m: CheckHarness) -> None:
        t = self._current(m.turn_id, m)
        if t is not None:
            self._jobs.append(ProbeJob(t.turn_id, judge=True))

    # -- the jobs' results ---------------------------------------------------------------------------

    def _result(self, m: Any) -> None:
        t = next((x for x in (self.turn, self.previous) if x is not None and x.turn_id == m.turn_id), None)
        if t is None:
            if isinstance(m, AdmitDone) and m.reached:
                self._notes.append(f"turn {m.turn_id}'s admission failed after it may have reached the Harness")
            return  # a result of a Turn the seat has left
        RESULTS[type(m)](self, t, m)

    def _kills_done(self, t: SeatTurn, m: KillsDone) -> None:
        if not t.core.ended and t is self.turn:
            self._reports.append(KillsRead(self.agent, t.turn_id, m.read, m.problem, t.endpoint, asked=m.asked,
                                           found_running=m.found_running))

    def _admit_done(self, t: SeatTurn, m: AdmitDone) -> None:
        t.admitting = False
        if isinstance(m.result, seat.Admitted):
            t.stream_url, t.boot = m.stream_url, m.boot_id
        if t.abort_when_admitted:
            t.abort_when_admitted = False
            self._apply(t, t.core.step(m.result))  # stopping: it takes the Submission's id, or ends
            asked = t is self.turn and not t.settle_aborted  # the run's AbortTurn, not the seat's own
            if isinstance(m.result, seat.Admitted) or m.reached:
                t.landed = not isinstance(m.result, seat.Admitted)  # taken is told as `Accepted`; unsure is not
                self._jobs.append(AbortJob(t.turn_id, asked=asked, unsure=False))
            elif asked:
                self._reports.append(TurnAborted(self.agent, t.turn_id, False))
            return
        if isinstance(m.result, seat.AdmitRefused) and m.reached:
            # It may have reached the Harness and started a Submission: an abort finds out, and the run admits
            # the Turn again. Its conversation's next Turn aborts first too (a Harness slow to seat it may
            # start it after this abort).
            self._apply(t, t.core.step(seat.AdmitUnsure(m.result.message)))
            self._jobs.append(AbortJob(t.turn_id, asked=False, unsure=True))
            self.unsure.add(t.core.conversation_id)
        else:
            self._apply(t, t.core.step(m.result))
        if t.judge:
            t.judge = False
            self._judge(t, t.judge_boot)

    def _read_done(self, t: SeatTurn, m: ReadDone) -> None:
        if m.seq == t.read_seq:
            self._apply(t, t.core.step(m.result))

    def _read_due(self, t: SeatTurn, m: ReadDue) -> None:
        if m.seq == t.read_seq and t.core.phase in ("following", "stopping"):
            self._read(t, m.offset)

    def _answer_done(self, t: SeatTurn, m: AnswerDone) -> None:
        self._apply(t, t.core.step(m.result))

    def _abort_done(self, t: SeatTurn, m: AbortDone) -> None:
        if m.unsure and t is self.turn and not t.core.ended:
            self._reports.append(AdmissionUnsure(self.agent, t.turn_id, m.aborted, m.problem))
        if m.asked:
            self._reports.append(TurnAborted(self.agent, t.turn_id, m.aborted, m.problem, conversation_held=t.landed))
        if t.core.phase == "stopping":
            self._apply(t, t.core.step(seat.AbortAnswered(m.aborted)))

    def _settle_due(self, t: SeatTurn, m: SettleDue) -> None:
        if t is not self.previous or not t.core.busy:
            return
        if not t.settle_aborted:
            # The previous Submission did not settle in time: it is aborted, and given as long again for the
            # abort's settle; past that the held Turn goes on (its admission's 409 is "not yet", bounded).
            t.settle_aborted = True
            self._notes.append(f"turn {t.turn_id}'s Submission has not settled in time; it is aborted before "
                               f"turn {self.turn.turn_id if self.turn else '-'}")
            if t.core.phase != "stopping":
                self._abort_quietly(t)
            self._jobs.append(ArmSettle(t.turn_id))
            return
        self._notes.append(f"turn {t.turn_id}'s Submission did not settle after its abort; the next turn goes on")
        self._stop_following(t)
        self._jobs.append(CutAdmission(t.turn_id))
        self.previous = None
        self._release_held()

    def _boot_done(self, t: SeatTurn, m: BootDone) -> None:
        self._previous_gone(t.endpoint, m.boot)
        if not m.judge or t is not self.turn:
            return
        if t.admitting:
            t.judge, t.judge_boot = True, m.boot  # its answer says which process took it
            return
        self._judge(t, m.boot)

    # -- decisions -----------------------------------------------------------------------------------

    def _judge(self, t: SeatTurn, boot: str | None) -> None:
        """ADR-0062: a restart cuts the Turn only if the process that ended held its open Submission."""
        core = t.core
        cut = (core.open_submission or core.phase == "stopping") and (not boot or not t.boot or t.boot != boot)
        if cut:
            self._stop_following(t)
            self._apply(t, core.step(seat.Restarted()))
        self._reports.append(HarnessJudged(self.agent, t.turn_id, cut and core.phase == "idle"))

    def _previous_gone(self, endpoint: str, boot: str | None) -> None:
        """CONTRACTS §3: a restart settled the old process's Submissions — the held Turn waits no longer."""
        prev = self.previous
        if prev is None or not prev.boot or not boot or boot == prev.boot or prev.endpoint != endpoint:
            return
        self._stop_following(prev)
        if prev.core.phase in ("idle", "following", "stopping") or prev.core.open_submission:
            prev.core.step(seat.Restarted())
        self.previous = None
        self._release_held()

    def _release_held(self) -> None:
        """The previous Submission settled: the held Turn starts (its read of the list, then its admission)."""
        t = self.turn
        if t is None or t.held is None:
            return
        message, t.held = t.held, None
        if not t.core.ended:
            self._begin(t, message)

    def _abort_quietly(self, t: SeatTurn) -> None:
        """The seat's own abort of a Turn's Submission (the run did not ask: it hears no TurnAborted)."""
        self._stop_following(t)
        t.core.step(seat.Stop())
        if t.admitting:
            t.abort_when_admitted = True
        elif t.core.phase == "stopping":
            self._jobs.append(AbortJob(t.turn_id, asked=False, unsure=False))

    def _apply(self, t: SeatTurn, step: seat.TurnStep) -> None:
        if step.note:
            self._notes.append(f"turn {t.turn_id}: {step.note}")
        self._reports.extend(step.reports)
        for action in step.actions:
            if isinstance(action, seat.ReadUpdates):
                self._read(t, action.offset, action.after)
            elif isinstance(action, seat.PostAnswer):
                self._jobs.append(AnswerJob(t.turn_id, action.call_id, action.over, action.answer))
            elif isinstance(action, seat.AbortSubmission):
                self._jobs.append(AbortJob(t.turn_id, asked=False, unsure=False))
        if t.core.phase == "ended":
            self._stop_following(t)  # nothing the stream says after the Turn's end is read
        if t is self.previous and not t.core.busy:
            self.previous = None  # its Submission settled: the held Turn may start
            self._release_held()

    def _read(self, t: SeatTurn, offset: str, after: float = 0.0) -> None:
        t.read_seq += 1
        self._jobs.append(ReadJob(t.turn_id, t.read_seq, t.stream_url, offset, after))

    def _stop_following(self, t: SeatTurn) -> None:
        t.read_seq += 1  # whatever is in flight, or due on a timer, is dropped when it comes back
        self._jobs.append(CutRead(t.turn_id))

    def _current(self, turn_id: TurnId, message: object) -> SeatTurn | None:
        t = self.turn
        if t is None or t.turn_id != turn_id:
            self._notes.append(f"{type(message).__name__} for turn {turn_id}, which is not the seat's turn: dropped")
            return None
        return t

    def _dropped(self, message: object) -> None:
        self._notes.append(f"{type(message).__name__} while the seat has no turn: dropped")


S = SeatCore
RESULTS: dict[type, Callable[[SeatCore, SeatTurn, Any], None]] = {
    KillsDone: S._kills_done, AdmitDone: S._admit_done, ReadDone: S._read_done, ReadDue: S._read_due,
    AnswerDone: S._answer_done, AbortDone: S._abort_done, SettleDue: S._settle_due, BootDone: S._boot_done,
}
ANY: tuple[SeatPhase, ...] = ("empty", "open", "held")
SEAT_INPUTS = (StartTurn, ReadKills, Admit, AnswerPick, AbortTurn, EndTurn, CheckHarness, *RESULTS)
RUN = (ReadKills, Admit, AnswerPick, AbortTurn, EndTurn, CheckHarness)
# One table holds the seat (`step.Machine`). A Turn starts in any phase; the run's other messages name a Turn,
# and with none they are late (dropped with a note). A job's result comes back in any phase: it names its
# Turn, and one of a Turn the seat left is dropped. docs/architecture.md prints the table.
MACHINE: Machine[Callable[[SeatCore, Any], None]] = Machine("the seat", (
    (ANY, StartTurn, ("open", "held"), S._start),
    (("empty",), RUN, (), S._dropped),
    (("open", "held"), ReadKills, (), S._read_kills),
    (("open", "held"), Admit, (), S._admit),
    (("open", "held"), AnswerPick, (), S._answer_pick),
    (("open", "held"), AbortTurn, (), S._abort),
    (("open", "held"), EndTurn, (), S._end),
    (("open", "held"), CheckHarness, ("open",), S._check),
    (ANY, tuple(RESULTS), ("open",), S._result),
))
