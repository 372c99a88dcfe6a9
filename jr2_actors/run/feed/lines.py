"""The feed's lines, typed (CONTRACTS.md §4): what the run tells whoever follows it. Pure.

Each kind of line is a frozen dataclass; `FeedEvent` numbers and times one. They leave the run's core as
these types; the wire shape (`kind` and its fields, a Workspace's path as `child`, times in RFC 3339) is
made at the edge, in `feed/wire.py`. The Workspace's own lines (`PlacingLine`, `PlacedLine`,
`WaitEndedLine`) come from its core and pass through unchanged. Next stage: the hub (`feed/hub.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jr2_actors.harness.admission import Notice
from jr2_actors.workspace.messages import PlacedLine, PlacingLine, WaitEndedLine


@dataclass(frozen=True)
class StartedLine:
    workflow: str
    state: str


@dataclass(frozen=True)
class StateLine:
    state: str
    previous: str


@dataclass(frozen=True)
class RunningLine:
    """The Workspace's Sandbox is Ready and its Repos attached."""

    path: str


@dataclass(frozen=True)
class TurnLine:
    agent: str
    turn: int
    state: str


@dataclass(frozen=True)
class AdmittedLine:
    agent: str
    turn: int
    kept: bool
    nudge: bool
    notices: tuple[Notice, ...] = ()


@dataclass(frozen=True)
class SaidLine:
    agent: str
    turn: int
    text: str


@dataclass(frozen=True)
class PickLine:
    agent: str
    turn: int
    pick: str
    to: str


@dataclass(frozen=True)
class MemoryKillLine:
    """A guard kill on the Turn's stream: a notice for the next admission, never a fault (ADR-0062)."""

    agent: str
    turn: int
    peak: str | None
    limit: str | None


@dataclass(frozen=True)
class TurnFaultLine:
    agent: str
    turn: int
    reason: str


@dataclass(frozen=True)
class EventLine:
    """`workspace.lost` or `agent.fault`, and where it led (`to` None: not handled)."""

    event: str
    reason: str
    to: str | None = None


@dataclass(frozen=True)
class AfterLine:
    state: str
    seconds: float
    to: str


@dataclass(frozen=True)
class WorkspaceFaultLine:
    path: str
    reason: str


@dataclass(frozen=True)
class UnknownLine:
    """The watch cannot tell for now: never loss."""

    path: str
    message: str


@dataclass(frozen=True)
class EndedLine:
    status: str
    fault: str | None = None


FeedLine = (StartedLine | StateLine | PlacingLine | PlacedLine | WaitEndedLine | RunningLine | TurnLine
            | AdmittedLine | SaidLine | PickLine | MemoryKillLine | TurnFaultLine | EventLine | AfterLine
            | WorkspaceFaultLine | UnknownLine | EndedLine)

# The kind each line is called on the wire (and in the blob); one table, read both ways.
KINDS: dict[type, str] = {
    StartedLine: "started", StateLine: "state", PlacingLine: "placing", PlacedLine: "placed",
    WaitEndedLine: "wait-ended", RunningLine: "running", TurnLine: "turn", AdmittedLine: "admitted",
    SaidLine: "said", PickLine: "pick", MemoryKillLine: "memory-kill", TurnFaultLine: "turn-fault",
    EventLine: "event", AfterLine: "after", WorkspaceFaultLine: "workspace-fault", UnknownLine: "unknown",
    EndedLine: "ended",
}
_BY_KIND = {kind: cls for cls, kind in KINDS.items()}


@dataclass(frozen=True)
class FeedEvent:
    """One feed line, numbered for a reader to resume from (`Last-Event-ID`) and timed (wall clock)."""

    id: int
    at: float
    line: FeedLine

    @property
    def kind(self) -> str:
        return KINDS[type(self.line)]


def line_fields(line: FeedLine) -> dict[str, Any]:
    """A line's fields as plain data (notices as their wire documents), for the blob and the wire."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(line):
        value = getattr(line, f.name)
        out[f.name] = [n.wire() for n in value] if f.name == "notices" else value
    return out


def line_from(kind: str, fields: Mapping[str, Any]) -> FeedLine:
    """The line a blob kept (`line_fields`'s shape); a kind no longer known is our bug (KeyError)."""
    cls = _BY_KIND[kind]
    values = dict(fields)
    if "notices" in values:
        values["notices"] = tuple(Notice(str(n["kind"]), {k: v for k, v in n.items() if k != "kind"})
                                  for n in values["notices"])
    line: FeedLine = cls(**values)
    return line
