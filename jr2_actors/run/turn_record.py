"""The run's Turn as the run keeps it: its record (saved in the run's blob), its phases, and the run's own
inputs to it, and what crosses between the engine and its Turns — the vocabulary `turn.py`'s handlers and
table work on. Pure. Next stage: `turn.py`, the Turn's handlers and table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.agent.messages import (
    Accepted,
    AdmissionUnsure,
    GuardKill,
    HarnessJudged,
    KillsRead,
    NotKept,
    Picked,
    Said,
    Settled,
    TurnFault,
)
from jr2_actors.run.feed.lines import FeedLine
from jr2_actors.run.messages import ToAgent, WorkspaceRecord
from jr2_actors.run.notices import Entry, Mark

TurnPhase = Literal["waiting", "reading", "admitting", "running", "answered", "ended"]
Purpose = Literal["turn", "nudge", "resume"]  # what an admission is: the Turn's, a nudge, a re-admission
# What a pending read of the kill list is for: an admission, or the one after a `NotKept` (`renew`) of a
# kept admission or (`renew-resume`) of a re-admission.
ReadFor = Purpose | Literal["renew", "renew-resume"]


# -- the Turn's inputs from the run itself (the seat's are in messages.py) ----------------------------

@dataclass(frozen=True)
class Ready:
    """Its Workspace runs (or it needs none): the Turn starts."""


@dataclass(frozen=True)
class HarnessGone:
    """The Harness of the Workspace at `path` ended (a restart, a kernel kill): `reason` is the fault a
    kernel kill (`oom`) gives the Turn it cut; `moment` names that end (the ledger's kernel-kill source)."""

    path: str
    reason: str
    oom: bool = False
    moment: str = ""


@dataclass(frozen=True)
class StateLeft:
    """The run leaves the state that asked for the Turn, or ends."""


# The seat's reports (`agent/messages.py`) are the Turn's inputs as they are; the run adds its own three.
TurnInput = KillsRead | Accepted | NotKept | Picked | GuardKill | Said | Settled | TurnFault | HarnessJudged \
    | AdmissionUnsure | Ready | HarnessGone | StateLeft
UNSURE_LIMIT = 3  # admissions of one Turn whose fate was unknown, each resolved and sent again; then a fault


@dataclass
class TurnRecord:
    id: int
    agent: str
    conversation: str
    state: str  # the workflow state that asked for it
    phase: TurnPhase = "waiting"
    nudges: int = 0
    kept: bool = False  # the admission names a conversation the Harness was taken to keep
    picked: str = ""
    resumed: bool = False  # restored after an Orchestrator restart
    started_wall: float = 0.0
    mark: Mark | None = None  # ADR-0062: the newest kill its first read saw ("none"), or its start less 1 s
    read_for: ReadFor | None = None  # what the pending read of the kill list is for (None: no read pending)
    admitted_as: Purpose | None = None  # what the newest admission was (memory alone)
    # What the newest admission carried, and whether the Harness read its surface (the Submission spoke): in
    # the blob as `turn.carried` / `turn.heard`, so a restored Turn whose newest admission the Harness never
    # read carries those notices again (ADR-0062: delivered is not yet heard).
    carried: list[Entry] = field(default_factory=list)
    # Every entry the Turn's admissions carried, until the Turn ends (in the blob as `turn.took`): a Harness
    # that no longer holds the conversation heard none of it (ADR-0062).
    took: list[Entry] = field(default_factory=list)
    heard: bool = False
    lost_reason: str = ""  # a lost conversation, held back a moment in case a kernel kill explains it
    lost_until: float = 0.0
    restart: HarnessGone | None = None  # a restart the seat is judging against this Turn (memory alone)
    unsure: int = 0  # admissions whose fate was unknown, resolved and sent again (memory alone)


# -- what crosses between the engine and its Turns ------------------------------------------------------

@dataclass(frozen=True)
class RunAt:
    """What the engine tells its Turn with each call: the time, whether the run still runs, its Workspaces."""

    now: float
    wall: float
    running: bool
    workspaces: Mapping[str, WorkspaceRecord]


@dataclass(frozen=True)
class AnsweredPick:
    """A pick answered `over: true`, kept (memory alone) in case the answer never reaches its call."""

    agent: str
    conversation: str
    call_id: str
    pick: str
    answer: dict[str, Any]


@dataclass
class TurnOut:
    """What one call asked of the run: the lines to feed and the messages to tell, in order; whether a
    restore needs a save; and the run's move it ends with — an event and its reason, or the state a pick
    names — which the engine performs."""

    out: list[ToAgent | FeedLine] = field(default_factory=list)
    persist: bool = False
    event: tuple[str, str] | None = None
    enter: str | None = None
