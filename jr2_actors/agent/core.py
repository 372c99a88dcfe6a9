"""TurnCore: one Submission of an Agent, read from its Harness updates stream. Pure.

Theory of operation: after the admission the core asks for updates from the admission's offset and
reads each event of its Submission:

- `pick` — the Agent picked from its Menu. An Allowed pick goes to the run, which answers it (`over`
  ends the Turn); a pick the Turn does not allow is answered at once, `over: false`, with the Allowed
  list, and changes nothing.
- `memory-limit` — a guard kill on this stream: reported (the notice ledger keeps its id) before the
  settle that follows.
- `submission-settled` — `completed` or `aborted` end the Turn; `failed` is a fault whose reason says
  whose limit it was: `provider limit: …` when the Harness's provider retries ran out (ADR-0064),
  `memory limit (guard, peak P of L): …` after a guard kill, else the Harness's own words.
- a lost conversation (the stream's 404, a Harness restart) is a fault: the Turn cannot continue.

The core never calls the Harness: it returns `ReadUpdates`, `AnswerPick`, and reports for the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.quantity import is_size

PROVIDER_LIMIT = "provider limit"
MEMORY_LIMIT = "memory limit"

State = Literal["admitting", "reading", "awaiting", "ended"]


# -- inputs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Admitted:
    submission_id: str
    offset: str


@dataclass(frozen=True)
class AdmitRefused:
    message: str


@dataclass(frozen=True)
class Events:
    events: Sequence[Mapping[str, Any]] = field(repr=False)
    next_offset: str


@dataclass(frozen=True)
class StreamLost:
    message: str


@dataclass(frozen=True)
class Answered:
    call_id: str
    over: bool


Input = Admitted | AdmitRefused | Events | StreamLost | Answered


# -- outputs -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReadUpdates:
    offset: str


@dataclass(frozen=True)
class AnswerPick:
    call_id: str
    over: bool
    answer: Any


Action = ReadUpdates | AnswerPick


@dataclass(frozen=True)
class Picked:
    call_id: str
    pick: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class GuardKill:
    kill_id: str
    peak: str | None
    limit: str | None


@dataclass(frozen=True)
class Said:
    text: str


@dataclass(frozen=True)
class TurnEnded:
    outcome: Literal["completed", "aborted"]
    picked: bool


@dataclass(frozen=True)
class TurnFault:
    reason: str


Report = Picked | GuardKill | Said | TurnEnded | TurnFault


@dataclass(frozen=True)
class Step:
    actions: tuple[Action, ...] = ()
    reports: tuple[Report, ...] = ()


class TurnCore:
    def __init__(self, allowed: Sequence[str]) -> None:
        self.allowed = tuple(allowed)
        self.state: State = "admitting"
        self.submission = ""
        self.offset = "0"
        self._awaiting: str | None = None
        self._picked = False
        self._guard: GuardKill | None = None

    @property
    def ended(self) -> bool:
        return self.state == "ended"

    def step(self, event: Input) -> Step:
        actions: list[Action] = []
        reports: list[Report] = []
        if self.state == "ended":
            return Step()
        if isinstance(event, Admitted) and self.state == "admitting":
            self.submission, self.offset, self.state = event.submission_id, event.offset, "reading"
            actions.append(ReadUpdates(self.offset))
        elif isinstance(event, AdmitRefused):
            self._end(reports, TurnFault(f"admission refused: {event.message}"))
        elif isinstance(event, StreamLost):
            self._end(reports, TurnFault(f"the conversation was lost ({event.message})"))
        elif isinstance(event, Events) and self.state in ("reading", "awaiting"):
            self.offset = event.next_offset
            for e in event.events:
                self._event(e, actions, reports)
                if self.ended:
                    break
            if not self.ended:
                actions.append(ReadUpdates(self.offset))  # a pick's answer arrives on the stream too
        elif isinstance(event, Answered) and event.call_id == self._awaiting:
            self._awaiting = None
            self.state = "reading"
        return Step(tuple(actions), tuple(reports))

    def _event(self, e: Mapping[str, Any], actions: list[Action], reports: list[Report]) -> None:
        kind = e.get("type")
        if kind == "message-appended":
            message = e.get("message")
            text = message.get("content") if isinstance(message, dict) else None
            if isinstance(text, str):
                reports.append(Said(text))
        elif kind == "pick":
            call_id, pick, args = e.get("callId"), e.get("pick"), e.get("args")
            if not isinstance(call_id, str) or not isinstance(pick, str):
                return
            if pick not in self.allowed:
                listed = ", ".join(self.allowed) or "nothing"
                actions.append(AnswerPick(call_id, False, f"{pick} is not allowed now. Allowed now: {listed}."))
                return
            self._picked = True
            self._awaiting = call_id
            self.state = "awaiting"
            reports.append(Picked(call_id, pick, args if isinstance(args, dict) else {}))
        elif kind == "memory-limit":
            kill_id = e.get("id")
            if isinstance(kill_id, str) and 0 < len(kill_id) <= 64:
                # Sizes are untrusted like the kill list's: one not in the guard's form is left out (ADR-0062).
                peak, limit = e.get("peak"), e.get("limit")
                self._guard = GuardKill(kill_id, peak if is_size(peak) else None, limit if is_size(limit) else None)
                reports.append(self._guard)
        elif kind == "submission-settled" and e.get("submissionId") == self.submission:
            outcome = e.get("outcome")
            if outcome in ("completed", "aborted"):
                self._end(reports, TurnEnded(outcome, self._picked))
            else:
                self._end(reports, TurnFault(self._failure(e.get("error"))))

    def _failure(self, error: object) -> str:
        err = error if isinstance(error, dict) else {}
        kind, message = _str(err.get("type")) or "", _str(err.get("message")) or ""
        if kind == "provider_limit":
            return f"{PROVIDER_LIMIT}: {message}".rstrip(": ")
        if kind == "memory_limit" or self._guard is not None:
            g = self._guard
            sizes = f"peak {g.peak} of {g.limit}" if g and g.peak and g.limit else "over its limit"
            return f"{MEMORY_LIMIT} (guard, {sizes}): {message}".rstrip(": ")
        return f"{kind}: {message}".strip(": ") or "the Submission failed"

    def _end(self, reports: list[Report], report: Report) -> None:
        self.state = "ended"
        reports.append(report)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and len(value) <= 4096 else None
