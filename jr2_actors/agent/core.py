"""TurnCore: one Turn of an Agent seat — its admissions and its Submissions' updates stream. Pure.

Theory of operation. A Turn has an id the run gives it and one conversation. Its states:

    idle ──Admitting──▶ admitting ──Admitted──▶ reading ──settle completed/aborted──▶ idle
      ▲                     │ not kept (404, kept: false) ─▶ idle, `NotKept`
      └─────────────────────┘ (a nudge, a wake, a re-admission: another `Admitting` of the same Turn)
    any state ──refused / failed settle / lost stream / Stop──▶ ended

- `reading`: the core asks for updates from the admission's offset and reads each event:
  - `pick`: an Allowed pick goes to the run (`Picked`), and every outstanding pick of a batch is kept
    until its answer is posted; a pick the Turn does not allow is answered at once, `over: false`,
    in the Briefing's words, and changes nothing.
  - `memory-limit`: a guard kill, reported as `GuardKill` — a notice, never a fault: a guard kill does
    not end the container (ADR-0062). An event with no id is kept: its place on the stream is its
    source. A size not in the guard's form is left out, and said in `problems`.
  - `submission-settled` of this Submission: `completed`/`aborted` is `Settled` (the run decides
    whether the Turn is over, or nudges it); `failed` faults the Turn in the Harness's own words —
    `provider limit: …` when its provider's retries ran out. A guard kill before it changes no word.
- A fault carries its `cause`, so the run tells them apart: `refused` (the admission failed), `settled`
  (the Submission failed), `lost` (the stream's 404: the conversation is gone), `stream` (the stream
  could not be read, three tries a second apart), `ended` (the run ended the Turn with its own reason —
  a kernel kill's `memory limit (OOMKilled, limit …)`, which the Workspace's core words).
- `Stop` (the run's abort or end) ends the Turn at once: nothing the stream says after it is reported.
  An abort of a Turn whose Submission may still run (`admitting`, `reading`) leaves it `stopping`: once
  the seat has posted the abort (`AbortAnswered`), the core reads the stream only for the Submission's
  settle, reports nothing, and is `ended` when it settled (or the stream is lost or unreadable).
- A Turn is `busy` while its Submission may still run — its admission in flight, a Submission not yet
  settled (an `over: true` answer included: the Submission runs on until the model stops, CONTRACTS.md
  §3), or `stopping`. The seat admits the next Turn of the conversation only once it is not.
- An answer that did not reach its call (`AnswerUndelivered`) is `AnswerFailed` for the run, and the core
  asks the seat to abort the Submission (`AbortSubmission`): it waits for a tool result that will never
  come, and would never settle (issue 16).

The core never calls the Harness and reads no clock: it returns `ReadUpdates` and `PostAnswer`, and
reports for the run, each carrying the agent and the Turn's id so a late one never reaches a new Turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.harness import briefing
from jr2_actors.harness.memory_kills import MAX_ID, guard_sizes
from jr2_actors.values.constants import STREAM_READ_ATTEMPTS, STREAM_READ_PAUSE_SECONDS
from jr2_actors.values.step import Step

PROVIDER_LIMIT = "provider limit"
MAX_TEXT = 4096  # the Harness's error words kept in a fault

State = Literal["idle", "admitting", "reading", "stopping", "ended"]
FaultCause = Literal["settled", "refused", "lost", "stream", "ended"]


# -- from the run (the seat's messages, said by the run's core and told by its actor) -------------------

@dataclass(frozen=True)
class StartTurn:
    turn_id: str
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

    turn_id: str


@dataclass(frozen=True)
class Admit:
    turn_id: str
    body: Mapping[str, Any] = field(repr=False)  # {definition, message, allowed, notices?, kept?, cwd?}


@dataclass(frozen=True)
class AnswerPick:
    turn_id: str
    call_id: str
    over: bool
    answer: Any


@dataclass(frozen=True)
class AbortTurn:
    turn_id: str


@dataclass(frozen=True)
class EndTurn:
    turn_id: str
    fault: str


ToSeat = StartTurn | ReadKills | Admit | AnswerPick | AbortTurn | EndTurn


# -- inputs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Admitting:
    """The run told `Admit`: the body's Allowed picks are what the Harness tells the model."""

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


