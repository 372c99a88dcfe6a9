"""The Workspace's vocabulary: its states, the inputs `WorkspaceCore` takes, the actions it asks for and
the reports it tells (ADR-0064, ADR-0063). Pure values; `core.py` holds the machine over them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.values.step import Step
from jr2_actors.watch.deliveries import SandboxGone, SandboxSeen, WatchFailed
from jr2_actors.watch.identity import Foreign, SandboxKey

WorkspacePhase = Literal["new", "placing", "reconciling", "provisioning", "attaching", "running", "lost", "faulted",
                "released"]
WaitOn = Literal["node", "quota"]
ReleaseWhy = Literal["teardown", "run-stopped", "run-faulted"]
LIVE: tuple[WorkspacePhase, ...] = ("placing", "reconciling", "provisioning", "attaching", "running")
ENDED: tuple[WorkspacePhase, ...] = ("lost", "faulted", "released")


# -- inputs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RestoredWait:
    """A `placing` wait opened before an Orchestrator restart: only its wall-clock start survived."""

    on: WaitOn
    message: str
    since_wall: float


@dataclass(frozen=True)
class Restored:
    """What a Workspace knew when its run was last saved: the run's blob keeps it, `Begin` gives it back."""

    placed: bool = False
    uid: str = ""
    wait: RestoredWait | None = None
    releasing: bool = False  # its teardown was under way: it writes nothing but the delete that follows


@dataclass(frozen=True)
class Begin:
    restored: Restored | None = None


@dataclass(frozen=True)
class Applied:
    """The Sandbox is written (created, adopted as ours, or applied): its uid, and the version written."""

    uid: str
    resource_version: str = ""


@dataclass(frozen=True)
class LeaseRefused:
    """A renewal on `uid` was refused for good (404, 409, 422): all the lane tells (not a success, not a 5xx)."""

    uid: str
    status: int


@dataclass(frozen=True)
class WriteFailed:
    """A write of the Sandbox (`what="sandbox"`) or its token Secret (`"secret"`) failed. `status` is the
    API's answer (None: no answer)."""

    what: Literal["sandbox", "secret"]
    message: str
    status: int | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class NameTaken:
    """The first write found the name taken (409): `holder` is whose Workspace the Sandbox under it is, by its
    annotations (`Foreign`: they name none; None: nothing holds the name now). The core decides: only ours
    is adopted."""

    name: str
    holder: SandboxKey | Foreign | None


@dataclass(frozen=True)
class SecretWritten:
    pass


@dataclass(frozen=True)
class Attached:
    repos: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AttachFailed:
    message: str
    # No Harness served the call (503, 502, 504, or no answer): the pod may be going (an eviction the watch
    # has not told yet) or not yet serving again — the attach is tried again, and the watch decides.
    unavailable: bool = False


@dataclass(frozen=True)
class Deleted:
    """The delete is done; `existed`: there was something of ours to delete."""

    existed: bool


@dataclass(frozen=True)
class DeleteFailed:
    """`status` 409: the name holds another incarnation now (the uid precondition failed): not ours. None:
    no answer (or a version still moving); anything else is the API's answer, with its Retry-After."""

    message: str
    status: int | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class DeleteConflict:
    """A delete with `uid` was refused 409 with a version precondition: `current` is what the name holds now
    (None: nothing), `sent` the Lease stamps this Workspace's writes carried (empty: none of them landed).
    The core decides (ADR-0064's delete guard): still ours — its uid and one of our stamps — is deleted again
    from its version; anything else is not ours."""

    uid: str
    message: str
    current: Mapping[str, Any] | None = field(repr=False)
    sent: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class WatchStopped:
    """The WatchActor stopped: what the cluster does is unknown from now on."""


@dataclass(frozen=True)
class WorkspaceTick:
    pass


@dataclass(frozen=True)
class Release:
    why: ReleaseWhy = "teardown"


# The watch's deliveries are inputs as they are (SandboxSeen, SandboxGone, WatchFailed).
WorldInput = SandboxSeen | SandboxGone | WatchFailed | WatchStopped | WorkspaceTick
ShellInput = (Begin | Applied | LeaseRefused | WriteFailed | NameTaken | SecretWritten | Attached | AttachFailed
              | Deleted | DeleteFailed | DeleteConflict | Release)
Input = WorldInput | ShellInput


