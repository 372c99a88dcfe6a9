"""WorkspaceCore on numbers for time: placing with its reason, writes that retry, restore, provisioning's
budget, loss, the Lease in every state, release — and the table that holds the machine."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from jr2_actors.values.constants import DELETE_RETRY_BACKOFF, FORBIDDEN_GRACE_SECONDS
from jr2_actors.values.step import OffTable
from jr2_actors.watch.core import SandboxGone, SandboxSeen, Termination, WatchFailed
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.watch.sandbox import view
from jr2_actors.workspace.core import (
    TRANSITIONS,
    Applied,
    ApplySandbox,
    ApplySecret,
    Attach,
    Attached,
    AttachFailed,
    Begin,
    Deleted,
    DeleteFailed,
    DeleteSandbox,
    Faulted,
    HarnessEnded,
    LastEndSeen,
    LeaseRenewed,
    Lost,
    PlacedLine,
    PlacingLine,
    Release,
    Released,
    RenewLease,
    Restored,
    RestoredWait,
    Running,
    Saved,
    SecretWritten,
    Tick,
    Unknown,
    WaitEndedLine,
    WaitEntry,
    Waiting,
    WatchClosed,
    WorkspaceCore,
    WriteFailed,
)
from tests.sandboxes import fixture

WALL0 = 1_790_000_000.0
KEY = SandboxKey("run-1", "F-1")
UID = "uid-1"
SECRET = "ws-run-1-f-1-000000000000-token"


def seen(phase: str = "Pending", scheduled: tuple[str, str, str] | None = None, ready: bool = False,
         waiting: tuple[str, str] | None = None, restarts: int = 0, last: dict[str, Any] | None = None,
         lost: tuple[str, str] | None = None, uid: str = UID, endpoint: str = "http://h") -> SandboxSeen:
    conditions = []
    if scheduled:
        conditions.append({"type": "Scheduled", "status": scheduled[0], "reason": scheduled[1],
                           "message": scheduled[2]})
    conditions.append({"type": "Ready", "status": "True" if ready else "False", "reason": "PodReady" if ready else "x",
                       "message": ""})
    if lost:
        conditions.append({"type": "Lost", "status": "True", "reason": lost[0], "message": lost[1]})
    st: dict[str, Any] = {"phase": phase, "conditions": conditions, "harness": {"restartCount": restarts},
                          "endpoint": endpoint}
    if last:
        st["harness"]["lastTerminated"] = last
    if waiting:
        st["waiting"] = [{"container": "harness", "reason": waiting[0], "message": waiting[1]}]
    obj = {"metadata": {"name": "ws", "uid": uid}, "status": st}
    return SandboxSeen(KEY, view(obj), obj)


def recorded(name: str, uid: str = UID) -> SandboxSeen:
    obj = fixture(name)
    obj["metadata"]["uid"] = uid
    return SandboxSeen(KEY, view(obj), obj)


UNSCHEDULABLE = seen(scheduled=("False", "Unschedulable", "0/3 nodes are available: 3 Insufficient memory."))
QUOTA = seen(scheduled=("False", "QuotaExceeded", 'pods "ws" is forbidden: exceeded quota: jr2'))
PENDING = seen(scheduled=("Unknown", "SchedulingPending", ""))
SCHEDULED = seen(scheduled=("True", "Scheduled", ""))
READY = seen("Ready", scheduled=("True", "Scheduled", ""), ready=True)


class Drive:
    def __init__(self, **kw: Any) -> None:
        kw.setdefault("secret_name", SECRET)
        self.core = WorkspaceCore("F-1", rng=random.Random(5), **kw)
        self.now = 0.0
        self.out: list[Any] = []

    def __call__(self, event: Any, at: float | None = None) -> Any:
        if at is not None:
            self.now = at
        step = self.core.step(event, self.now, WALL0 + self.now)
        self.out.extend(step.actions)
        self.out.extend(step.reports)
        return step

    def deadline(self) -> float | None:
        return self.core.deadline

    @property
    def state(self) -> str:
        """The core's state, read afresh (mypy would otherwise narrow it across steps)."""
        return str(self.core.state)

    def of(self, kind: type) -> list[Any]:
        return [x for x in self.out if isinstance(x, kind)]

    def written(self, at: float = 0.0) -> None:
        """Begin, and the first write's answer."""
        self(Begin(), at=at)
        self(Applied(UID), at=at)

    def until(self, at: float) -> None:
        """Run every timer due up to `at` (as the shell's Deadline would)."""
        while (deadline := self.core.deadline) is not None and deadline <= at:
            self(Tick(), at=max(deadline, self.now))
        self.now = at


