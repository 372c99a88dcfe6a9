"""The run's vocabulary: the inputs `RunCore` takes, the actions it asks its shell to perform, and its
records of the Workspaces it holds. Pure values; `core.py` holds the engine, `turn.py` the run's Turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.agent import core as seat
from jr2_actors.run.feedlines import FeedEvent
from jr2_actors.values.step import Step
from jr2_actors.workspace import messages as ws

RunStatusName = Literal["running", "done", "failed", "cancelled", "error", "lost"]
ReleaseWhy = ws.ReleaseWhy
# Why a Turn faulted: the seat's causes (`agent/messages.py`), or its actor died (the run's shell says so).
TurnCause = seat.FaultCause | Literal["actor"]

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
    cause: TurnCause = "settled"


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
