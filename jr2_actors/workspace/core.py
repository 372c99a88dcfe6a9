"""WorkspaceCore: one Workspace's Sandbox from its write to its teardown. Pure (ADR-0064, ADR-0063).

Theory of operation. The machine is the table `MACHINE` at the bottom (`step.Machine`): (phase, input) →
the phases that edge may lead to, and its handler. A handler moves only along its edge (`_go` checks); an
input with no edge in the current phase is our bug and raises `OffTable`. What the world may say to a
Workspace that has not begun or has ended (the watch, a timer, a late answer) has its rows, which ignore
it. The inputs, actions and reports are in `messages.py`.

    new ──Begin──▶ placing ──scheduled──▶ provisioning ──Ready──▶ attaching ──attached──▶ running
     │                └── (restored after it had placed) ──▶ reconciling ──first list──▶ …
     └─ any live phase ── Lost / gone ──▶ lost;  crash loop, bad image, 120 s, attach refused ──▶ faulted
        any phase ── Release ──▶ released (then the delete, if any, and `Released`)

- `placing` writes the CR and waits for a node with **no deadline** (ADR-0064): an Unschedulable pod
  waits `on: node`, a quota refusal `on: quota`, with the scheduler's or the quota's own words; a pod
  back to `SchedulingPending` still waits on a node. The wait's feed lines and duration: `wait.py`.
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
- The Lease covers the Sandbox from its write to its teardown, in every live phase: first within the first
  fifth of the interval, then every 5 min ±20 %. The renewal lane owns the due times from `HoldLease` to
  `DropLease`; a renewal refused for good (`LeaseRefused`) ends the Lease on that uid — loss is the watch's word.
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
from typing import Any, Literal

from jr2_actors.values.backoff import Jitter, NoJitter
from jr2_actors.values.constants import (
    ATTACH_ATTEMPTS,
    ATTACH_RETRY_BACKOFF,
    DELETE_RETRY_BACKOFF,
    DELETE_VERSION_REREADS,
    FORBIDDEN_GRACE_SECONDS,
    LEASE_INTERVAL_SECONDS,
    PROVISION_BUDGET_SECONDS,
    WRITE_RETRY_BACKOFF,
)
from jr2_actors.values.step import Edge, Machine, Step, Walk
from jr2_actors.watch.deliveries import SandboxGone, SandboxSeen, WatchFailed
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.watch.sandbox import SandboxView
from jr2_actors.workspace import messages as m
from jr2_actors.workspace import reading
from jr2_actors.workspace.manifest import written_by
from jr2_actors.workspace.messages import ENDED, LIVE, WorkspacePhase
from jr2_actors.workspace.wait import PlacingWait

# -- the core ----------------------------------------------------------------------------------------

class WorkspaceCore:
    def __init__(self, path: str, *, memory_limit: str | None = None, rng: Jitter | None = None,
                 lease_interval: float = LEASE_INTERVAL_SECONDS, budget: float = PROVISION_BUDGET_SECONDS,
                 secret_name: str = "", run_id: str = "") -> None:
        self.path = path
        self.key = SandboxKey(run_id, path)  # whose Workspace a Sandbox must name to be ours
        self.phase: WorkspacePhase = "new"
        self.uid = ""
        self.rv = ""  # the newest resourceVersion of its Sandbox this Workspace wrote or saw
        self._memory_limit = memory_limit
        self._random: Jitter = rng or NoJitter()
        self._lease_interval = lease_interval
        self._budget = budget
        self._secret_name = secret_name
        self._lease_due: float | None = None  # the first renewal's due time, until the lane holds the Lease
        self._lease_uid = self._lease_refused = ""  # the uid the lane holds the Lease for; one refused for good
        self._budget_ends: float | None = None
        self._retry_at: float | None = None
        self._attach_failures = 0  # attaches no Harness answered, in a row
        self._retry: m.Action | None = None
        self._write_failures = 0
        self._delete_failures = 0
        self._conflicts = 0  # a delete's 409s in a row of a Sandbox still ours whose version moved
        self._forbidden_since: float | None = None  # when the 403s in a row began
        self._released = False  # `Released` was reported: the teardown is over
        self._wait = PlacingWait(path)
        self._placed = self._releasing = False  # placed; restored mid-teardown (nothing but its delete)
        self._endpoint = ""
        self._pending_seen: SandboxSeen | None = None
        self._restart_count: int | None = None
        self._last_end: tuple[str, int | None, str] | None = None
        self._out: list[m.Action | m.Report] = []
        self._walk = Walk(MACHINE, f"Workspace {path}")
        self._now = 0.0
        self._wall = 0.0

    # -- the one entry point -------------------------------------------------------------------------

    def step(self, event: m.Input, now: float, wall: float) -> m.WorkspaceStep:
        self._out = []
        self._now, self._wall = now, wall
        with self._walk.take(self.phase, event) as handler:
            handler(self, event, now, wall)
        self._lease(now)
        out, self._out = self._out, []
        actions = tuple(x for x in out if isinstance(x, ACTION_TYPES))
        reports = tuple(x for x in out if not isinstance(x, ACTION_TYPES))
        return Step(actions, reports, self.deadline)

    @property
    def deadline(self) -> float | None:
        due = [self._budget_ends if self.phase == "provisioning" else None, self._retry_at]
        return min((t for t in due if t is not None), default=None)

    # -- handlers (see MACHINE) -------------------------------------------------------------------------

    def _begin(self, event: m.Begin, now: float, wall: float) -> None:
        restored = event.restored or m.Restored()
        self.uid = restored.uid
        self._placed, self._releasing = restored.placed, restored.releasing
        self._lease_due = now + self._random.uniform(0, self._lease_interval / 5)
        if restored.placed:
            self._go("reconciling")  # ADR-0063: the first list answers; nothing but the Lease is written before it
            return
        if restored.wait is not None:
            self._wait.restore(restored.wait)
        self._go("placing")
        if not restored.releasing:  # a Sandbox deleted before the restart is never written again
            self._out.append(m.ApplySandbox(create=not self.uid))  # idempotent: a restart re-enters placing

    def _applied(self, event: m.Applied, now: float, wall: float) -> None:
        if event.uid != self.uid:
            self.rv = ""
        self.uid = event.uid
        self.rv = reading.newest(self.rv, event.resource_version)
        self._write_failures = 0
        self._forbidden_since = None
        self._saved()
        self._out.append(m.ApplySecret(event.uid))
        if self._pending_seen is not None:  # what the watch said before the write's answer came back
            seen, self._pending_seen = self._pending_seen, None
            if seen.sandbox.uid == self.uid:
                self._seen(seen, now, wall)

    def _applied_late(self, event: m.Applied, now: float, wall: float) -> None:
        self.uid = event.uid  # ended meanwhile: a delete already queued finds it by name
        self.rv = reading.newest(self.rv, event.resource_version)

    def _lease_refused_for_good(self, event: m.LeaseRefused, now: float, wall: float) -> None:
        self._lease_refused = event.uid if event.uid == self.uid else self._lease_refused  # a later uid: leased

    def _name_taken(self, event: m.NameTaken, now: float, wall: float) -> None:
        """Ours from an earlier write whose answer was lost (adopted: applied), or another run's Workspace's: a
        named fault, never adopted, renewed or deleted."""
        if event.holder is None or event.holder == self.key:
            self._out.append(m.ApplySandbox(create=False))
        else:
            self._fault(f"the Sandbox name is taken by another run's Workspace, never ours to use: {event.name} "
                        f"belongs to {event.holder}")

    def _write_failed(self, event: m.WriteFailed, now: float, wall: float) -> None:
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
        self._retry = m.ApplySandbox(create=not self.uid) if event.what == "sandbox" else m.ApplySecret(self.uid)

    def _secret_written(self, event: m.SecretWritten, now: float, wall: float) -> None:
        self._write_failures = 0
        self._forbidden_since = None

    def _seen_handler(self, event: SandboxSeen, now: float, wall: float) -> None:
        if not self.uid:
            self._pending_seen = event  # our write's answer is not back: hold the newest observation
            return
        if event.sandbox.uid != self.uid:
            if self.phase == "reconciling":
                self._lose("another Sandbox holds its name now (it was deleted and created again)")
            return  # another incarnation under this key: not ours
        self._seen(event, now, wall)

    def _gone(self, event: SandboxGone, now: float, wall: float) -> None:
        if self.phase == "reconciling" or (self.uid and event.uid in (self.uid, "")):
            self._lose(f"the Sandbox was deleted ({event.reason})")

    def _unknown(self, event: WatchFailed | m.WatchStopped, now: float, wall: float) -> None:
        message = event.message if isinstance(event, WatchFailed) else "the Sandbox watch stopped"
        self._out.append(m.Unknown(self.path, message))  # a dropped watch is never loss (ADR-0063)

    def _attached(self, event: m.Attached, now: float, wall: float) -> None:
        self._attach_failures = 0
        self._retry_at = self._retry = None
        self._go("running")
        self._out.append(m.Running(self.path, dict(event.repos), self._endpoint))

    def _attach_failed(self, event: m.AttachFailed, now: float, wall: float) -> None:
        # An attach no Harness answered races the watch: an evicted pod's Harness is gone before the watch
        # says `Lost` (found by the simulation). It is tried again on ATTACH_RETRY_BACKOFF while the
        # Sandbox is still ours and Ready; the watch's Lost or Gone ends it as a loss, never a fault.
        if event.unavailable and self._attach_failures < ATTACH_ATTEMPTS:
            self._attach_failures += 1
            self._retry = m.Attach(self._endpoint)
            self._retry_at = now + ATTACH_RETRY_BACKOFF.delay(self._attach_failures, self._random)
            return
        self._fault(f"attach: {event.message}")

    def _release(self, event: m.Release, now: float, wall: float) -> None:
        was = self.phase
        self._end_wait("released")
        self._go("released")
        self._retry_at = self._retry = None
        ran = self._placed and was != "placing"
        # ADR-0064: what never ran is deleted at once; what ran is kept when the run stopped or faulted, or
        # when it faulted itself after it placed (inspectable, the idle GC ages it out).
        if ran and (event.why != "teardown" or was == "faulted"):
            self._teardown_over(deleted=False)
        else:
            self._forbidden_since = None
            self._conflicts = 0
            self._out.append(m.DeleteSandbox(self.uid, self.rv))

    def _deleted(self, event: m.Deleted, now: float, wall: float) -> None:
        if not self._released:
            self._teardown_over(deleted=event.existed)

    def _delete_failed(self, event: m.DeleteFailed, now: float, wall: float) -> None:
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
        self._conflicts = 0
        delay = DELETE_RETRY_BACKOFF.delay(self._delete_failures, self._random)
        if event.retry_after is not None:
            delay = max(delay, event.retry_after)
        self._retry_at = now + delay
        self._retry = m.DeleteSandbox(self.uid, self.rv)

    def _delete_conflict(self, event: m.DeleteConflict, now: float, wall: float) -> None:
        """ADR-0064's delete guard. A version moved by anyone else (the operator's status, a renewal the watch
        has not shown yet) is read again and the delete retried while the Sandbox is still the one this
        Workspace wrote; a successor that adopted the name has stamped it since, and is never touched."""
        if self._released:
            return
        if event.current is None:
            self._teardown_over(deleted=False)
        elif not written_by(event.current, event.uid, event.sent):
            self._delete_failed(m.DeleteFailed(event.message, 409), now, wall)  # not ours any more
        elif self._conflicts >= DELETE_VERSION_REREADS:  # still ours, still moving: retried with backoff
            self._delete_failed(m.DeleteFailed(f"its version kept moving: {event.message}"), now, wall)
        else:
            self._conflicts += 1
            self._out.append(m.DeleteSandbox(event.uid, reading.version(event.current)))

    def _gone_released(self, event: SandboxGone, now: float, wall: float) -> None:
        """The watch says the Sandbox is gone while its delete is owed: nothing is left to delete. Another
        incarnation's end (another uid) is not this one's; an absence with no uid is no Sandbox at all."""
        if not self._released and event.uid in (self.uid, ""):
            self._teardown_over(deleted=True)

    # -- what the watch says, in each phase ------------------------------------------------------------

    def _seen(self, event: SandboxSeen, now: float, wall: float) -> None:
        sandbox = event.sandbox
        self.rv = reading.newest(self.rv, sandbox.resource_version)
        self._endpoint = sandbox.endpoint or self._endpoint
        self._note_last_end(sandbox)
        if sandbox.terminal:
            self._lose(reading.lost_reason(sandbox))
            return
        if self.phase == "reconciling":
            self._reconcile(sandbox, now, wall)
        elif self.phase == "placing":
            self._placing(sandbox, now, wall)
        elif self.phase == "provisioning":
            self._provisioning(sandbox, now, wall)
        elif self.phase in ("attaching", "running"):
            self._harness_restarts(sandbox)

    def _reconcile(self, sandbox: SandboxView, now: float, wall: float) -> None:
        self._restart_count = sandbox.restart_count
        if reading.ready(sandbox):
            self._go("attaching")  # re-attach: the Harness call is idempotent (ADR-0063, ADR-0065)
            self._out.append(m.Attach(self._endpoint))
        else:
            self._go("provisioning")
            self._budget_ends = now + self._budget
            self._provisioning(sandbox, now, wall)

    def _placing(self, sandbox: SandboxView, now: float, wall: float) -> None:
        if reading.scheduled(sandbox):
            self._placed_now(now, wall)
            self._go("provisioning")
            self._budget_ends = now + self._budget
            self._provisioning(sandbox, now, wall)
            return
        reason = reading.wait_reason(sandbox, waiting=self._wait.entry is not None)
        if reason is None:
            return
        changed = self._wait.waits(*reason, now, wall)
        if changed:
            self._out.extend(changed)
            self._saved()

    def _provisioning(self, sandbox: SandboxView, now: float, wall: float) -> None:
        fault = reading.stuck(sandbox, self._secret_name)
        if fault is not None:
            self._fault(fault)
            return
        if reading.ready(sandbox):
            self._restart_count = sandbox.restart_count
            self._go("attaching")
            self._out.append(m.Attach(self._endpoint))

    def _harness_restarts(self, sandbox: SandboxView) -> None:
        if self._restart_count is not None and sandbox.restart_count > self._restart_count:
            ended = sandbox.last_terminated
            reason = ended.reason if ended else "Unknown"
            message = ended.message if ended else ""
            moment = (ended.finished_at if ended else "") or f"restart-{sandbox.restart_count}"
            self._out.append(m.HarnessEnded(self.path, reason, ended.exit_code if ended else None, message,
                                          reading.memory_fault(self._memory_limit, reason, message), moment))
        self._restart_count = sandbox.restart_count

    # -- time ------------------------------------------------------------------------------------------

    def _tick(self, event: m.WorkspaceTick, now: float, wall: float) -> None:
        if self._retry_at is not None and now >= self._retry_at:
            action, self._retry, self._retry_at = self._retry, None, None
            if action is not None:
                self._out.append(action)
        if self.phase == "provisioning" and self._budget_ends is not None and now >= self._budget_ends:
            self._fault(f"provisioning: the Sandbox was not Ready {self._budget:.0f}s after it was scheduled")
            return

    # -- helpers ---------------------------------------------------------------------------------------

    def _refused(self, status: int | None, now: float) -> bool:
        """A refusal of the request itself. A 403 is one only once the 403s in a row have lasted
        `FORBIDDEN_GRACE_SECONDS` (CONTRACTS.md §2: an API-server restart answers 403 for a few ms)."""
        if status != reading.FORBIDDEN:
            self._forbidden_since = None
            return status in reading.REFUSALS
        if self._forbidden_since is None:
            self._forbidden_since = now
        return now - self._forbidden_since >= FORBIDDEN_GRACE_SECONDS

    def _teardown_over(self, *, deleted: bool) -> None:
        self._released = True
        self._retry_at = self._retry = None
        self._out.append(m.Released(self.path, deleted=deleted))

    def _leased(self) -> bool:
        """ADR-0064: from the write to the teardown, in every live phase (`reconciling` too: each renewal carries
        the uid it wrote, so it renews only that Sandbox); a restored teardown writes nothing but its delete."""
        return self.phase in LIVE and bool(self.uid) and self.uid != self._lease_refused and not self._releasing

    def _lease(self, now: float) -> None:
        """After every step: the lane holds the Lease on the uid to renew, or none; taken back first, so a delete
        of the same step never overtakes a renewal (ADR-0064). Another uid's first renewal: a fifth again."""
        want = self.uid if self._leased() else ""
        if want != self._lease_uid:
            if self._lease_uid:
                self._out.insert(0, m.DropLease())
            if want:
                due, self._lease_due = self._lease_due, None
                if due is None:
                    due = now + self._random.uniform(0, self._lease_interval / 5)
                self._out.append(m.HoldLease(want, due, self._lease_interval))
            self._lease_uid = want

    def _go(self, phase: WorkspacePhase) -> None:
        self._walk.move(phase)
        if phase != self.phase:
            self.phase = phase
            self._out.append(m.Phase(self.path, phase))

    def _placed_now(self, now: float, wall: float) -> None:
        self._placed = True
        self._out.extend(self._wait.placed(now, wall))
        self._saved()

    def _end_wait(self, why: Literal["released", "lost", "faulted"]) -> None:
        self._out.extend(self._wait.ended(why, self._now, self._wall))

    def _saved(self) -> None:
        self._out.append(m.Saved(self.path, m.Restored(self._placed, self.uid, self._wait.saved())))

    def _lose(self, reason: str) -> None:
        self._end_wait("lost")
        self._go("lost")
        self._retry_at = self._retry = None
        self._out.append(m.Lost(self.path, reason))

    def _fault(self, reason: str) -> None:
        self._end_wait("faulted")
        self._go("faulted")
        self._retry_at = self._retry = None
        self._out.append(m.Faulted(self.path, reason))

    def _note_last_end(self, sandbox: SandboxView) -> None:
        end = sandbox.last_terminated
        if end is None:
            return
        seen = m.LastEndSeen(self.path, end.reason, end.exit_code, end.finished_at, sandbox.restart_count,
                           reading.memory_fault(self._memory_limit, end.reason, end.message))
        key = (end.reason, end.exit_code, seen.moment)
        if key != self._last_end:
            self._last_end = key
            self._out.append(seen)