def test_the_first_write_creates_then_the_secret_is_written_owned_by_the_uid() -> None:
    d = Drive()
    step = d(Begin())
    assert step.actions == (ApplySandbox(create=True),)
    step = d(Applied(UID), at=0.5)
    assert step.actions == (ApplySecret(UID),)
    assert d.of(Saved)[-1].restored == Restored(placed=False, uid=UID)


def test_the_first_renewal_falls_in_the_first_fifth_and_only_once_the_write_is_back() -> None:
    d = Drive()
    d(Begin())
    assert d.deadline() is None  # nothing written yet: no Lease to renew
    d(Applied(UID), at=1.0)
    deadline = d.deadline()
    assert deadline is not None and deadline <= 60
    d(Tick(), at=max(deadline, 1.0))
    assert d.of(RenewLease) == [RenewLease(UID)]


def test_the_lease_is_renewed_in_every_live_state_every_five_minutes_plus_or_minus_a_fifth() -> None:
    d = Drive(budget=10**6)  # provisioning may last: the Lease must still be renewed in it
    d.written()
    renewals_in: dict[str, list[float]] = {}
    script = [(1_000.0, UNSCHEDULABLE), (3_000.0, SCHEDULED), (5_000.0, READY), (7_000.0, Attached({})),
              (9_000.0, READY)]
    for at, event in script:
        state = d.state
        while (deadline := d.core.deadline) is not None and deadline <= at:
            before = len(d.of(RenewLease))
            d(Tick(), at=deadline)
            if len(d.of(RenewLease)) > before:
                renewals_in.setdefault(state, []).append(deadline)
        d(event, at=at)
    assert set(renewals_in) == {"placing", "provisioning", "attaching", "running"}
    times = sorted(t for ts in renewals_in.values() for t in ts)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 240 and max(gaps) <= 360, gaps


def test_a_wait_for_a_node_is_visible_with_one_feed_line_and_its_end_another() -> None:
    d = Drive()
    d.written()
    d(UNSCHEDULABLE, at=10.0)
    d(UNSCHEDULABLE, at=20.0)  # the same reason again: nothing new
    d(QUOTA, at=30.0)  # a changed reason updates `waiting`, adds no feed line
    d(SCHEDULED, at=202.0)
    assert d.of(PlacingLine) == [PlacingLine("F-1", "node", "0/3 nodes are available: 3 Insufficient memory.",
                                             WALL0 + 10)]
    assert d.of(PlacedLine) == [PlacedLine("F-1", WALL0 + 10, 192_000)]
    entries = [w.entry for w in d.of(Waiting)]
    assert entries == [WaitEntry("node", "0/3 nodes are available: 3 Insufficient memory.", WALL0 + 10),
                       WaitEntry("quota", 'pods "ws" is forbidden: exceeded quota: jr2', WALL0 + 10), None]
    assert d.state == "provisioning"


def test_scheduling_pending_after_a_wait_updates_on_and_the_message() -> None:
    d = Drive()
    d.written()
    d(QUOTA, at=1.0)
    d(PENDING, at=2.0)
    assert d.of(Waiting)[-1].entry == WaitEntry("node", "waiting for the scheduler", WALL0 + 1)
    assert len(d.of(PlacingLine)) == 1


def test_scheduling_pending_alone_opens_no_wait() -> None:
    d = Drive()
    d.written()
    d(PENDING, at=1.0)
    assert not d.of(PlacingLine) and not d.of(Waiting)


def test_ready_without_a_scheduled_condition_leaves_placing() -> None:
    d = Drive()
    d.written()
    step = d(seen("Ready", ready=True), at=1.0)
    assert step.actions == (Attach("http://h"),)
    assert d.state == "attaching"


