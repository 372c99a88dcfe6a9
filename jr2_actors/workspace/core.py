"""WorkspaceCore: one Workspace's Sandbox from its write to its teardown. Pure (ADR-0064, ADR-0063).

Theory of operation. The machine is the table `TRANSITIONS` at the bottom: (state, input) → the states
that edge may lead to. A handler moves only along its edge (`_go` checks); an input the shell sends that
has no edge in the current state is our bug and raises `OffTable`; a world input (what the watch says,
a timer) with no edge is ignored.

    new ──Begin──▶ placing ──scheduled──▶ provisioning ──Ready──▶ attaching ──attached──▶ running
     │                └── (restored after it had placed) ──▶ reconciling ──first list──▶ …
     └─ any live state ── Lost / gone ──▶ lost;  crash loop, bad image, 120 s, attach refused ──▶ faulted
        any state ── Release ──▶ released (then the delete, if any, and `Released`)

- `placing` writes the CR and waits for a node with **no deadline** (ADR-0064): an Unschedulable pod
  waits `on: node`, a quota refusal `on: quota`, with the scheduler's or the quota's own words; a pod
  back to `SchedulingPending` still waits on a node. A wait that starts gives one `placing` feed line; its
  end one `placed` line with the duration (monotonic when this process opened the wait, else two
  wall-clock reads clamped at 0), or — when it ends without a node (release, loss, fault) — one
  `wait-ended` line; a changed reason only updates `waiting`.
- The first write creates (`ApplySandbox(create=True)`): a name held by another run's Workspace is a
  named fault, never adopted, renewed or deleted. Transient API answers (5xx, 429, 409, no answer, and a
  403 for its first 30 s: an API-server restart's, CONTRACTS.md §2) are retried on a capped backoff and
  never fault; only a refusal of our own request (400, 422, a 403 that lasts) does.
  The token Secret is written after the Sandbox, owned by its uid, and retried the same way.
- A Workspace restored after it had placed (`Restored(placed=True)`) writes nothing but its Lease before
  the watch's first list answers (`reconciling`): its Sandbox present with the uid it applied continues where it is;
  absent, or another uid under its name, is `workspace.lost` — never a fresh Sandbox reported running.
- `provisioning` waits for `Ready` under a 120 s budget from scheduling (image pull, Harness start,
  Repos); an image that cannot be pulled *yet* waits inside it. A crash loop, a name that is no image, a
  never-pull policy or a container that cannot be created faults at once with the Harness's own last
  words — but a missing token Secret of this very Workspace waits (the Secret is written after the
  Sandbox, behind the write cap).
- `attaching` is the Harness call (`POST /attach`, ADR-0063), then `running`.
- A Sandbox `Lost` or gone is `workspace.lost` with the operator's reason. A dropped watch is unknown,
  never loss. A Harness restart is reported (it ends the Turns waiting on it); an `OOMKilled` end names the
  memory limit. Every change of the Harness's last end is reported too (the notice ledger reads it).
- The Lease covers the Sandbox from its write to its teardown, in every state: the first renewal within
  the first fifth of the interval, then every 5 min ±20 %, never in lockstep.
- Events of another uid under this key (an older incarnation being deleted, a successor) are not ours
  and are ignored once the core knows its uid.
- Release: delete what never ran (a Sandbox released before it placed is deleted at once: nothing on it
  can be inspected, and it could take a node later); keep what ran when the run stopped or faulted, and
  what faulted after it placed (inspectable; the idle GC ages it out); a normal teardown deletes. A delete
  carries the uid this Workspace applied and the newest version it knows, so it can never remove a
  successor's Sandbox (the shell re-reads one whose version moved, `manifest.written_by`). A delete that
  meets a transient answer is retried on a capped backoff until it lands or the watch says the Sandbox is
  gone (the run's row stays live meanwhile, so a restart owes it too). A restored teardown
  (`Restored.releasing`) writes nothing but its delete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.values.backoff import Jitter, NoJitter
from jr2_actors.values.constants import (
    DELETE_RETRY_BACKOFF,
    FORBIDDEN_GRACE_SECONDS,
    LEASE_INTERVAL_SECONDS,
    LEASE_JITTER,
    PROVISION_BUDGET_SECONDS,
    WRITE_RETRY_BACKOFF,
)
from jr2_actors.values.step import OffTable, Step
from jr2_actors.watch.deliveries import SandboxGone, SandboxSeen, WatchFailed
from jr2_actors.watch.sandbox import SandboxView

State = Literal["new", "placing", "reconciling", "provisioning", "attaching", "running", "lost", "faulted",
                "released"]
WaitOn = Literal["node", "quota"]
ReleaseWhy = Literal["teardown", "run-stopped", "run-faulted"]
LIVE: tuple[State, ...] = ("placing", "reconciling", "provisioning", "attaching", "running")
ENDED: tuple[State, ...] = ("lost", "faulted", "released")

# Waiting reasons that end a provision at once: nothing jr2 waits for will change them.
FAST_FAULTS = frozenset({"CrashLoopBackOff", "CreateContainerConfigError", "InvalidImageName", "ErrImageNeverPull",
                         "CreateContainerError"})
# An API answer that refuses our request itself: retrying sends the same refused request. A 403 is not one
# at first (CONTRACTS.md §2: an API-server restart answers 403 for a few ms): `FORBIDDEN_GRACE_SECONDS`.
REFUSALS = frozenset({400, 404, 405, 413, 415, 422})
FORBIDDEN = 403


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
class LeaseRenewed:
    """A renewal's answer: the version it wrote (the delete's precondition must be at least as new)."""

    resource_version: str


@dataclass(frozen=True)
class WriteFailed:
    """A write of the Sandbox (`what="sandbox"`) or its token Secret (`"secret"`) failed. `status` is the
    API's answer (None: no answer); `collision` names another run's Workspace holding our name."""

    what: Literal["sandbox", "secret"]
    message: str
    status: int | None = None
    retry_after: float | None = None
    collision: bool = False


@dataclass(frozen=True)
class SecretWritten:
    pass


@dataclass(frozen=True)
class Attached:
    repos: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AttachFailed:
    message: str


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
class WatchClosed:
    """The WatchActor stopped: what the cluster does is unknown from now on."""


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Release:
    why: ReleaseWhy = "teardown"


# The watch's deliveries are inputs as they are (SandboxSeen, SandboxGone, WatchFailed).
WorldInput = SandboxSeen | SandboxGone | WatchFailed | WatchClosed | Tick
ShellInput = (Begin | Applied | LeaseRenewed | WriteFailed | SecretWritten | Attached | AttachFailed | Deleted
              | DeleteFailed | Release)
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
class RenewLease:
    uid: str  # the renewal carries it: the API server renews only that Sandbox


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


Action = ApplySandbox | ApplySecret | RenewLease | Attach | DeleteSandbox


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
    """The Harness container ended and restarted after attach: the Turns waiting on it end."""

    path: str
    reason: str
    exit_code: int | None
    message: str
    memory_fault: str | None


@dataclass(frozen=True)
class Phase:
    """The Workspace's state changed (RunStatus shows it; metrics count Workspaces by it)."""

    path: str
    state: State


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


