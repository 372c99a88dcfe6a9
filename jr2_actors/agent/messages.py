"""An Agent seat's vocabulary: what the run tells a seat (`ToSeat`), the inputs `TurnCore` takes, the
actions it asks for and the reports it tells the run. Pure values; `core.py` holds the machine over them.

The protocol with the run, its parent. Every message names the Turn (`turn_id`, the run's number for it); every
report names the agent and the Turn, so the run drops what a Turn it has left still says.

    run → actor                                      actor → run
    StartTurn(turn_id, conversation_id, endpoint,    KillsRead(agent, turn_id, read, problem, source, asked)
              token, in_workspace)
    Admit(turn_id, admission)                        Picked, Said, GuardKill, Settled, NotKept, TurnFault
    AnswerPick(turn_id, call_id, over, answer)       AnswerFailed (the answer did not reach the Harness)
    AbortTurn(turn_id)                               TurnAborted(agent, turn_id, aborted, problem)
    EndTurn(turn_id, fault)                          TurnFault(cause="ended", reason=fault)
    CheckHarness(turn_id)                            HarnessJudged(agent, turn_id, cut)
                                                     AdmissionUnsure(agent, turn_id, accepted, problem)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.harness.admission import Admission
from jr2_actors.harness.memory_kills import MemoryKillRead
from jr2_actors.values.step import Step

Phase = Literal["idle", "admitting", "following", "stopping", "ended"]
# Why a Turn faulted: the seat's causes, or (`actor`, said by the run's shell) the seat's actor died.
FaultCause = Literal["settled", "refused", "lost", "stream", "ended", "actor"]
TurnId = int  # the run's number for the Turn (its `turn.id`): one type on both sides of the seat


# -- from the run (the seat's messages, said by the run's core and told by its actor) -------------------

@dataclass(frozen=True)
class StartTurn:
    turn_id: TurnId
    conversation_id: str
    endpoint: str
    token: str = field(default="", repr=False)  # filled by the run's shell, which holds the signing key
    in_workspace: bool = True  # a Menu-only agent on the Instance Harness reads no kill list
    # A Turn restored after the Orchestrator restarted: its Submission may still run on the Harness, so it
    # is aborted first (quietly: there may be nothing to abort) and the Turn admitted again, `kept: true`.
    abort_first: bool = False


@dataclass(frozen=True)
class ReadKills:
    """Read the list again for the open Turn (before a nudge, another admission of it): `KillsRead` answers."""

    turn_id: TurnId


@dataclass(frozen=True)
class Admit:
    turn_id: TurnId
    admission: Admission


@dataclass(frozen=True)
class AnswerPick:
    turn_id: TurnId
    call_id: str
    over: bool
    answer: Any


@dataclass(frozen=True)
class AbortTurn:
    turn_id: TurnId


@dataclass(frozen=True)
class EndTurn:
    turn_id: TurnId
    fault: str


@dataclass(frozen=True)
class CheckHarness:
    """The Workspace saw its Harness restart: did the ended process hold this Turn's Submission?
    (ADR-0062: a restart is judged against the Turn it could have touched.) `HarnessJudged` answers."""

    turn_id: TurnId


ToSeat = StartTurn | ReadKills | Admit | AnswerPick | AbortTurn | EndTurn | CheckHarness


# -- inputs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Admitting:
    """The run told `Admit`: the admission's Allowed picks are what the Harness tells the model."""

    allowed: tuple[str, ...]


@dataclass(frozen=True)
class Admitted:
    submission_id: str
    offset: str


@dataclass(frozen=True)
class AdmitRefused:
    message: str


@dataclass(frozen=True)
class AdmitNotKept:
    message: str


@dataclass(frozen=True)
class Events:
    events: Sequence[Mapping[str, Any]] = field(repr=False)
    next_offset: str


@dataclass(frozen=True)
class StreamLost:
    """The stream answered 404: the Harness no longer holds the conversation."""

    message: str


@dataclass(frozen=True)
class StreamFailed:
    """A read of the stream got no usable answer (cut short, unreachable, not the contract's shape)."""

    message: str


@dataclass(frozen=True)
class Answering:
    """The run answers a pick."""

    call_id: str
    over: bool
    answer: Any


@dataclass(frozen=True)
class Answered:
    call_id: str


@dataclass(frozen=True)
class AnswerUndelivered:
    call_id: str
    message: str


@dataclass(frozen=True)
class Stop:
    """The run aborts the Turn (`reason` None) or ends it with a fault of its own words."""

    reason: str | None = None