@pytest.mark.parametrize(("how", "why"), [("release", "released"), ("lost", "lost"), ("faulted", "faulted")])
def test_a_wait_that_ends_without_a_node_still_gets_its_end_line(how: str, why: str) -> None:
    d = Drive()
    d.written()
    d(UNSCHEDULABLE, at=10.0)
    if how == "release":
        d(Release("run-stopped"), at=25.0)
    elif how == "lost":
        d(SandboxGone(KEY, "ws", UID, "deleted"), at=25.0)
    else:
        d(WriteFailed("secret", "422 invalid", 422), at=25.0)
    assert d.of(WaitEndedLine) == [WaitEndedLine("F-1", WALL0 + 10, 15_000, why)]  # type: ignore[arg-type]
    assert d.of(Waiting)[-1].entry is None


def test_placing_has_no_deadline() -> None:
    d = Drive(lease_interval=10**9)
    d.written()
    d(UNSCHEDULABLE, at=5)
    d.until(10**7)
    assert d.state == "placing"
    assert not d.of(Faulted)


def test_a_wait_from_before_a_restart_is_timed_on_the_wall_clock_clamped_at_zero() -> None:
    d = Drive()
    d(Begin(Restored(uid=UID, wait=RestoredWait("node", "0/3 nodes", since_wall=WALL0 - 60))))
    d(SCHEDULED, at=0.0)
    assert d.of(PlacedLine) == [PlacedLine("F-1", WALL0 - 60, 60_000)]
    future = Drive()
    future(Begin(Restored(uid=UID, wait=RestoredWait("quota", "q", since_wall=WALL0 + 3600))))
    future(SCHEDULED, at=0.0)
    assert future.of(PlacedLine)[0].after_ms == 0


def test_a_restored_workspace_that_never_placed_writes_again_without_creating() -> None:
    d = Drive()
    step = d(Begin(Restored(placed=False, uid=UID)))
    assert step.actions == (ApplySandbox(create=False),)
    assert d.state == "placing"


def test_a_restored_workspace_that_had_placed_writes_nothing_but_its_lease_before_the_first_list() -> None:
    d = Drive()
    step = d(Begin(Restored(placed=True, uid=UID)))
    assert step.actions == () and d.state == "reconciling"
    d.until(10_000.0)  # a watch slow to list must not let the idle GC reap it: the Lease goes on, by uid
    assert len(d.of(RenewLease)) >= 30 and set(d.of(RenewLease)) == {RenewLease(UID)}
    assert not d.of(ApplySandbox)
    step = d(READY, at=10_001.0)
    assert step.actions == (Attach("http://h"),)
    d(Attached({"app": "/work/app/x"}), at=10_002.0)
    assert d.of(Running) == [Running("F-1", {"app": "/work/app/x"}, "http://h")]


@pytest.mark.parametrize("event", [SandboxGone(KEY, "", "", "absent"), seen("Ready", ready=True, uid="uid-other")])
def test_a_restored_workspace_whose_sandbox_is_absent_or_another_is_lost_never_recreated(event: Any) -> None:
    d = Drive()
    d(Begin(Restored(placed=True, uid=UID)))
    d(event, at=1.0)
    assert d.state == "lost" and len(d.of(Lost)) == 1
    assert not d.of(ApplySandbox) and not d.of(Running)


def test_a_restored_workspace_still_provisioning_gets_a_fresh_budget() -> None:
    d = Drive(lease_interval=10**9)
    d(Begin(Restored(placed=True, uid=UID)))
    d(SCHEDULED, at=1.0)
    assert d.state == "provisioning"
    d.until(120.0)
    assert not d.of(Faulted)
    d.until(122.0)
    assert d.of(Faulted)


