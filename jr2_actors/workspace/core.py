"""WorkspaceCore: one Workspace's Sandbox from its write to its teardown. Pure (ADR-0064, ADR-0063).

Theory of operation. States:

    placing ──scheduled──▶ provisioning ──Ready──▶ attaching ──attached──▶ running
       │                        │                      │                     │
       └──────── Lost / gone ───┴──────────────────────┴─────────────────────┴──▶ lost
                                └── crash loop, bad image, 120 s budget, attach refused ──▶ faulted
    any state ──release──▶ released

- `placing` writes the CR and waits for a node with **no deadline**: an Unschedulable pod waits `on:
  node`, a quota refusal `on: quota`, each with the scheduler's or the quota's own words. A wait that
  starts gives one `placing` feed line; its end gives one `placed` line with the duration (monotonic when
  this process opened the wait, else two wall-clock reads clamped at 0); a changed reason only updates
  `waiting`.
- `provisioning` waits for `Ready` under a 120 s budget from scheduling (image pull, Harness start,
  Repos). A crash-looping Harness or a container that cannot be created faults at once, carrying the
  Harness's own last words (`lastTerminated.message`) — no reason is invented for what a log line says.
- `attaching` is the Harness call (`POST /attach`), then `running`.
- A Sandbox `Lost` or gone is `workspace.lost` with the operator's reason, within seconds of the watch
  event. A dropped watch is unknown, never loss. In `running`, a Harness restart is reported (it ends the
  Turns waiting on it); an `OOMKilled` end names the memory limit.
- The Lease covers the Sandbox from its write to its teardown, in every state: the first renewal
  within the first fifth of the interval, then every 5 min ±20 %, never in lockstep.
- Release: delete what never ran (a Sandbox released while still `placing` is deleted at once: nothing
  on it can be inspected, and it could take a node later); keep what ran and faulted (it stays
  inspectable and ages out at the idle timeout); a normal teardown deletes.

The core never touches the cluster: it returns actions (`ApplySandbox`, `RenewLease`, `Attach`,
`DeleteSandbox`) and reports for the run; the WorkspaceActor performs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.backoff import Jitter, NoJitter
from jr2_actors.constants import LEASE_INTERVAL_SECONDS, LEASE_JITTER, PROVISION_BUDGET_SECONDS
from jr2_actors.watch.sandbox import SandboxView

State = Literal["new", "placing", "provisioning", "attaching", "running", "lost", "faulted", "released"]
WaitOn = Literal["node", "quota"]
LIVE_STATES = frozenset({"placing", "provisioning", "attaching", "running"})
FAST_FAULTS = frozenset({"CrashLoopBackOff", "CreateContainerConfigError", "ImagePullBackOff", "ErrImagePull",
                         "InvalidImageName", "CreateContainerError"})


# -- inputs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RestoredWait:
    """A `placing` wait opened before an Orchestrator restart: only its wall-clock start survived."""

    on: WaitOn
    message: str
    since_wall: float


@dataclass(frozen=True)
class Begin:
    restored_wait: RestoredWait | None = None


@dataclass(frozen=True)
class Observed:
    sandbox: SandboxView


@dataclass(frozen=True)
class Vanished:
    reason: str = "the Sandbox was deleted"


@dataclass(frozen=True)
class WatchUnknown:
    message: str


@dataclass(frozen=True)
class ApplyFailed:
    message: str


@dataclass(frozen=True)
class Attached:
    repos: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AttachFailed:
    message: str


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Release:
    why: Literal["teardown", "run-stopped", "run-faulted"] = "teardown"


Input = Begin | Observed | Vanished | WatchUnknown | ApplyFailed | Attached | AttachFailed | Tick | Release


# -- outputs -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ApplySandbox:
    pass


@dataclass(frozen=True)
class RenewLease:
    pass


@dataclass(frozen=True)
class Attach:
    pass


@dataclass(frozen=True)
class DeleteSandbox:
    pass


Action = ApplySandbox | RenewLease | Attach | DeleteSandbox


@dataclass(frozen=True)
class Waiting:
    """The RunStatus `waiting` entry of this Workspace, or None when it no longer waits."""

    child: str
    entry: dict[str, Any] | None


@dataclass(frozen=True)
class FeedLine:
    kind: Literal["placing", "placed"]
    fields: dict[str, Any]


@dataclass(frozen=True)
class Running:
    child: str
    repos: dict[str, str]


@dataclass(frozen=True)
class Lost:
    """`workspace.lost`, with the reason the run's fault will carry."""

    child: str
    reason: str


@dataclass(frozen=True)
class Faulted:
    child: str
    reason: str


@dataclass(frozen=True)
class HarnessEnded:
    """The Harness container ended and restarted while running: the Turns waiting on it end."""

    child: str
    reason: str
    exit_code: int | None
    message: str
    memory_fault: str | None  # `memory limit (OOMKilled, limit 1920Mi): …` for a kernel kill


@dataclass(frozen=True)
class Unknown:
    child: str
    message: str


Report = Waiting | FeedLine | Running | Lost | Faulted | HarnessEnded | Unknown