@dataclass(frozen=True)
class AbortAnswered:
    """The abort of a `stopping` Turn was posted: `aborted` — the Harness stopped a running Submission,
    whose settle is then read for; else nothing ran, or the abort could not be posted."""

    aborted: bool


@dataclass(frozen=True)
class AdmitUnsure:
    """The admission may have reached the Harness and got no answer that says what it did (a reset, a cut
    probe, a 5xx): the seat finds out with an abort (`AdmissionUnsure`), and the run re-admits."""

    message: str


@dataclass(frozen=True)
class Restarted:
    """The Harness process that accepted the Turn's Submission ended: the Submission is gone, and no
    settle will come for it (CONTRACTS §3). The Turn is idle, ready to be admitted again."""


Input = (Admitting | Admitted | AdmitRefused | AdmitUnsure | Restarted | AdmitNotKept | Events | StreamLost
         | StreamFailed | Answering | Answered | AnswerUndelivered | Stop | AbortAnswered)


# -- actions -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReadUpdates:
    offset: str
    after: float = 0.0  # seconds to wait first (a read that failed is tried again a second later)


@dataclass(frozen=True)
class PostAnswer:
    call_id: str
    over: bool
    answer: Any


@dataclass(frozen=True)
class AbortSubmission:
    """Abort the Turn's running Submission (quietly: the run did not ask, and hears no `TurnAborted`)."""


Action = ReadUpdates | PostAnswer | AbortSubmission


# -- reports to the run (each names the agent and the Turn) ------------------------------------------

@dataclass(frozen=True)
class Picked:
    agent: str
    turn_id: TurnId
    call_id: str
    pick: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class GuardKill:
    """A guard kill read on this Turn's stream (ADR-0062): a notice for the ledger, never a fault.

    Its source is `kill_id` when the Harness gave one, else its `place` on this conversation's stream.
    """

    agent: str
    turn_id: TurnId
    conversation_id: str
    kill_id: str | None
    place: str
    peak: str | None
    limit: str | None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Said:
    agent: str
    turn_id: TurnId
    text: str


@dataclass(frozen=True)
class Settled:
    """The Submission settled without a failure; the Turn stays open for the run to end or nudge."""

    agent: str
    turn_id: TurnId
    outcome: Literal["completed", "aborted"]
    picked: bool


@dataclass(frozen=True)
class TurnFault:
    agent: str
    turn_id: TurnId
    cause: FaultCause
    reason: str


@dataclass(frozen=True)
class Accepted:
    """The Harness took an admission (200): the run counts the conversation as held from now on."""

    agent: str
    turn_id: TurnId
    submission_id: str


@dataclass(frozen=True)
class NotKept:
    """A `kept: true` admission refused with 404 `kept: false`: the Harness holds no such conversation
    (ADR-0062). Not a fault: the run takes the path of a lost conversation and admits the Turn again."""

    agent: str
    turn_id: TurnId
    conversation_id: str
    message: str


@dataclass(frozen=True)
class AnswerFailed:
    """An answer to a pick did not reach the Harness: the model still waits for it."""

    agent: str
    turn_id: TurnId
    call_id: str
    problem: str


@dataclass(frozen=True)
class HarnessJudged:
    """The answer to `CheckHarness`: `cut` — the ended process held the Turn's open Submission (or could
    not be told apart from the one answering now), so the Turn is idle and must be admitted again; else the
    restart touched nothing of this Turn."""

    agent: str
    turn_id: TurnId
    cut: bool


@dataclass(frozen=True)
class AdmissionUnsure:
    """An admission whose fate was unknown, resolved by the seat's abort: `accepted` — a Submission was
    running, so the Harness had taken it (its notices were heard); else nothing ran. Either way the Turn is
    idle and the run admits it again (ADR-0062's re-admission)."""

    agent: str
    turn_id: TurnId
    accepted: bool
    problem: str


Report = (Picked | GuardKill | Said | Settled | TurnFault | Accepted | NotKept | AnswerFailed | HarnessJudged
          | AdmissionUnsure)


# -- the seat's own reports to the run (beside its Turns' above; the AgentActor says them) ------------

@dataclass(frozen=True)
class KillsRead:
    """What the read before an admission found; `read` is None when it could not tell (or, with
    `asked=False`, when the seat is Menu-only and reads no list)."""

    agent: str
    turn_id: TurnId
    read: MemoryKillRead | None
    problem: str = ""
    source: str = ""
    asked: bool = True
    # A restored Turn's abort before its read found a Submission running: the admission whose answer the
    # crash lost had been taken (its notices heard). None: no abort was made, or it could not tell.
    found_running: bool | None = None