Report = (Waiting | FeedLine | Saved | Running | Lost | Faulted | LastEndSeen | HarnessEnded | Unknown | Released
          | Phase)
WorkspaceStep = Step[Action, Report]


# -- the core ----------------------------------------------------------------------------------------

class WorkspaceCore:
    def __init__(self, path: str, *, memory_limit: str | None = None, rng: Jitter | None = None,
                 lease_interval: float = LEASE_INTERVAL_SECONDS, budget: float = PROVISION_BUDGET_SECONDS,
                 secret_name: str = "") -> None:
        self.path = path
        self.state: State = "new"
        self.uid = ""
        self.rv = ""  # the newest resourceVersion of its Sandbox this Workspace wrote or saw
        self._memory_limit = memory_limit
        self._random: Jitter = rng or NoJitter()
        self._lease_interval = lease_interval
        self._budget = budget
        self._secret_name = secret_name
        self._lease_due: float | None = None
        self._budget_ends: float | None = None
        self._retry_at: float | None = None
        self._retry: Action | None = None
        self._write_failures = 0
        self._delete_failures = 0
        self._forbidden_since: float | None = None  # when the 403s in a row began
        self._released = False  # `Released` was reported: the teardown is over
        self._wait: WaitEntry | None = None
        self._wait_since_mono: float | None = None
        self._placed = False
        self._endpoint = ""
        self._pending_seen: SandboxSeen | None = None
        self._restart_count: int | None = None
        self._last_end: tuple[str, int | None, str] | None = None
        self._out: list[Action | Report] = []
        self._edge: tuple[State, type] | None = None
        self._now = 0.0
        self._wall = 0.0

    # -- the one entry point -------------------------------------------------------------------------

    def step(self, event: Input, now: float, wall: float) -> WorkspaceStep:
        self._out = []
        self._now, self._wall = now, wall
        edge = (self.state, type(event))
        entry = TRANSITIONS.get(edge)
        if entry is None:
            if isinstance(event, ShellInput):
                raise OffTable(f"Workspace {self.path}: {type(event).__name__} in {self.state}")
        else:
            self._edge = edge
            entry.handler(self, event, now, wall)
            self._edge = None
        out, self._out = self._out, []
        actions = tuple(x for x in out if isinstance(x, ACTION_TYPES))
        reports = tuple(x for x in out if not isinstance(x, ACTION_TYPES))
        return Step(actions, reports, self.deadline)

    @property
    def deadline(self) -> float | None:
        due = [self._lease_due if self._leased() else None,
               self._budget_ends if self.state == "provisioning" else None,
               self._retry_at]
        return min((t for t in due if t is not None), default=None)

    # -- handlers (see TRANSITIONS) --------------------------------------------------------------------

    def _begin(self, event: Begin, now: float, wall: float) -> None:
        restored = event.restored or Restored()
        self.uid = restored.uid
        self._placed = restored.placed
        self._lease_due = now + self._random.uniform(0, self._lease_interval / 5)
        if restored.placed:
            self._go("reconciling")  # ADR-0063: the first list answers; nothing but the Lease is written before it
            return
        if restored.wait is not None:
            w = restored.wait
            self._wait = WaitEntry(w.on, w.message, w.since_wall)
        self._go("placing")
        if not restored.releasing:  # a Sandbox deleted before the restart is never written again
            self._out.append(ApplySandbox(create=not self.uid))  # idempotent: a restart re-enters placing

    def _applied(self, event: Applied, now: float, wall: float) -> None:
        if event.uid != self.uid:
            self.rv = ""
        self.uid = event.uid
        self._newer(event.resource_version)
        self._write_failures = 0
        self._forbidden_since = None
        self._saved()
        self._out.append(ApplySecret(event.uid))
        if self._pending_seen is not None:  # what the watch said before the write's answer came back
            seen, self._pending_seen = self._pending_seen, None
            if seen.sandbox.uid == self.uid:
                self._seen(seen, now, wall)

    def _applied_late(self, event: Applied, now: float, wall: float) -> None:
        self.uid = event.uid  # ended meanwhile: a delete already queued finds it by name
        self._newer(event.resource_version)

    def _renewed(self, event: LeaseRenewed, now: float, wall: float) -> None:
        self._newer(event.resource_version)

    def _write_failed(self, event: WriteFailed, now: float, wall: float) -> None:
        if event.collision:
            self._fault(f"the Sandbox name is taken by another run's Workspace, never ours to use: {event.message}")
            return
        if self._refused(event.status, now):
            self._fault(f"writing the {'token Secret' if event.what == 'secret' else 'Sandbox'} was refused: "
                        f"{event.message}")
            return
        # Transient (5xx, 429, 409, a 403 within its grace, no answer): retry on the capped backoff; never a
        # fault (ADR-0064).
        self._write_failures += 1
        delay = WRITE_RETRY_BACKOFF.delay(self._write_failures, self._random)
        if event.retry_after is not None:
            delay = max(delay, event.retry_after)
        self._retry_at = now + delay
        self._retry = ApplySandbox(create=not self.uid) if event.what == "sandbox" else ApplySecret(self.uid)

    def _secret_written(self, event: SecretWritten, now: float, wall: float) -> None:
        self._write_failures = 0
        self._forbidden_since = None

    def _seen_handler(self, event: SandboxSeen, now: float, wall: float) -> None:
        if not self.uid:
            self._pending_seen = event  # our write's answer is not back: hold the newest observation
            return
        if event.sandbox.uid != self.uid:
            if self.state == "reconciling":
                self._lose("another Sandbox holds its name now (it was deleted and created again)")
            return  # another incarnation under this key: not ours
        self._seen(event, now, wall)

    def _gone(self, event: SandboxGone, now: float, wall: float) -> None:
        if self.state == "reconciling" or (self.uid and event.uid in (self.uid, "")):
            self._lose(f"the Sandbox was deleted ({event.reason})")

    def _unknown(self, event: WatchFailed | WatchClosed, now: float, wall: float) -> None:
        message = event.message if isinstance(event, WatchFailed) else "the Sandbox watch stopped"
        self._out.append(Unknown(self.path, message))  # a dropped watch is never loss (ADR-0063)

    def _attached(self, event: Attached, now: float, wall: float) -> None:
        self._go("running")
        self._out.append(Running(self.path, dict(event.repos), self._endpoint))

    def _attach_failed(self, event: AttachFailed, now: float, wall: float) -> None:
        self._fault(f"attach: {event.message}")

    def _release(self, event: Release, now: float, wall: float) -> None:
        state = self.state
        self._end_wait("released")
        self._go("released")
        self._retry_at = self._retry = None
        ran = self._placed and state != "placing"
        # ADR-0064: what never ran is deleted at once; what ran is kept when the run stopped or faulted, or
        # when it faulted itself after it placed (inspectable, the idle GC ages it out).
        if ran and (event.why != "teardown" or state == "faulted"):
            self._teardown_over(deleted=False)
        else:
            self._forbidden_since = None
            self._out.append(DeleteSandbox(self.uid, self.rv))

    def _deleted(self, event: Deleted, now: float, wall: float) -> None:
        if not self._released:
            self._teardown_over(deleted=event.existed)

    def _delete_failed(self, event: DeleteFailed, now: float, wall: float) -> None:
        if self._released:
            return  # the watch said the Sandbox is gone while this delete was out
        if event.status == 409 or self._refused(event.status, now):
            # Not ours any more (a successor's, or another incarnation), or refused: the idle GC reaps what
            # is left (ADR-0064).
            self._teardown_over(deleted=False)
            return
        # ADR-0064 owes this delete: it is retried, capped, until it lands or the Sandbox is gone — an
        # outage of the API server must not hold a node for the idle GC's 30 minutes.
        self._delete_failures += 1
        delay = DELETE_RETRY_BACKOFF.delay(self._delete_failures, self._random)
        if event.retry_after is not None:
            delay = max(delay, event.retry_after)
        self._retry_at = now + delay
        self._retry = DeleteSandbox(self.uid, self.rv)

    def _gone_released(self, event: SandboxGone, now: float, wall: float) -> None:
        """The watch says the Sandbox is gone while its delete is owed: nothing is left to delete. Another
        incarnation's end (another uid) is not this one's; an absence with no uid is no Sandbox at all."""
        if not self._released and event.uid in (self.uid, ""):
            self._teardown_over(deleted=True)

    # -- what the watch says, in each state ------------------------------------------------------------

    def _seen(self, event: SandboxSeen, now: float, wall: float) -> None:
        sandbox = event.sandbox
        self._newer(sandbox.resource_version)
        self._endpoint = sandbox.endpoint or self._endpoint
        self._note_last_end(sandbox)
        if sandbox.terminal:
            self._lose(_lost_reason(sandbox))
            return
        if self.state == "reconciling":
            self._reconcile(sandbox, now, wall)
        elif self.state == "placing":
            self._placing(sandbox, now, wall)
        elif self.state == "provisioning":
            self._provisioning(sandbox, now, wall)
        elif self.state in ("attaching", "running"):
            self._harness_restarts(sandbox)

    def _reconcile(self, sandbox: SandboxView, now: float, wall: float) -> None:
        self._restart_count = sandbox.restart_count
        if _ready(sandbox):
            self._go("attaching")  # re-attach: the Harness call is idempotent (ADR-0063, ADR-0065)
            self._out.append(Attach(self._endpoint))
        else:
            self._go("provisioning")
            self._budget_ends = now + self._budget
            self._provisioning(sandbox, now, wall)

    def _placing(self, sandbox: SandboxView, now: float, wall: float) -> None:
        scheduled = sandbox.condition("Scheduled")
        if (scheduled is not None and scheduled.status == "True") or _ready(sandbox):
            self._placed_now(now, wall)
            self._go("provisioning")
            self._budget_ends = now + self._budget
            self._provisioning(sandbox, now, wall)
            return
        if scheduled is None:
            return  # nothing said yet: not a wait with a reason
        if scheduled.reason == "QuotaExceeded":
            on: WaitOn = "quota"
        elif scheduled.reason in ("Unschedulable", "SchedulingPending") or scheduled.status == "Unknown":
            on = "node"
        else:
            return
        message = scheduled.message or "waiting for the scheduler"
        if self._wait is None:
            if scheduled.reason == "SchedulingPending":
                return  # not yet a wait: the scheduler has not answered
            self._wait = WaitEntry(on, message, wall)
            self._wait_since_mono = now
            self._out.append(PlacingLine(self.path, on, message, wall))
            self._out.append(Waiting(self.path, self._wait))
            self._saved()
        elif (on, message) != (self._wait.on, self._wait.message):
            self._wait = WaitEntry(on, message, self._wait.since)  # a changed reason adds no feed line
            self._out.append(Waiting(self.path, self._wait))
            self._saved()

    def _provisioning(self, sandbox: SandboxView, now: float, wall: float) -> None:
        stuck = next((w for w in sandbox.waiting if w.reason in FAST_FAULTS and not self._own_secret(w.message)),
                     None)
        if stuck is not None:
            last_words = sandbox.last_terminated.message if sandbox.last_terminated else ""
            self._fault(f"{stuck.reason}: {last_words or stuck.message}")
            return
        if _ready(sandbox):
            self._restart_count = sandbox.restart_count
            self._go("attaching")
            self._out.append(Attach(self._endpoint))

    def _harness_restarts(self, sandbox: SandboxView) -> None:
        if self._restart_count is not None and sandbox.restart_count > self._restart_count:
            ended = sandbox.last_terminated
            reason = ended.reason if ended else "Unknown"
            message = ended.message if ended else ""
            self._out.append(HarnessEnded(self.path, reason, ended.exit_code if ended else None, message,
                                          self._memory_fault(reason, message)))
        self._restart_count = sandbox.restart_count

    # -- time ------------------------------------------------------------------------------------------

    def _tick(self, event: Tick, now: float, wall: float) -> None:
        if self._retry_at is not None and now >= self._retry_at:
            action, self._retry, self._retry_at = self._retry, None, None
            if action is not None:
                self._out.append(action)
        if self.state == "provisioning" and self._budget_ends is not None and now >= self._budget_ends:
            self._fault(f"provisioning: the Sandbox was not Ready {self._budget:.0f}s after it was scheduled")
            return
        if self._leased() and self._lease_due is not None and now >= self._lease_due:
            self._out.append(RenewLease(self.uid))
            jitter = self._random.uniform(1 - LEASE_JITTER, 1 + LEASE_JITTER)
            self._lease_due = now + self._lease_interval * jitter

    # -- helpers ---------------------------------------------------------------------------------------

    def _refused(self, status: int | None, now: float) -> bool:
        """A refusal of the request itself. A 403 is one only once the 403s in a row have lasted
        `FORBIDDEN_GRACE_SECONDS` (CONTRACTS.md §2: an API-server restart answers 403 for a few ms)."""
        if status != FORBIDDEN:
            self._forbidden_since = None
            return status in REFUSALS
        if self._forbidden_since is None:
            self._forbidden_since = now
        return now - self._forbidden_since >= FORBIDDEN_GRACE_SECONDS

    def _teardown_over(self, *, deleted: bool) -> None:
        self._released = True
        self._retry_at = self._retry = None
        self._out.append(Released(self.path, deleted=deleted))

    def _leased(self) -> bool:
        """ADR-0064: the Lease is renewed from the write to the teardown, in every live state — a restored
        Workspace waiting for the first list too: each renewal carries the uid it wrote, so it renews only
        that Sandbox."""
        return self.state in LIVE and bool(self.uid)

    def _go(self, state: State) -> None:
        if self._edge is not None:
            allowed = TRANSITIONS[self._edge].to
            if state not in allowed:
                raise OffTable(f"Workspace {self.path}: {self._edge[1].__name__} in {self._edge[0]} cannot lead "
                               f"to {state} (the table allows {', '.join(sorted(allowed))})")
        if state != self.state:
            self.state = state
            self._out.append(Phase(self.path, state))

    def _placed_now(self, now: float, wall: float) -> None:
        self._placed = True
        if self._wait is not None:
            self._out.append(PlacedLine(self.path, self._wait.since, self._wait_after()))
            self._close_wait()
        self._saved()

    def _end_wait(self, why: Literal["released", "lost", "faulted"]) -> None:
        """A wait that ends without a node still gets its end line (ADR-0064: two lines per wait)."""
        if self._wait is not None:
            self._out.append(WaitEndedLine(self.path, self._wait.since, self._wait_after(), why))
            self._close_wait()

    def _wait_after(self) -> int:
        """ADR-0064: a wait this process opened is timed on the monotonic clock (never negative); one
        opened before a restart has only its stored wall-clock start: two wall reads, clamped at 0."""
        assert self._wait is not None
        if self._wait_since_mono is not None:
            after = self._now - self._wait_since_mono
        else:
            after = max(self._wall - self._wait.since, 0.0)
        return int(after * 1000)

    def _close_wait(self) -> None:
        self._wait = None
        self._wait_since_mono = None
        self._out.append(Waiting(self.path, None))

    def _saved(self) -> None:
        wait = RestoredWait(self._wait.on, self._wait.message, self._wait.since) if self._wait else None
        self._out.append(Saved(self.path, Restored(self._placed, self.uid, wait)))

    def _lose(self, reason: str) -> None:
        self._end_wait("lost")
        self._go("lost")
        self._retry_at = self._retry = None
        self._out.append(Lost(self.path, reason))

    def _fault(self, reason: str) -> None:
        self._end_wait("faulted")
        self._go("faulted")
        self._retry_at = self._retry = None
        self._out.append(Faulted(self.path, reason))

    def _note_last_end(self, sandbox: SandboxView) -> None:
        end = sandbox.last_terminated
        if end is None:
            return
        seen = LastEndSeen(self.path, end.reason, end.exit_code, end.finished_at, sandbox.restart_count,
                           self._memory_fault(end.reason, end.message))
        key = (end.reason, end.exit_code, seen.moment)
        if key != self._last_end:
            self._last_end = key
            self._out.append(seen)

    def _newer(self, rv: str) -> None:
        """resourceVersions are opaque, but etcd's are integers: keep the newest one known."""
        if not rv:
            return
        try:
            if self.rv and int(rv) <= int(self.rv):
                return
        except ValueError:
            pass
        self.rv = rv

    def _memory_fault(self, reason: str, message: str) -> str | None:
        if reason != "OOMKilled":
            return None
        return f"memory limit (OOMKilled, limit {self._memory_limit or 'unknown'}): {message}".rstrip(": ")

    def _own_secret(self, message: str) -> bool:
        """`secret "<name>-token" not found`: our Secret is written after the Sandbox; it is coming."""
        return bool(self._secret_name) and f'"{self._secret_name}"' in message and "not found" in message