# -- the machine -------------------------------------------------------------------------------------

Handler = Callable[[WorkspaceCore, Any, float, float], None]


def _ignore(core: WorkspaceCore, event: Any, now: float, wall: float) -> None:
    """A late answer to a call made before the Workspace ended, or the world talking to a Workspace that
    has not begun or has ended: nothing is left to do with it."""


W = WorkspaceCore
NOT_LIVE: tuple[WorkspacePhase, ...] = ("new", "lost", "faulted")
# One table holds the machine: (from phases, input, where the edge may lead, who takes it). Every edge
# not listed is off the table (`OffTable`). docs/architecture.md prints it (`transitions_markdown`); a test
# keeps the copy true.
MACHINE: Machine[Handler] = Machine("Workspace", (
    (("new",), m.Begin, ("placing", "reconciling"), W._begin),
    (("placing",), m.Applied, ("provisioning", "attaching", "lost", "faulted"), W._applied),
    (("provisioning", "attaching", "running"), m.Applied, (), W._applied),
    (ENDED, m.Applied, (), W._applied_late),
    (("placing", "provisioning", "attaching", "running"), m.WriteFailed, ("faulted",), W._write_failed),
    (ENDED, m.WriteFailed, (), _ignore),
    (("placing",), m.NameTaken, ("faulted",), W._name_taken),
    (ENDED, m.NameTaken, (), _ignore),
    (("placing", "provisioning", "attaching", "running", *ENDED), m.SecretWritten, (), W._secret_written),
    (("placing",), SandboxSeen, ("provisioning", "attaching", "lost", "faulted"), W._seen_handler),
    (("reconciling",), SandboxSeen, ("provisioning", "attaching", "lost", "faulted"), W._seen_handler),
    (("provisioning",), SandboxSeen, ("attaching", "lost", "faulted"), W._seen_handler),
    (("attaching", "running"), SandboxSeen, ("lost",), W._seen_handler),
    (LIVE, SandboxGone, ("lost",), W._gone),
    (LIVE, WatchFailed, (), W._unknown),
    (LIVE, m.WatchStopped, (), W._unknown),
    (("provisioning",), m.WorkspaceTick, ("faulted",), W._tick),
    (("placing", "reconciling", "attaching", "running"), m.WorkspaceTick, (), W._tick),
    (("attaching",), m.Attached, ("running",), W._attached),
    (("attaching",), m.AttachFailed, ("attaching", "faulted"), W._attach_failed),
    (ENDED, m.Attached, (), _ignore),
    (ENDED, m.AttachFailed, (), _ignore),
    ((*LIVE, "lost", "faulted"), m.Release, ("released",), W._release),
    ((*LIVE, *ENDED), m.LeaseRefused, (), W._lease_refused_for_good),
    (("released",), m.Deleted, (), W._deleted),
    (("released",), m.DeleteFailed, (), W._delete_failed),
    (("released",), m.DeleteConflict, (), W._delete_conflict),
    (("released",), SandboxGone, (), W._gone_released),
    (("released",), m.WorkspaceTick, (), W._tick),
    # The world (the watch, a timer) talks to a Workspace that has not begun or has ended: nothing to do.
    ((*NOT_LIVE, "released"), SandboxSeen, (), _ignore),
    (NOT_LIVE, SandboxGone, (), _ignore),
    ((*NOT_LIVE, "released"), WatchFailed, (), _ignore),
    ((*NOT_LIVE, "released"), m.WatchStopped, (), _ignore),
    (NOT_LIVE, m.WorkspaceTick, (), _ignore),
))
TABLE = MACHINE.rows
TRANSITIONS: dict[tuple[str, type], Edge[Handler]] = MACHINE.edges
ACTION_TYPES = (m.ApplySandbox, m.ApplySecret, m.HoldLease, m.DropLease, m.Attach, m.DeleteSandbox)


def transitions_markdown() -> str:
    """The table above as markdown, for docs/architecture.md (a test keeps the two the same)."""
    return MACHINE.markdown()