Input = (Admitting | Admitted | AdmitRefused | AdmitNotKept | Events | StreamLost | StreamFailed | Answering
         | Answered | AnswerUndelivered | Stop | AbortAnswered)


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
    turn_id: str
    call_id: str
    pick: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class GuardKill:
    """A guard kill read on this Turn's stream (ADR-0062): a notice for the ledger, never a fault.

    Its source is `kill_id` when the Harness gave one, else its `place` on this conversation's stream.
    """

    agent: str
    turn_id: str
    conversation_id: str
    kill_id: str | None
    place: str
    peak: str | None
    limit: str | None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Said:
    agent: str
    turn_id: str
    text: str


@dataclass(frozen=True)
class Settled:
    """The Submission settled without a failure; the Turn stays open for the run to end or nudge."""

    agent: str
    turn_id: str
    outcome: Literal["completed", "aborted"]
    picked: bool


@dataclass(frozen=True)
class TurnFault:
    agent: str
    turn_id: str
    cause: FaultCause
    reason: str


@dataclass(frozen=True)
class Accepted:
    """The Harness took an admission (200): the run counts the conversation as held from now on."""

    agent: str
    turn_id: str
    submission_id: str


@dataclass(frozen=True)
class NotKept:
    """A `kept: true` admission refused with 404 `kept: false`: the Harness holds no such conversation
    (ADR-0062). Not a fault: the run takes the path of a lost conversation and admits the Turn again."""

    agent: str
    turn_id: str
    conversation_id: str
    message: str


@dataclass(frozen=True)
class AnswerFailed:
    """An answer to a pick did not reach the Harness: the model still waits for it."""

    agent: str
    turn_id: str
    call_id: str
    problem: str


Report = Picked | GuardKill | Said | Settled | TurnFault | Accepted | NotKept | AnswerFailed


TurnStep = Step[Action, Report]