@dataclass(frozen=True)
class TurnAborted:
    """The abort was posted (`aborted`: the Harness stopped a running Submission), or could not be.
    `conversation_held`: the run stopped the Turn while its admission was out, and the admission's fate is
    unknown (it may have reached the Harness): no `Accepted` comes, yet the conversation may be held, so its
    next admission says `kept` (ADR-0062; a Harness holding none refuses it, and that Turn takes the lost path)."""

    agent: str
    turn_id: TurnId
    aborted: bool
    problem: str = ""
    conversation_held: bool = False


ToRun = Report | KillsRead | TurnAborted  # everything a seat tells the run


TurnStep = Step[Action, Report]


# -- the seat's work and its results (SeatCore asks for jobs; its shell runs them and feeds back results) --

@dataclass(frozen=True)
class ReadKillsJob:
    """The read before an admission (`read`), after an abort of what the conversation may still run
    (`abort_first`)."""

    turn_id: TurnId
    abort_first: bool
    read: bool


@dataclass(frozen=True)
class AdmitJob:
    turn_id: TurnId
    admission: Admission
    not_yet: bool  # a 409 is "not yet" (CONTRACTS.md §3: a conversation the Harness holds)


@dataclass(frozen=True)
class ReadJob:
    """One long-poll of the Turn's stream from `offset` (after `after` seconds: `ReadDue` first)."""

    turn_id: TurnId
    seq: int
    url: str
    offset: str
    after: float = 0.0


@dataclass(frozen=True)
class AnswerJob:
    turn_id: TurnId
    call_id: str
    over: bool
    answer: Any


@dataclass(frozen=True)
class AbortJob:
    turn_id: TurnId
    asked: bool  # the run's AbortTurn (it hears TurnAborted), else the seat's own
    unsure: bool  # the abort that finds out what an unsure admission did


@dataclass(frozen=True)
class ProbeJob:
    """Which Harness process answers now: to judge a restart (`judge`), or for a held Turn's previous."""

    turn_id: TurnId
    judge: bool


@dataclass(frozen=True)
class ArmSettle:
    """`SettleDue(turn_id)` after `PREVIOUS_SETTLE_SECONDS`."""

    turn_id: TurnId


@dataclass(frozen=True)
class CutRead:
    """End the Turn's read in flight (its result, or one due on a timer, is dropped when it comes back)."""

    turn_id: TurnId


@dataclass(frozen=True)
class CutAdmission:
    """End the Turn's admission in flight (it would hold a pool thread as long as the Harness lives)."""

    turn_id: TurnId


SeatJob = ReadKillsJob | AdmitJob | ReadJob | AnswerJob | AbortJob | ProbeJob | ArmSettle | CutRead | CutAdmission


@dataclass(frozen=True)
class KillsDone:
    turn_id: TurnId
    read: MemoryKillRead | None
    problem: str
    asked: bool = True
    outcome: str = "crashed"  # for the metrics: read | error | unreachable | protocol | malformed | crashed
    found_running: bool | None = None  # the abort before it found a Submission running (None: none was made)


@dataclass(frozen=True)
class AdmitDone:
    turn_id: TurnId
    result: Admitted | AdmitRefused | AdmitNotKept
    stream_url: str = ""
    outcome: str = "crashed"  # for the metrics: admitted | not_kept | error | unreachable | protocol | crashed
    reached: bool = False  # a failed admission that may have reached the Harness (it may start a Submission)
    boot_id: str = ""  # the Harness process that accepted it, when it said


@dataclass(frozen=True)
class BootDone:
    """The Harness answered `/healthz` with this boot id ("" when it says none), or never did (None)."""

    turn_id: TurnId
    boot: str | None
    judge: bool


@dataclass(frozen=True)
class ReadDone:
    turn_id: TurnId
    seq: int
    result: Events | StreamLost | StreamFailed


@dataclass(frozen=True)
class ReadDue:
    turn_id: TurnId
    seq: int
    offset: str


@dataclass(frozen=True)
class AnswerDone:
    turn_id: TurnId
    result: Answered | AnswerUndelivered


@dataclass(frozen=True)
class AbortDone:
    turn_id: TurnId
    aborted: bool
    problem: str
    asked: bool = True
    unsure: bool = False


@dataclass(frozen=True)
class SettleDue:
    """The previous Turn's Submission has had `PREVIOUS_SETTLE_SECONDS` to settle."""

    turn_id: TurnId


SeatResult = KillsDone | AdmitDone | BootDone | ReadDone | ReadDue | AnswerDone | AbortDone | SettleDue
