"""The run's vocabulary: the inputs `RunCore` takes, the actions it asks its shell to perform, what the
orchestrator asks of a RunActor and is told by it, and the run's records of the Workspaces it holds. Pure
values; `core.py` holds the engine, `turn.py` the run's Turn.
Next stage: `core.py`, which takes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from jr2_actors.agent import messages as seat
from jr2_actors.run.feed.lines import FeedEvent
from jr2_actors.values.step import Step
from jr2_actors.workspace import messages as ws

RunStatusName = Literal["running", "done", "failed", "cancelled", "error", "lost"]

# -- inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    pass


@dataclass(frozen=True)
class Cancel:
    reason: str = "cancelled"


@dataclass(frozen=True)
class RunTick:
    pass


@dataclass(frozen=True)
class FromWorkspace:
    """A report of one of the run's WorkspaceActors, as it sent it."""

    report: ws.Report


@dataclass(frozen=True)
class FromSeat:
    """A report of one of the run's Agent seats (`agent/messages.py`'s `ToRun`), as it sent it; the run's shell
    says a `TurnFault` with cause `actor` itself when the seat's actor died."""

    report: seat.ToRun


Input = Start | Cancel | RunTick | FromWorkspace | FromSeat


# -- actions -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Save:
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
    why: ws.ReleaseWhy


@dataclass(frozen=True)
class ToAgent:
    """Tell an Agent seat one of its messages (`agent/messages.py`): start a Turn (which reads the kill list and
    answers `KillsRead`), read again, admit, answer a pick, abort."""

    agent: str
    message: seat.ToSeat


@dataclass(frozen=True)
class Finished:
    """Every teardown is over: the run has ended with this status."""

    status: RunStatusName
    fault: str | None


Action = Save | PlaceWorkspace | ReleaseWorkspace | ToAgent | Finished


# -- with the orchestrator: its ask, the RunActor's last word ---------------------------------------

@dataclass(frozen=True)
class Status:
    """Ask: the run's RunStatus, as the API shows it."""


@dataclass(frozen=True)
class RunFinished:
    """Told to the orchestrator once the run has ended and every teardown is over."""

    run_id: str
    status: str
    fault: str | None


# -- reports: the feed -------------------------------------------------------------------------------

RunStep = Step[Action, FeedEvent]


# -- the run's own records ---------------------------------------------------------------------------

@dataclass
class WorkspaceRecord:
    path: str
    phase: str = "placing"  # the WorkspaceCore's phase as last reported, or "releasing"
    restored: ws.Restored = field(default_factory=ws.Restored)
    waiting: ws.WaitEntry | None = None
    repos: dict[str, str] = field(default_factory=dict)
    endpoint: str = ""
    releasing: bool = False
    held_again: bool = False  # held by the state entered while its teardown runs: place it afterwards