@pytest.mark.parametrize(("status", "retry_after"), [(500, None), (503, None), (429, 7.0), (409, None), (None, None)])
def test_a_transient_write_error_is_retried_and_never_faults(status: int | None, retry_after: float | None) -> None:
    d = Drive()
    d(Begin())
    for attempt in range(20):
        d(WriteFailed("sandbox", "boom", status, retry_after), at=d.now)
        deadline = d.core.deadline
        assert deadline is not None
        if retry_after is not None:
            assert deadline - d.now >= retry_after
        assert deadline - d.now <= 36.0  # capped (30 s + a fifth), never growing without bound
        step = d(Tick(), at=deadline)
        assert ApplySandbox(create=True) in step.actions, attempt
    assert not d.of(Faulted)
    assert d.state == "placing"


@pytest.mark.parametrize("status", [400, 422])
def test_a_refusal_of_our_own_request_faults(status: int) -> None:
    d = Drive()
    d(Begin())
    d(WriteFailed("sandbox", f"{status} refused", status), at=1.0)
    assert d.state == "faulted"
    assert d.of(Faulted)[0].reason.startswith("writing the Sandbox was refused")


@pytest.mark.parametrize("what", ["sandbox", "secret"])
def test_a_403_is_retried_within_the_writes_backoff_as_an_api_server_restart_gives_them(what: str) -> None:
    """CONTRACTS.md §2: an API-server restart answers 403 for a few ms. Such a 403 is retried on the write's
    own backoff and the write lands (this test used to be the 403 case of the refusal test above, which
    locked in a fault for it); only 403s that last FORBIDDEN_GRACE_SECONDS are RBAC's refusal."""
    d = Drive()
    if what == "sandbox":
        d(Begin())
    else:
        d.written()
    retry = ApplySandbox(create=True) if what == "sandbox" else ApplySecret(UID)
    for _ in range(3):
        d(WriteFailed(what, "403 Forbidden", 403), at=d.now)  # type: ignore[arg-type]
        deadline = d.core.deadline
        assert deadline is not None and deadline - d.now <= 36.0  # the write's backoff, not a fault
        assert d.state == "placing"
        d.until(deadline)
        assert d.out[-1] == retry or retry in d.out[-3:]
    if what == "sandbox":
        d(Applied(UID), at=d.now)
    else:
        d(SecretWritten(), at=d.now)
    assert not d.of(Faulted) and d.state == "placing"


def test_403s_that_last_are_a_refusal_and_fault() -> None:
    d = Drive(lease_interval=10**9)
    d(Begin())
    d(WriteFailed("sandbox", "403 Forbidden", 403), at=1.0)
    while d.state == "placing":
        deadline = d.core.deadline
        assert deadline is not None and deadline < 1.0 + FORBIDDEN_GRACE_SECONDS + 40
        d(Tick(), at=deadline)
        d(WriteFailed("sandbox", "403 Forbidden", 403), at=deadline)
    assert d.now >= 1.0 + FORBIDDEN_GRACE_SECONDS
    assert d.of(Faulted)[0].reason == "writing the Sandbox was refused: 403 Forbidden"


def test_a_403_grace_starts_again_after_any_other_answer() -> None:
    d = Drive(lease_interval=10**9)
    d(Begin())
    d(WriteFailed("sandbox", "403", 403), at=0.0)
    d(WriteFailed("sandbox", "503", 503), at=FORBIDDEN_GRACE_SECONDS - 1)  # the restart goes on: not a 403 run
    d(WriteFailed("sandbox", "403", 403), at=FORBIDDEN_GRACE_SECONDS + 1)
    assert d.state == "placing" and not d.of(Faulted)


def test_a_failed_secret_write_is_retried_not_dropped() -> None:
    d = Drive()
    d.written()
    d(WriteFailed("secret", "503", 503), at=1.0)
    deadline = d.core.deadline
    assert deadline is not None and deadline < 60
    step = d(Tick(), at=deadline)
    assert ApplySecret(UID) in step.actions
    d(SecretWritten(), at=deadline + 1)


def test_a_name_held_by_another_runs_workspace_is_a_named_fault_and_never_deleted() -> None:
    d = Drive()
    d(Begin())
    d(WriteFailed("sandbox", "ws-x belongs to run-2/F-1", 409, collision=True), at=1.0)
    (fault,) = d.of(Faulted)
    assert "taken by another run's Workspace" in fault.reason
    d.until(10_000.0)
    assert not d.of(RenewLease) and not d.of(Attach)
    d(Release("run-faulted"), at=10_001.0)
    assert d.of(DeleteSandbox) == [DeleteSandbox("")]  # by name and key only: the shell checks it is ours