class TurnCore:
    def __init__(self, agent: str, turn_id: str, conversation_id: str) -> None:
        self.agent = agent
        self.turn_id = turn_id
        self.conversation_id = conversation_id
        self.allowed: tuple[str, ...] = ()
        self.state: State = "idle"
        self.submission = ""
        self.offset = "0"
        self.outstanding: dict[str, bool] = {}  # call id → its answer is being posted
        self.closing = ""  # the call id whose answer `over: true` ends this Turn (the Harness settles it)
        self._picked = False
        self._read_failures = 0

    @property
    def ended(self) -> bool:
        """The run is done with the Turn: it reports nothing more (a `stopping` one may still read)."""
        return self.state in ("stopping", "ended")

    @property
    def busy(self) -> bool:
        """Its Submission may still run: the next admission of its conversation waits (CONTRACTS.md §3)."""
        return self.state in ("admitting", "reading", "stopping")

    def step(self, event: Input) -> TurnStep:
        if self.state == "ended":
            return Step(note=f"{type(event).__name__} after the Turn ended: dropped")
        if self.state == "stopping":
            return self._stopping(event)
        actions: list[Action] = []
        reports: list[Report] = []
        note = ""
        if isinstance(event, Stop):
            # The run's abort of a Submission that may run: read for its settle once the abort is posted.
            # Its own end (a kernel kill ended the Harness) leaves nothing running to wait for.
            self.state = "stopping" if event.reason is None and self.busy else "ended"
            if event.reason is not None:
                reports.append(self._fault("ended", event.reason))
        elif isinstance(event, Admitting):
            if self.state != "idle":
                return Step(note=f"an admission while {self.state}: dropped")
            self.allowed, self.state = event.allowed, "admitting"
            self.outstanding.clear()
            self._picked = False
        elif isinstance(event, Admitted) and self.state == "admitting":
            self.submission, self.offset, self.state = event.submission_id, event.offset, "reading"
            self._read_failures = 0
            reports.append(Accepted(self.agent, self.turn_id, event.submission_id))
            actions.append(ReadUpdates(self.offset))
        elif isinstance(event, AdmitRefused) and self.state == "admitting":
            reports.append(self._end("refused", f"admission refused: {event.message}"))
        elif isinstance(event, AdmitNotKept) and self.state == "admitting":
            self.state = "idle"
            reports.append(NotKept(self.agent, self.turn_id, self.conversation_id, event.message))
        elif isinstance(event, StreamLost) and self.state == "reading":
            reports.append(self._end("lost", f"the conversation was lost ({event.message})"))
        elif isinstance(event, StreamFailed) and self.state == "reading":
            self._read_failures += 1
            if self._read_failures < STREAM_READ_ATTEMPTS:
                actions.append(ReadUpdates(self.offset, after=STREAM_READ_PAUSE_SECONDS))
            else:
                reports.append(self._end("stream", f"the updates stream could not be read: {event.message}"))
        elif isinstance(event, Events) and self.state == "reading":
            self._read_failures = 0
            start = self.offset
            self.offset = event.next_offset
            for i, e in enumerate(event.events):
                self._event(e, start, i, actions, reports)
                if not self._reading():
                    break
            if self._reading():
                actions.append(ReadUpdates(self.offset))  # a pick's answer arrives on the stream too
        elif isinstance(event, Answering):
            if self.outstanding.get(event.call_id) is False:
                self.outstanding[event.call_id] = True
                actions.append(PostAnswer(event.call_id, event.over, event.answer))
                if event.over:
                    self.closing = event.call_id
            else:
                note = f"an answer to pick {event.call_id}, which is not waiting for one: dropped"
        elif isinstance(event, Answered):
            self.outstanding.pop(event.call_id, None)
        elif isinstance(event, AnswerUndelivered):
            self.outstanding.pop(event.call_id, None)
            reports.append(AnswerFailed(self.agent, self.turn_id, event.call_id, event.message))
            if self.state == "reading":
                actions.append(AbortSubmission())  # its call waits for a result that will not come
        else:
            note = f"{type(event).__name__} while {self.state}: dropped"
        return Step(tuple(actions), tuple(reports), note=note)

    def _stopping(self, event: Input) -> TurnStep:
        """Stopped by the run, its Submission perhaps still running: nothing is reported but an answer that
        did not reach its call; the stream is read only for the Submission's settle, once the abort was
        posted."""
        actions: list[Action] = []
        reports: list[Report] = []
        note = ""
        if isinstance(event, Admitted):  # the admission in flight landed: the seat aborts what it started
            self.submission, self.offset = event.submission_id, event.offset
        elif isinstance(event, (AdmitRefused, AdmitNotKept, StreamLost)):
            self.state = "ended"  # nothing was started, or the conversation is gone
        elif isinstance(event, AbortAnswered):
            if event.aborted and self.submission:
                self._read_failures = 0
                actions.append(ReadUpdates(self.offset))
            else:
                self.state = "ended"
        elif isinstance(event, StreamFailed):
            self._read_failures += 1
            if self._read_failures < STREAM_READ_ATTEMPTS:
                actions.append(ReadUpdates(self.offset, after=STREAM_READ_PAUSE_SECONDS))
            else:
                self.state = "ended"  # cannot tell: the next admission's 409 is "not yet", bounded
        elif isinstance(event, Events):
            self._read_failures = 0
            self.offset = event.next_offset
            if any(e.get("type") == "submission-settled" and e.get("submissionId") == self.submission
                   for e in event.events):
                self.state = "ended"
            else:
                actions.append(ReadUpdates(self.offset))
        elif isinstance(event, Answered):
            self.outstanding.pop(event.call_id, None)
        elif isinstance(event, AnswerUndelivered):  # issue 16: the run still hears it (a pick-answer notice)
            self.outstanding.pop(event.call_id, None)
            reports.append(AnswerFailed(self.agent, self.turn_id, event.call_id, event.message))
        else:
            note = f"{type(event).__name__} while stopping: dropped"
        return Step(tuple(actions), tuple(reports), note=note)

    def _event(self, e: Mapping[str, Any], start: str, i: int, actions: list[Action], reports: list[Report]) -> None:
        kind = e.get("type")
        if kind == "message-appended":
            message = e.get("message")
            text = message.get("content") if isinstance(message, dict) else None
            if isinstance(text, str):
                reports.append(Said(self.agent, self.turn_id, text))
        elif kind == "pick":
            call_id, pick, args = e.get("callId"), e.get("pick"), e.get("args")
            if not isinstance(call_id, str) or not call_id or not isinstance(pick, str):
                return
            if pick not in self.allowed:
                actions.append(PostAnswer(call_id, False, briefing.not_allowed(pick, self.allowed)))
                return
            self._picked = True
            self.outstanding[call_id] = False
            reports.append(Picked(self.agent, self.turn_id, call_id, pick, args if isinstance(args, dict) else {}))
        elif kind == "memory-limit":
            reports.append(self._guard_kill(e, start, i))
        elif kind == "submission-settled" and e.get("submissionId") == self.submission:
            outcome = e.get("outcome")
            if outcome in ("completed", "aborted"):
                self.state = "idle"
                reports.append(Settled(self.agent, self.turn_id, outcome, self._picked))
            elif outcome == "failed":
                reports.append(self._end("settled", _failure(e.get("error"))))
            else:
                reports.append(self._end("settled", f"the Submission settled {_short(outcome)}"))

    def _reading(self) -> bool:  # read afresh: an event can end the Submission mid-batch
        return self.state == "reading"

    def _guard_kill(self, e: Mapping[str, Any], start: str, i: int) -> GuardKill:
        problems: list[str] = []
        raw_id = e.get("id")
        kill_id: str | None = None
        if isinstance(raw_id, str) and 0 < len(raw_id) <= MAX_ID:
            kill_id = raw_id
        elif raw_id is not None:
            problems.append(f"a guard kill's id {_short(raw_id)} is not an id of at most {MAX_ID} characters: "
                            "kept, with its place on the stream as its source")
        # ADR-0062: sizes are untrusted like the kill list's, and read by the same rule.
        peak, limit, size_problems = guard_sizes(e.get("peak"), e.get("limit"))
        problems.extend(f"a guard kill's {p}" for p in size_problems)
        return GuardKill(self.agent, self.turn_id, self.conversation_id, kill_id, _place(e.get("position"), start, i),
                         peak, limit, tuple(problems))

    def _end(self, cause: FaultCause, reason: str) -> TurnFault:
        self.state = "ended"
        return self._fault(cause, reason)

    def _fault(self, cause: FaultCause, reason: str) -> TurnFault:
        return TurnFault(self.agent, self.turn_id, cause, reason)


def _failure(error: object) -> str:
    """The Harness's own words for a failed Submission; only the provider's limit gets a fixed prefix."""
    err = error if isinstance(error, dict) else {}
    kind, message = _text(err.get("type")), _text(err.get("message"))
    if kind == "provider_limit":
        return f"{PROVIDER_LIMIT}: {message}".rstrip(": ")
    return f"{kind}: {message}".strip(": ") or "the Submission failed"


def _place(position: object, start: str, i: int) -> str:
    """Where an event sits on its conversation's stream: its position when the Harness gave a sane one."""
    if isinstance(position, dict):
        batch, index = position.get("batch"), position.get("index")
        if all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**53 for n in (batch, index)):
            return f"batch {batch} index {index}"
    return f"offset {start[:64]} event {i}"


def _text(value: object) -> str:
    return " ".join(value.split())[:MAX_TEXT] if isinstance(value, str) else ""


def _short(value: object) -> str:
    return repr(value)[:80]