@dataclass(frozen=True)
class Step:
    actions: tuple[Action, ...] = ()
    reports: tuple[Report, ...] = ()
    deadline: float | None = None


# -- the core ----------------------------------------------------------------------------------------

class WorkspaceCore:
    def __init__(self, child: str, *, memory_limit: str | None = None, rng: Jitter | None = None,
                 lease_interval: float = LEASE_INTERVAL_SECONDS, budget: float = PROVISION_BUDGET_SECONDS) -> None:
        self.child = child
        self.state: State = "new"
        self._memory_limit = memory_limit
        self._random: Jitter = rng or NoJitter()
        self._lease_interval = lease_interval
        self._budget = budget
        self._lease_due: float | None = None
        self._budget_ends: float | None = None
        self._wait: tuple[WaitOn, str] | None = None
        self._wait_since_mono: float | None = None
        self._wait_since_wall: float | None = None
        self._restored_wait: RestoredWait | None = None
        self._ever_placed = False
        self._restart_count: int | None = None

    def step(self, event: Input, now: float, wall: float) -> Step:
        out: list[Action | Report] = []
        handler = TRANSITIONS.get((self.state, type(event)))
        if handler is not None:
            handler(self, event, now, wall, out)
        elif isinstance(event, Release) and self.state not in ("released", "new"):
            self._release(event, now, wall, out)
        if isinstance(event, Tick) and self.state in LIVE_STATES:
            self._renew_if_due(now, out)
        actions = tuple(x for x in out if isinstance(x, (ApplySandbox, RenewLease, Attach, DeleteSandbox)))
        reports = tuple(x for x in out if not isinstance(x, (ApplySandbox, RenewLease, Attach, DeleteSandbox)))
        return Step(actions, reports, self.deadline)

    @property
    def deadline(self) -> float | None:
        due = [t for t in (self._lease_due if self.state in LIVE_STATES else None,
                           self._budget_ends if self.state == "provisioning" else None) if t is not None]
        return min(due) if due else None

    # -- handlers (see TRANSITIONS) --------------------------------------------------------------------

    def _begin(self, event: Begin, now: float, wall: float, out: list[Any]) -> None:
        self.state = "placing"
        self._restored_wait = event.restored_wait
        if event.restored_wait is not None:
            self._wait = (event.restored_wait.on, event.restored_wait.message)
            self._wait_since_wall = event.restored_wait.since_wall
        out.append(ApplySandbox())  # idempotent: a restart re-enters placing and applies again
        self._lease_due = now + self._random.uniform(0, self._lease_interval / 5)

    def _placing_observed(self, event: Observed, now: float, wall: float, out: list[Any]) -> None:
        sandbox = event.sandbox
        if sandbox.terminal:
            self._lose(sandbox, out)
            return
        scheduled = sandbox.condition("Scheduled")
        if scheduled is not None and scheduled.status == "True":
            self._placed(now, wall, out)
            self.state = "provisioning"
            self._budget_ends = now + self._budget
            self._provisioning_observed(event, now, wall, out)
            return
        if scheduled is None or scheduled.reason not in ("Unschedulable", "QuotaExceeded"):
            return  # SchedulingPending: not (yet) a wait with a reason
        wait: tuple[WaitOn, str] = ("quota" if scheduled.reason == "QuotaExceeded" else "node", scheduled.message)
        if self._wait is None:
            self._wait = wait
            self._wait_since_mono, self._wait_since_wall = now, wall
            out.append(FeedLine("placing", {"child": self.child, "on": wait[0], "message": wait[1],
                                            "since": wall}))
            out.append(self._waiting_entry())
        elif wait != self._wait:
            self._wait = wait  # a changed reason updates `waiting`; it adds no feed line
            out.append(self._waiting_entry())

    def _provisioning_observed(self, event: Observed, now: float, wall: float, out: list[Any]) -> None:
        sandbox = event.sandbox
        if sandbox.terminal:
            self._lose(sandbox, out)
            return
        stuck = next((w for w in sandbox.waiting if w.reason in FAST_FAULTS), None)
        if stuck is not None:
            last_words = sandbox.last_terminated.message if sandbox.last_terminated else ""
            self._fault(f"{stuck.reason}: {last_words or stuck.message}", out)
            return
        ready = sandbox.condition("Ready")
        if sandbox.phase == "Ready" or (ready is not None and ready.status == "True"):
            self._restart_count = sandbox.restart_count
            self.state = "attaching"
            out.append(Attach())

    def _running_observed(self, event: Observed, now: float, wall: float, out: list[Any]) -> None:
        sandbox = event.sandbox
        if sandbox.terminal:
            self._lose(sandbox, out)
            return
        if self._restart_count is not None and sandbox.restart_count > self._restart_count:
            ended = sandbox.last_terminated
            reason = ended.reason if ended else "Unknown"
            message = ended.message if ended else ""
            memory = None
            if reason == "OOMKilled":
                memory = f"memory limit (OOMKilled, limit {self._limit_text()}): {message}".rstrip(": ")
            out.append(HarnessEnded(self.child, reason, ended.exit_code if ended else None, message, memory))
        self._restart_count = sandbox.restart_count

    def _attached(self, event: Attached, now: float, wall: float, out: list[Any]) -> None:
        self.state = "running"
        out.append(Running(self.child, dict(event.repos)))

    def _apply_failed(self, event: ApplyFailed, now: float, wall: float, out: list[Any]) -> None:
        self._fault(f"apply: {event.message}", out)

    def _attach_failed(self, event: AttachFailed, now: float, wall: float, out: list[Any]) -> None:
        self._fault(f"attach: {event.message}", out)

    def _vanished(self, event: Vanished, now: float, wall: float, out: list[Any]) -> None:
        self._close_wait(out)
        self.state = "lost"
        out.append(Lost(self.child, event.reason))

    def _unknown(self, event: WatchUnknown, now: float, wall: float, out: list[Any]) -> None:
        out.append(Unknown(self.child, event.message))  # a dropped watch is never loss

    def _budget_tick(self, event: Tick, now: float, wall: float, out: list[Any]) -> None:
        if self._budget_ends is not None and now >= self._budget_ends:
            self._fault(f"provisioning: the Sandbox was not Ready {self._budget:.0f}s after it was scheduled", out)

    def _release(self, event: Release, now: float, wall: float, out: list[Any]) -> None:
        placed_then_faulted = self.state == "faulted" and self._ever_placed
        if self.state == "placing" or not self._ever_placed:
            out.append(DeleteSandbox())  # it never ran: delete at once
        elif event.why == "teardown" and not placed_then_faulted:
            out.append(DeleteSandbox())
        # else: it ran, and the run stopped or faulted: keep it inspectable; the idle GC ages it out
        self._close_wait(out)
        self.state = "released"

    # -- helpers ---------------------------------------------------------------------------------------

    def _renew_if_due(self, now: float, out: list[Any]) -> None:
        if self._lease_due is not None and now >= self._lease_due:
            out.append(RenewLease())
            jitter = self._random.uniform(1 - LEASE_JITTER, 1 + LEASE_JITTER)
            self._lease_due = now + self._lease_interval * jitter

    def _placed(self, now: float, wall: float, out: list[Any]) -> None:
        self._ever_placed = True
        if self._wait is None:
            return
        if self._wait_since_mono is not None:
            after = now - self._wait_since_mono
        else:
            after = max(wall - (self._wait_since_wall or wall), 0.0)  # a wait from before a restart
        out.append(FeedLine("placed", {"child": self.child, "since": self._wait_since_wall,
                                       "after_ms": int(after * 1000)}))
        self._close_wait(out)

    def _close_wait(self, out: list[Any]) -> None:
        if self._wait is not None:
            self._wait = None
            self._wait_since_mono = self._wait_since_wall = None
            out.append(Waiting(self.child, None))

    def _waiting_entry(self) -> Waiting:
        assert self._wait is not None
        on, message = self._wait
        return Waiting(self.child, {"child": self.child, "on": on, "message": message,
                                    "since": self._wait_since_wall})

    def _lose(self, sandbox: SandboxView, out: list[Any]) -> None:
        lost = sandbox.condition("Lost") or sandbox.condition("Ready")
        reason = f"{lost.reason}: {lost.message}" if lost is not None and lost.reason else "the Sandbox was lost"
        self._close_wait(out)
        self.state = "lost"
        out.append(Lost(self.child, reason))

    def _fault(self, reason: str, out: list[Any]) -> None:
        self._close_wait(out)
        self.state = "faulted"
        out.append(Faulted(self.child, reason))

    def _limit_text(self) -> str:
        """The limit as the Size states it (`1920Mi`, `2Gi`), as CONTRACTS.md's fault lines show it."""
        return self._memory_limit or "unknown"