def test_events_of_another_uid_under_the_key_are_not_ours() -> None:
    d = Drive()
    d(Begin())
    d(SandboxGone(KEY, "ws", "uid-old", "deleted"), at=0.1)  # a predecessor's deletion, before our answer
    d(seen("Lost", lost=("Evicted", "gone"), uid="uid-old"), at=0.2)
    d(Applied(UID), at=0.3)
    d(SandboxGone(KEY, "ws", "uid-old", "deleted"), at=0.4)
    assert d.state == "placing" and not d.of(Lost)
    d(READY, at=1.0)
    assert d.state == "attaching"


def test_what_the_watch_said_before_the_write_came_back_is_taken_once_it_is_ours() -> None:
    d = Drive()
    d(Begin())
    d(UNSCHEDULABLE, at=0.1)  # the watch is faster than the write's answer
    assert not d.of(PlacingLine)
    d(Applied(UID), at=0.2)
    assert len(d.of(PlacingLine)) == 1


def test_provisioning_budget_runs_from_scheduling_not_from_the_write() -> None:
    d = Drive(lease_interval=10**9)
    d.written()
    d(UNSCHEDULABLE, at=1)
    d(SCHEDULED, at=500)
    d.until(619)
    assert d.state == "provisioning"
    d.until(620)
    (fault,) = d.of(Faulted)
    assert "not Ready 120s after it was scheduled" in fault.reason


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff"])
def test_an_image_not_pulled_yet_waits_inside_the_budget(reason: str) -> None:
    d = Drive(lease_interval=10**9)
    d.written()
    d(seen(scheduled=("True", "Scheduled", ""), waiting=(reason, "pulling")), at=1)
    assert d.state == "provisioning" and not d.of(Faulted)
    d.until(122)
    assert "not Ready 120s" in d.of(Faulted)[0].reason


@pytest.mark.parametrize("reason", ["InvalidImageName", "ErrImageNeverPull", "CrashLoopBackOff"])
def test_what_no_wait_will_mend_faults_at_once(reason: str) -> None:
    d = Drive()
    d.written()
    d(seen(scheduled=("True", "Scheduled", ""), waiting=(reason, "no")), at=1)
    assert d.of(Faulted)[0].reason == f"{reason}: no"


def test_a_missing_token_secret_of_this_workspace_waits_but_another_secret_faults() -> None:
    d = Drive()
    d.written()
    d(seen(scheduled=("True", "Scheduled", ""),
           waiting=("CreateContainerConfigError", f'secret "{SECRET}" not found')), at=1)
    assert d.state == "provisioning" and not d.of(Faulted)
    d(seen(scheduled=("True", "Scheduled", ""),
           waiting=("CreateContainerConfigError", 'secret "someone-else" not found')), at=2)
    assert d.state == "faulted"


@pytest.mark.parametrize("name", ["sandbox-crashloop.json", "sandbox-root-image.json"])
def test_a_failing_harness_faults_at_once_with_its_own_last_words(name: str) -> None:
    d = Drive()
    d.written()
    d(recorded(name), at=5)
    (fault,) = d.of(Faulted)
    sandbox = recorded(name).sandbox
    words = sandbox.last_terminated.message if sandbox.last_terminated else sandbox.waiting[0].message
    assert fault.reason == f"{sandbox.waiting[0].reason}: {words}"
    assert d.state == "faulted"


def test_ready_attaches_then_runs() -> None:
    d = Drive()
    d.written()
    d(SCHEDULED, at=1)
    step = d(READY, at=2)
    assert step.actions == (Attach("http://h"),)
    d(Attached({"app": "/work/app/feat"}), at=3)
    assert d.of(Running) == [Running("F-1", {"app": "/work/app/feat"}, "http://h")]


def test_attach_refused_faults() -> None:
    d = Drive()
    d.written()
    d(READY, at=1)
    d(AttachFailed("403 repo key refused"), at=2)
    assert d.of(Faulted)[0].reason == "attach: 403 repo key refused"


