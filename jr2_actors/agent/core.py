"""TurnCore: one Turn of an Agent seat — its admissions and its Submissions' updates stream. Pure.

Theory of operation. A Turn has an id the run gives it and one conversation. Its phases:

    idle ──Admitting──▶ admitting ──Admitted──▶ following ──settle completed/aborted──▶ idle
      ▲                     │ not kept (404, kept: false) ─▶ idle, `NotKept`
      └─────────────────────┘ (a nudge, a wake, a re-admission: another `Admitting` of the same Turn)
    any phase ──refused / failed settle / lost stream / Stop──▶ ended

- `following`: the core asks for updates from the admission's offset and reads each event:
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
  An abort of a Turn whose Submission may still run (`admitting`, `following`) leaves it `stopping`: once
  the seat has posted the abort (`AbortAnswered`), the core reads the stream only for the Submission's
  settle, reports nothing, and is `ended` when it settled (or the stream is lost or unreadable).
- A Turn is `busy` while its Submission may still run — its admission in flight, a Submission not yet
  settled (an `over: true` answer included: the Submission runs on until the model stops, CONTRACTS.md
  §3), or `stopping`. The seat admits the next Turn of the conversation only once it is not.
- An answer that did not reach its call (`AnswerUndelivered`) is `AnswerFailed` for the run, and the core
  asks the seat to abort the Submission (`AbortSubmission`): it waits for a tool result that will never
  come, and would never settle.

The machine is `MACHINE` at the bottom (`step.Machine`): an input with no row in the current phase is our
bug and raises `OffTable`; what may arrive late or twice has a row that drops it with a note.

The core never calls the Harness and reads no clock: it returns `ReadUpdates` and `PostAnswer`, and
reports for the run, each carrying the agent and the Turn's id so a late one never reaches a new Turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jr2_actors.agent.messages import (
    AbortAnswered,
    AbortSubmission,
    Accepted,
    Action,
    AdmitNotKept,
    AdmitRefused,
    Admitted,
    Admitting,
    AdmitUnsure,
    Answered,
    AnswerFailed,
    Answering,
    AnswerUndelivered,
    Events,
    FaultCause,
    GuardKill,
    Input,
    NotKept,
    Phase,
    Picked,
    PostAnswer,
    ReadUpdates,
    Report,
    Restarted,
    Said,
    Settled,
    Stop,
    StreamFailed,
    StreamLost,
    TurnFault,
    TurnId,
    TurnStep,
)
from jr2_actors.harness import briefing
from jr2_actors.harness.memory_kills import MAX_ID, guard_sizes
from jr2_actors.values.constants import STREAM_READ_ATTEMPTS, STREAM_READ_PAUSE_SECONDS
from jr2_actors.values.step import Machine, Step, Walk

PROVIDER_LIMIT = "provider limit"
MAX_TEXT = 4096  # the Harness's error words kept in a fault


class TurnCore:
    def __init__(self, agent: str, turn_id: TurnId, conversation_id: str) -> None:
        self.agent = agent
        self.turn_id = turn_id
        self.conversation_id = conversation_id
        self.allowed: tuple[str, ...] = ()
        self.phase: Phase = "idle"
        self.submission = ""
        self.offset = "0"
        self.outstanding: dict[str, bool] = {}  # call id → its answer is being posted
        self.closing = ""  # the call id whose answer `over: true` ends this Turn (the Harness settles it)
        self._picked = False
        self._read_failures = 0
        self.stream_gone = False  # the Turn ended because its stream was lost or unreadable
        self._actions: list[Action] = []
        self._reports: list[Report] = []
        self._note = ""
        self._walk = Walk(MACHINE, f"Turn {turn_id}")

    @property
    def ended(self) -> bool:
        """The run is done with the Turn: it reports nothing more (a `stopping` one may still read)."""
        return self.phase in ("stopping", "ended")

    @property
    def open_submission(self) -> bool:
        """A Submission was accepted and not seen to settle: a restart of the process holding it cut it."""
        return bool(self.submission) and (self.phase == "following" or (self.phase == "ended" and self.stream_gone))

    @property
    def busy(self) -> bool:
        """Its Submission may still run: the next admission of its conversation waits (CONTRACTS.md §3)."""
        return self.phase in ("admitting", "following", "stopping")

    def step(self, event: Input) -> TurnStep:
        self._actions, self._reports, self._note = [], [], ""
        with self._walk.take(self.phase, event) as handler:
            handler(self, event)
        return Step(tuple(self._actions), tuple(self._reports), note=self._note)

    def _go(self, phase: Phase) -> None:
        self._walk.move(phase)
        self.phase = phase

    # -- handlers (see MACHINE) ------------------------------------------------------------------------

    def _stop(self, event: Stop) -> None:
        # The run's abort of a Submission that may run: read for its settle once the abort is posted.
        # Its own end (a kernel kill ended the Harness) leaves nothing running to wait for.
        self._go("stopping" if event.reason is None and self.busy else "ended")
        if event.reason is not None:
            self._reports.append(self._fault("ended", event.reason))

    def _admitting(self, event: Admitting) -> None:
        self.allowed = event.allowed
        self._go("admitting")
        self.outstanding.clear()
        self._picked = False

    def _admission_dropped(self, event: Admitting) -> None:
        self._note = f"an admission while {self.phase}: dropped"

    def _admitted(self, event: Admitted) -> None:
        self.submission, self.offset = event.submission_id, event.offset
        self._go("following")
        self._read_failures = 0
        self._reports.append(Accepted(self.agent, self.turn_id, event.submission_id))
        self._actions.append(ReadUpdates(self.offset))

    def _refused(self, event: AdmitRefused) -> None:
        self._reports.append(self._end("refused", f"admission refused: {event.message}"))

    def _unsure(self, event: AdmitUnsure) -> None:
        self._go("idle")  # the seat's abort tells what the Harness did; the run admits again

    def _restarted(self, event: Restarted) -> None:
        # CONTRACTS §3: the new process runs none of the old one's Submissions and settles none of them.
        self._go("idle")
        self.submission, self.closing, self.stream_gone = "", "", False
        self.outstanding.clear()

    def _not_kept(self, event: AdmitNotKept) -> None:
        self._go("idle")
        self._reports.append(NotKept(self.agent, self.turn_id, self.conversation_id, event.message))

    def _lost(self, event: StreamLost) -> None:
        self.stream_gone = True
        self._reports.append(self._end("lost", f"the conversation was lost ({event.message})"))

    def _read_failed(self, event: StreamFailed) -> None:
        self._read_failures += 1
        if self._read_failures < STREAM_READ_ATTEMPTS:
            self._actions.append(ReadUpdates(self.offset, after=STREAM_READ_PAUSE_SECONDS))
        elif self.phase == "stopping":
            self._go("ended")  # cannot tell: the next admission's 409 is "not yet", bounded
        else:
            self.stream_gone = True
            self._reports.append(self._end("stream", f"the updates stream could not be read: {event.message}"))

    def _events(self, event: Events) -> None:
        self._read_failures = 0
        start = self.offset
        self.offset = event.next_offset
        for i, e in enumerate(event.events):
            self._event(e, start, i, self._actions, self._reports)
            if not self._following():
                break
        if self._following():
            self._actions.append(ReadUpdates(self.offset))  # a pick's answer arrives on the stream too

    def _answering(self, event: Answering) -> None:
        if self.outstanding.get(event.call_id) is False:
            self.outstanding[event.call_id] = True
            self._actions.append(PostAnswer(event.call_id, event.over, event.answer))
            if event.over:
                self.closing = event.call_id
        else:
            self._note = f"an answer to pick {event.call_id}, which is not waiting for one: dropped"

    def _answered(self, event: Answered) -> None:
        self.outstanding.pop(event.call_id, None)

    def _undelivered(self, event: AnswerUndelivered) -> None:
        """The run hears it (a pick-answer notice), even from a `stopping` Turn."""
        self.outstanding.pop(event.call_id, None)
        self._reports.append(AnswerFailed(self.agent, self.turn_id, event.call_id, event.message))
        if self.phase == "following":
            self._actions.append(AbortSubmission())  # its call waits for a result that will not come

    # `stopping`: stopped by the run, its Submission perhaps still running. Nothing is reported but an answer
    # that did not reach its call; the stream is read only for the Submission's settle, once the abort was
    # posted.

    def _admitted_stopping(self, event: Admitted) -> None:
        self.submission, self.offset = event.submission_id, event.offset  # the seat aborts what it started
        # Kept means accepted: the run counts the conversation (and its notices heard) though it left the Turn.
        self._reports.append(Accepted(self.agent, self.turn_id, event.submission_id))

    def _nothing_runs(self, event: AdmitRefused | AdmitUnsure | AdmitNotKept | StreamLost | Restarted) -> None:
        self._go("ended")  # nothing was started, or the conversation is gone

    def _abort_answered(self, event: AbortAnswered) -> None:
        if event.aborted and self.submission:
            self._read_failures = 0
            self._actions.append(ReadUpdates(self.offset))
        else:
            self._go("ended")

    def _events_stopping(self, event: Events) -> None:
        self._read_failures = 0
        self.offset = event.next_offset
        if any(e.get("type") == "submission-settled" and e.get("submissionId") == self.submission
               for e in event.events):
            self._go("ended")
        else:
            self._actions.append(ReadUpdates(self.offset))

    def _dropped(self, event: Input) -> None:
        self._note = f"{type(event).__name__} while {self.phase}: dropped"

    def _after_end(self, event: Input) -> None:
        self._note = f"{type(event).__name__} after the Turn ended: dropped"

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
                self._go("idle")
                reports.append(Settled(self.agent, self.turn_id, outcome, self._picked))
            elif outcome == "failed":
                reports.append(self._end("settled", _failure(e.get("error"))))
            else:
                reports.append(self._end("settled", f"the Submission settled {_short(outcome)}"))

    def _following(self) -> bool:  # read afresh: an event can end the Submission mid-batch
        return self.phase == "following"

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
        self._go("ended")
        return self._fault(cause, reason)

    def _fault(self, cause: FaultCause, reason: str) -> TurnFault:
        return TurnFault(self.agent, self.turn_id, cause, reason)


# -- the machine -------------------------------------------------------------------------------------

T = TurnCore
ANSWERS = (Answered, AnswerUndelivered)
# One table holds the Turn (`step.Machine`): an input with no row is our bug (`OffTable`) — an admission's
# answer with no admission out, a stream read with no read asked for. What may arrive late or twice (an
# admission or an answer the run sends while the Turn cannot take it, anything after its end) has a row
# that drops it with a note. docs/architecture.md prints it; a test keeps the copy true.
MACHINE: Machine[Callable[[TurnCore, Any], None]] = Machine("Turn", (
    (("idle",), Admitting, ("admitting",), T._admitting),
    (("admitting", "following"), Admitting, (), T._admission_dropped),
    (("admitting",), Admitted, ("following",), T._admitted),
    (("admitting",), AdmitRefused, ("ended",), T._refused),
    (("admitting",), AdmitNotKept, ("idle",), T._not_kept),
    (("admitting",), AdmitUnsure, ("idle",), T._unsure),
    (("idle", "following", "ended"), Restarted, ("idle",), T._restarted),
    (("following",), Events, ("idle", "ended"), T._events),
    (("following",), StreamLost, ("ended",), T._lost),
    (("following",), StreamFailed, ("ended",), T._read_failed),
    (("idle", "admitting", "following"), Answering, (), T._answering),
    (("idle", "admitting", "following", "stopping"), Answered, (), T._answered),
    (("idle", "admitting", "following", "stopping"), AnswerUndelivered, (), T._undelivered),
    (("idle", "admitting", "following"), Stop, ("stopping", "ended"), T._stop),
    (("stopping",), Admitted, (), T._admitted_stopping),
    (("stopping",), (AdmitRefused, AdmitUnsure, AdmitNotKept, StreamLost, Restarted), ("ended",), T._nothing_runs),
    (("stopping",), AbortAnswered, ("ended",), T._abort_answered),
    (("stopping",), StreamFailed, ("ended",), T._read_failed),
    (("stopping",), Events, ("ended",), T._events_stopping),
    (("stopping",), (Stop, Admitting, Answering), (), T._dropped),
    (("ended",), (Admitting, Admitted, AdmitRefused, AdmitUnsure, AdmitNotKept, Events, StreamLost, StreamFailed,
                  Answering, *ANSWERS, Stop, AbortAnswered), (), T._after_end),
))


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