# One table holds the machine: (state, input) → handler. docs/architecture.md prints it.
TRANSITIONS: dict[tuple[State, type], Any] = {
    ("new", Begin): WorkspaceCore._begin,
    ("placing", Observed): WorkspaceCore._placing_observed,
    ("provisioning", Observed): WorkspaceCore._provisioning_observed,
    ("running", Observed): WorkspaceCore._running_observed,
    ("attaching", Observed): WorkspaceCore._running_observed,
    ("attaching", Attached): WorkspaceCore._attached,
    ("attaching", AttachFailed): WorkspaceCore._attach_failed,
    ("placing", ApplyFailed): WorkspaceCore._apply_failed,
    ("provisioning", Tick): WorkspaceCore._budget_tick,
    **{(s, Vanished): WorkspaceCore._vanished for s in ("placing", "provisioning", "attaching", "running")},
    **{(s, WatchUnknown): WorkspaceCore._unknown for s in ("placing", "provisioning", "attaching", "running")},
}


def transitions_markdown() -> str:
    """The table above as markdown, for docs/architecture.md (a test keeps the two the same)."""
    rows = ["| state | input | handler |", "| --- | --- | --- |"]
    for (state, event), handler in TRANSITIONS.items():
        rows.append(f"| {state} | {event.__name__} | {handler.__name__.lstrip('_')} |")
    rows.append("| any live state | Release | release |")
    return "\n".join(rows)