def test_lost_carries_the_operators_reason() -> None:
    d = Drive()
    d.written()
    d(READY, at=1)
    d(Attached({}), at=2)
    d(recorded("sandbox-lost-evicted.json"), at=3)
    assert d.of(Lost) == [Lost("F-1", "Evicted: The node was low on resource: memory.")]


def test_a_gone_sandbox_is_lost_and_a_dropped_watch_is_not() -> None:
    d = Drive()
    d.written()
    d(WatchFailed(KEY, Termination.TRANSPORT, "the Sandbox watch failed"), at=1)
    d(WatchClosed(), at=1.5)
    assert d.state == "placing" and len(d.of(Unknown)) == 2
    d(SandboxGone(KEY, "ws", UID, "deleted"), at=2)
    assert d.of(Lost) == [Lost("F-1", "the Sandbox was deleted (deleted)")]


def test_a_kernel_kill_while_running_names_the_memory_limit_once() -> None:
    d = Drive(memory_limit="1920Mi")
    d.written()
    d(READY, at=1)
    d(Attached({}), at=2)
    oom = {"reason": "OOMKilled", "exitCode": 137, "message": "Killed", "finishedAt": "2026-11-29T10:00:00Z"}
    d(seen("Ready", scheduled=("True", "Scheduled", ""), ready=True, restarts=1, last=oom), at=3)
    (ended,) = d.of(HarnessEnded)
    assert ended.memory_fault == "memory limit (OOMKilled, limit 1920Mi): Killed"
    d(seen("Ready", scheduled=("True", "Scheduled", ""), ready=True, restarts=1, last=oom), at=4)
    assert len(d.of(HarnessEnded)) == 1  # one restart, one report
    (last,) = d.of(LastEndSeen)
    assert (last.reason, last.exit_code, last.restart_count) == ("OOMKilled", 137, 1)


def test_the_last_end_is_reported_when_first_seen_even_before_attach() -> None:
    d = Drive(memory_limit="2Gi")
    d(Begin(Restored(placed=True, uid=UID)))
    d(recorded("sandbox-ready-after-oom.json"), at=1)
    (last,) = d.of(LastEndSeen)
    assert last.reason == "OOMKilled" and last.memory_fault is not None
    assert last.memory_fault.startswith("memory limit (OOMKilled, limit 2Gi)")


@pytest.mark.parametrize(
    ("path", "why", "deleted"),
    [
        ("placing", "run-stopped", True),    # never ran: deleted at once
        ("placing", "run-faulted", True),
        ("placing", "teardown", True),
        ("running", "teardown", True),        # a state no longer holds it
        ("running", "run-stopped", False),    # it ran: kept for inspection, the idle GC ages it out
        ("running", "run-faulted", False),
        ("faulted-after-placement", "teardown", False),
        ("faulted-before-placement", "run-faulted", True),
    ],
)
def test_release_deletes_what_never_ran_and_keeps_what_ran(path: str, why: str, deleted: bool) -> None:
    d = Drive()
    d.written()
    if path == "placing":
        d(UNSCHEDULABLE, at=1)
    elif path == "running":
        d(READY, at=1)
        d(Attached({}), at=2)
    elif path == "faulted-after-placement":
        d(SCHEDULED, at=1)
        d(recorded("sandbox-crashloop.json"), at=2)
    elif path == "faulted-before-placement":
        d(WriteFailed("secret", "422 invalid", 422), at=1)
    d(Release(why), at=10)  # type: ignore[arg-type]
    assert (DeleteSandbox(UID) in d.out) is deleted
    assert d.state == "released"
    assert d.core.deadline is None  # the Lease ends with the teardown
    if deleted:
        d(Deleted(existed=True), at=11)
    assert d.of(Released) == [Released("F-1", deleted=deleted)]


@pytest.mark.parametrize(("status", "retry_after"), [(503, None), (500, None), (429, 20.0), (None, None),
                                                    (403, None)])