# -- actions -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ApplySandbox:
    """`create`: the first write creates, and a name already taken is checked before it is adopted."""

    create: bool


@dataclass(frozen=True)
class ApplySecret:
    uid: str


@dataclass(frozen=True)
class HoldLease:
    """The renewal lane takes the Lease on `uid`: first at `first_due` (monotonic), then every `interval` ±20 %."""

    uid: str
    first_due: float
    interval: float


@dataclass(frozen=True)
class DropLease:
    """The Lease's schedule is taken back from the lane: no renewal starts after it (before any delete)."""


@dataclass(frozen=True)
class Attach:
    endpoint: str


@dataclass(frozen=True)
class DeleteSandbox:
    """`uid` empty: the write's answer never came; delete only what the name holds for this key. The uid and
    the newest version this Workspace wrote or saw are the delete's preconditions: a successor that adopted
    the name since has written a newer version, and the delete then touches nothing (409)."""

    uid: str
    resource_version: str = ""


Action = ApplySandbox | ApplySecret | HoldLease | DropLease | Attach | DeleteSandbox


# -- reports -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WaitEntry:
    """RunStatus `waiting` (ADR-0064): what the Workspace waits on, in the scheduler's or quota's words."""

    on: WaitOn
    message: str
    since: float  # wall clock


@dataclass(frozen=True)
class Waiting:
    """This Workspace's `waiting` entry changed (None: it no longer waits)."""

    path: str
    entry: WaitEntry | None


@dataclass(frozen=True)
class PlacingLine:
    """Feed: a wait for capacity starts."""

    path: str
    on: WaitOn
    message: str
    since: float


@dataclass(frozen=True)
class PlacedLine:
    """Feed: the wait ended with a node."""

    path: str
    since: float
    after_ms: int


@dataclass(frozen=True)
class WaitEndedLine:
    """Feed: the wait ended without a node (the Workspace was released, lost or faulted)."""

    path: str
    since: float
    after_ms: int
    why: Literal["released", "lost", "faulted"]


FeedLine = PlacingLine | PlacedLine | WaitEndedLine


@dataclass(frozen=True)
class Saved:
    """What the run keeps in its blob so a restore can resume this Workspace (`Restored`)."""

    path: str
    restored: Restored


@dataclass(frozen=True)
class Running:
    path: str
    repos: dict[str, str]
    endpoint: str


@dataclass(frozen=True)
class Lost:
    """`workspace.lost`, with the reason the run's fault will carry."""

    path: str
    reason: str


@dataclass(frozen=True)
class Faulted:
    """`actor`: the WorkspaceActor itself died (our bug; its parent says so): nothing holds the Sandbox any
    more, so a teardown under way is over."""

    path: str
    reason: str
    actor: bool = False


@dataclass(frozen=True)
class LastEndSeen:
    """The Harness container's last end as the operator published it (ADR-0062 reads a kernel kill here)."""

    path: str
    reason: str
    exit_code: int | None
    finished_at: str
    restart_count: int
    memory_fault: str | None  # `memory limit (OOMKilled, limit …): …` for a kernel kill

    @property
    def moment(self) -> str:
        """Which end this is: its `finishedAt`, or (the contract makes that optional) the restart it caused —
        so a second kernel kill without a time is still a second end (ADR-0062: each one is told)."""
        return self.finished_at or f"restart-{self.restart_count}"


@dataclass(frozen=True)
class HarnessEnded:
    """The Harness container ended and restarted after attach: the run's Turn there is judged against it."""

    path: str
    reason: str
    exit_code: int | None
    message: str
    memory_fault: str | None
    moment: str = ""  # which end (as `LastEndSeen.moment`): a kernel kill's notice source


@dataclass(frozen=True)
class Phase:
    """The Workspace's phase changed (RunStatus shows it; metrics count Workspaces by it)."""

    path: str
    phase: WorkspacePhase


@dataclass(frozen=True)
class Unknown:
    """The watch cannot tell (it failed or stopped): never loss."""

    path: str
    message: str


@dataclass(frozen=True)
class Released:
    """The teardown is over: the actor may stop."""

    path: str
    deleted: bool


Report = Waiting | FeedLine | Saved | Running | Lost | Faulted | LastEndSeen | HarnessEnded | Unknown | Released | Phase
WorkspaceStep = Step[Action, Report]