def _ready(sandbox: SandboxView) -> bool:
    ready = sandbox.condition("Ready")
    return sandbox.phase == "Ready" or (ready is not None and ready.status == "True")


def _lost_reason(sandbox: SandboxView) -> str:
    lost = sandbox.condition("Lost") or sandbox.condition("Ready")
    return f"{lost.reason}: {lost.message}" if lost is not None and lost.reason else "the Sandbox was lost"


# -- the machine -------------------------------------------------------------------------------------

Handler = Callable[[WorkspaceCore, Any, float, float], None]


@dataclass(frozen=True)
class Edge:
    to: frozenset[str]
    handler: Handler


def _ignore(core: WorkspaceCore, event: Any, now: float, wall: float) -> None:
    """A late answer to a call made before the Workspace ended: nothing is left to do with it."""


W = WorkspaceCore
# One table holds the machine: (from states, input, where the edge may lead, who takes it). Every edge
# not listed is off the table. docs/architecture.md prints it (`transitions_markdown`); a test keeps the
# copy true.
TABLE: tuple[tuple[tuple[State, ...], type, tuple[State, ...], Handler], ...] = (
    (("new",), Begin, ("placing", "reconciling"), W._begin),
    (("placing",), Applied, ("provisioning", "attaching", "lost", "faulted"), W._applied),
    (("provisioning", "attaching", "running"), Applied, (), W._applied),
    (ENDED, Applied, (), W._applied_late),
    (("placing", "provisioning", "attaching", "running"), WriteFailed, ("faulted",), W._write_failed),
    (ENDED, WriteFailed, (), _ignore),
    (("placing", "provisioning", "attaching", "running", *ENDED), SecretWritten, (), W._secret_written),
    (("placing",), SandboxSeen, ("provisioning", "attaching", "lost", "faulted"), W._seen_handler),
    (("reconciling",), SandboxSeen, ("provisioning", "attaching", "lost", "faulted"), W._seen_handler),
    (("provisioning",), SandboxSeen, ("attaching", "lost", "faulted"), W._seen_handler),
    (("attaching", "running"), SandboxSeen, ("lost",), W._seen_handler),
    (LIVE, SandboxGone, ("lost",), W._gone),
    (LIVE, WatchFailed, (), W._unknown),
    (LIVE, WatchClosed, (), W._unknown),
    (("provisioning",), Tick, ("faulted",), W._tick),
    (("placing", "reconciling", "attaching", "running"), Tick, (), W._tick),
    (("attaching",), Attached, ("running",), W._attached),
    (("attaching",), AttachFailed, ("faulted",), W._attach_failed),
    (ENDED, Attached, (), _ignore),
    (ENDED, AttachFailed, (), _ignore),
    ((*LIVE, "lost", "faulted"), Release, ("released",), W._release),
    ((*LIVE, *ENDED), LeaseRenewed, (), W._renewed),
    (("released",), Deleted, (), W._deleted),
    (("released",), DeleteFailed, (), W._delete_failed),
    (("released",), SandboxGone, (), W._gone_released),
    (("released",), Tick, (), W._tick),
)
TRANSITIONS: dict[tuple[State, type], Edge] = {
    (state, event): Edge(frozenset(to), handler) for states, event, to, handler in TABLE for state in states
}
ACTION_TYPES = (ApplySandbox, ApplySecret, RenewLease, Attach, DeleteSandbox)


def transitions_markdown() -> str:
    """The table above as markdown, for docs/architecture.md (a test keeps the two the same)."""
    rows = ["| in | input | may lead to |", "| --- | --- | --- |"]
    for states, event, to, _ in TABLE:
        rows.append(f"| {', '.join(states)} | {event.__name__} | {', '.join(to) if to else '(stays)'} |")
    return "\n".join(rows)