def test_a_delete_owed_is_retried_capped_until_it_lands(status: int | None, retry_after: float | None) -> None:
    """Issue 16 item 11: a short API-server outage must not leave the Sandbox to the idle GC (it used to be
    tried 5 times in 3.5 s). 30 minutes of failures: every retry within the cap (or the Retry-After), and
    the delete lands when the server is back. A 403 is retried within its grace (CONTRACTS.md §2). Every
    retry carries the same preconditions (the uid and the newest version it wrote): a successor stays safe."""
    d = Drive()
    d.written()
    d(LeaseRenewed("7"), at=0.5)
    d(Release("teardown"), at=1)
    cap = max(DELETE_RETRY_BACKOFF.cap * (1 + DELETE_RETRY_BACKOFF.jitter), retry_after or 0.0)
    grace = FORBIDDEN_GRACE_SECONDS - 5 if status == 403 else 1800.0
    retries = 0
    while d.now < grace:
        d(DeleteFailed("the API server is away", status, retry_after), at=d.now)
        deadline = d.core.deadline
        assert deadline is not None and d.now < deadline <= d.now + cap
        if retry_after is not None:
            assert deadline - d.now >= retry_after
        step = d(Tick(), at=deadline)
        assert step.actions == (DeleteSandbox(UID, "7"),)
        retries += 1
    assert not d.of(Released) and retries >= (5 if status == 403 else 50)
    d(Deleted(existed=True), at=d.now + 0.1)
    assert d.of(Released) == [Released("F-1", deleted=True)] and d.deadline() is None


def test_the_watch_saying_the_sandbox_is_gone_ends_the_delete_retry() -> None:
    d = Drive()
    d.written()
    d(Release("teardown"), at=1)
    d(DeleteFailed("503", 503), at=2)
    d(SandboxGone(KEY, "ws", "uid-of-another-incarnation", "deleted"), at=2.1)  # not this one's end
    assert d.core.deadline is not None and not d.of(Released)
    d(SandboxGone(KEY, "ws", UID, "deleted"), at=2.2)
    assert d.of(Released) == [Released("F-1", deleted=True)] and d.deadline() is None
    d.until(3600.0)
    assert d.of(DeleteSandbox) == [DeleteSandbox(UID)]  # no retry after it
    d(DeleteFailed("503", 503), at=3601)  # a delete still out when the watch spoke: nothing more
    d(Deleted(existed=False), at=3602)
    assert len(d.of(Released)) == 1 and d.deadline() is None


def test_a_sandbox_absent_from_the_list_ends_a_restored_teardowns_retry() -> None:
    """Across a restart: the restored teardown retries its delete on the same schedule, and the first list
    that finds no Sandbox under its key (no uid: nothing at all) ends it."""
    d = Drive()
    d(Begin(Restored(placed=True, uid=UID, releasing=True)))
    d(Release("teardown"), at=0.1)
    for _ in range(10):
        d(DeleteFailed("no answer"), at=d.now)
        deadline = d.core.deadline
        assert deadline is not None
        d(Tick(), at=deadline)
    assert len(d.of(DeleteSandbox)) == 11 and not d.of(Released)
    d(SandboxGone(KEY, "", "", "absent"), at=d.now)
    assert d.of(Released) == [Released("F-1", deleted=True)] and d.deadline() is None


@pytest.mark.parametrize("status", [400, 422])
def test_a_delete_refused_for_what_it_is_is_left_to_the_idle_gc(status: int) -> None:
    d = Drive()
    d.written()
    d(Release("teardown"), at=1)
    d(DeleteFailed(f"{status} refused", status), at=2)
    assert d.of(Released) == [Released("F-1", deleted=False)] and d.deadline() is None


def test_a_delete_answered_403_past_its_grace_is_left_to_the_idle_gc() -> None:
    d = Drive()
    d.written()
    d(Release("teardown"), at=1)
    d(DeleteFailed("403", 403), at=2)
    d(DeleteFailed("403", 403), at=2 + FORBIDDEN_GRACE_SECONDS)
    assert d.of(Released) == [Released("F-1", deleted=False)] and d.deadline() is None


def test_a_delete_refused_by_its_uid_precondition_touches_nothing_more() -> None:
    d = Drive()
    d.written()
    d(Release("teardown"), at=1)
    d(DeleteFailed("409 Conflict: precondition failed: UID", 409), at=2)
    assert d.of(Released) == [Released("F-1", deleted=False)] and d.core.deadline is None


def test_a_shell_input_off_the_table_is_our_bug_and_a_world_input_is_ignored() -> None:
    d = Drive()
    d.written()
    with pytest.raises(OffTable, match="Attached in placing"):
        d(Attached({}), at=1)
    d(Release("teardown"), at=2)
    d(UNSCHEDULABLE, at=3)  # the world keeps talking after release: ignored
    with pytest.raises(OffTable):
        d(Begin(), at=4)


def test_every_edge_leads_only_where_the_table_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler that moves off its edge is our bug, caught as it happens: narrow one edge of the table
    and the very move the handler makes on it raises."""
    from jr2_actors.workspace import core as workspace_core

    narrowed = dict(TRANSITIONS)
    edge = narrowed[("placing", SandboxSeen)]
    narrowed[("placing", SandboxSeen)] = workspace_core.Edge(frozenset({"lost", "faulted"}), edge.handler)
    monkeypatch.setattr(workspace_core, "TRANSITIONS", narrowed)
    d = Drive()
    d.written()
    with pytest.raises(OffTable, match="SandboxSeen in placing cannot lead to provisioning"):
        d(SCHEDULED, at=1)


def test_the_architecture_doc_carries_the_transition_table_as_the_code_has_it() -> None:
    from pathlib import Path

    from jr2_actors.workspace.core import transitions_markdown

    doc = (Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    assert transitions_markdown() in doc


def test_the_attach_branch_is_the_workflows_else_the_runs_own() -> None:
    from jr2_actors.values.workflow import WorkspaceDef
    from jr2_actors.workspace.manifest import WorkspaceSpec, attach_branch

    named = WorkspaceSpec("run/1", "wf", WorkspaceDef("F-1", cpu="1", memory="1Gi", branch="feat/x"), image="i")
    unnamed = WorkspaceSpec("run/1", "wf", WorkspaceDef("F-1", cpu="1", memory="1Gi"), image="i")
    assert attach_branch(named) == "feat/x"
    assert attach_branch(unnamed) == "jr2/run-1"


def test_the_delete_carries_the_newest_version_this_workspace_wrote_or_saw() -> None:
    d = Drive()
    d(Begin())
    d(Applied(UID, "10"), at=0.1)
    d(seen(scheduled=("True", "Scheduled", ""), uid=UID), at=0.2)  # the view has no version: kept as was
    d(LeaseRenewed("14"), at=0.3)
    d(LeaseRenewed("12"), at=0.4)  # an older answer never moves it back
    d(Release("teardown"), at=1)
    assert d.of(DeleteSandbox) == [DeleteSandbox(UID, "14")]


def test_the_delete_guard_takes_only_the_sandbox_this_workspace_stamped() -> None:
    from jr2_actors.watch.identity import KEEPALIVE_ANNOTATION
    from jr2_actors.workspace.manifest import written_by

    def obj(uid: str, stamp: str) -> dict[str, Any]:
        return {"metadata": {"uid": uid, "annotations": {KEEPALIVE_ANNOTATION: stamp}}}

    ours = ["2026-11-29T10:00:00.000Z", "2026-11-29T10:05:00.000Z"]
    assert written_by(obj(UID, ours[1]), UID, ours)
    assert not written_by(obj(UID, "2026-11-29T10:05:00.001Z"), UID, ours)  # a successor stamped it since
    assert not written_by(obj("another-uid", ours[0]), UID, ours)
    assert not written_by({"metadata": "garbage"}, UID, ours)
    assert written_by(obj(UID, "anything"), UID, [])  # restored, nothing written yet: the uid decides
    assert not written_by(obj("another-uid", "anything"), UID, [])


def test_a_restored_teardown_writes_nothing_but_its_delete() -> None:
    d = Drive()
    step = d(Begin(Restored(placed=False, uid=UID, releasing=True)))
    assert step.actions == ()
    step = d(Release("run-stopped"), at=0.1)
    assert step.actions == (DeleteSandbox(UID),)
