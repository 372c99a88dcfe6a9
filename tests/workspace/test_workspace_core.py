"""WorkspaceCore on numbers for time: placing with its reason, writes that retry, restore, provisioning's
budget, loss, the Lease in every state. Its release, its delete guard and its table:
test_workspace_teardown.py."""

from __future__ import annotations

from typing import Any

import pytest

from jr2_actors.values.constants import ATTACH_ATTEMPTS, FORBIDDEN_GRACE_SECONDS
from jr2_actors.watch.deliveries import SandboxGone, WatchFailed
from jr2_actors.watch.identity import Foreign, SandboxKey
from jr2_actors.watch.stream import Termination
from jr2_actors.workspace.messages import (
    Applied,
    ApplySandbox,
    ApplySecret,
    Attach,
    Attached,
    AttachFailed,
    Begin,
    DeleteSandbox,
    DropLease,
    Faulted,
    HarnessEnded,
    HoldLease,
    LastEndSeen,
    LeaseRefused,
    Lost,
    NameTaken,
    PlacedLine,
    PlacingLine,
    Release,
    Restored,
    RestoredWait,
    Running,
    Saved,
    SecretWritten,
    Unknown,
    WaitEndedLine,
    WaitEntry,
    Waiting,
    WatchStopped,
    WorkspaceTick,
    WriteFailed,
)
from tests.support.workspace_drive import (
    KEY,
    PENDING,
    QUOTA,
    READY,
    SCHEDULED,
    SECRET,
    UID,
    UNSCHEDULABLE,
    WALL0,
    Drive,
    recorded,
    seen,
)


def test_the_first_write_creates_then_the_secret_is_written_owned_by_the_uid() -> None:
    d = Drive()
    step = d(Begin())
    assert step.actions == (ApplySandbox(create=True),)
    step = d(Applied(UID), at=0.5)
    assert step.actions == (ApplySecret(UID), d.of(HoldLease)[0])  # and the Lease goes to the lane
    assert d.of(Saved)[-1].restored == Restored(placed=False, uid=UID)


def test_the_lease_goes_to_the_lane_once_the_write_is_back_its_first_renewal_in_the_first_fifth() -> None:
    d = Drive()
    step = d(Begin())
    assert not d.of(HoldLease)  # nothing written yet: no Lease to renew
    step = d(Applied(UID), at=1.0)
    (hold,) = d.of(HoldLease)
    assert hold.uid == UID and hold.first_due <= 60 and hold.interval == 300
    assert hold in step.actions and d.deadline() is None  # the lane owns the due times: no tick of the core's


def test_the_lease_is_held_in_every_live_state_and_taken_back_before_the_delete() -> None:
    """ADR-0064: from the write to the teardown, in every live state (the lane renews it every 5 min ±20 %:
    test_renewal_lane.py); taken back once, ahead of the delete in the same step."""
    d = Drive(budget=10**6)
    d.written()
    for at, event in [(1_000.0, UNSCHEDULABLE), (3_000.0, SCHEDULED), (5_000.0, READY), (7_000.0, Attached({})),
                      (9_000.0, READY)]:
        d(event, at=at)
        assert not d.of(DropLease), d.state
    assert d.state == "running" and d.of(HoldLease) == [HoldLease(UID, d.of(HoldLease)[0].first_due, 300)]
    step = d(Release("teardown"), at=10_000.0)
    assert step.actions == (DropLease(), DeleteSandbox(UID))


@pytest.mark.parametrize("status", [404, 409, 422])
def test_a_renewal_refused_for_good_ends_the_lease_on_that_uid_and_says_no_loss(status: int) -> None:
    """The lane tells only what the Workspace must act on: a Lease that cannot land is taken back; whether
    the Sandbox is lost the watch says (ADR-0063), so the Workspace stays where it is."""
    d = Drive()
    d.written()
    step = d(LeaseRefused(UID, status), at=30.0)
    assert step.actions == (DropLease(),) and d.state == "placing" and not d.of(Lost)
    d(LeaseRefused("uid-old", status), at=31.0)  # not this Lease's: nothing
    assert len(d.of(DropLease)) == 1
    d(Applied("uid-2"), at=40.0)  # written again under another uid: a Lease on it, first renewal soon
    hold = d.of(HoldLease)[-1]
    assert hold.uid == "uid-2" and 40.0 <= hold.first_due <= 100.0


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
    assert step.actions == (ApplySandbox(create=False), d.of(HoldLease)[0])  # its uid is known: its Lease too
    assert d.state == "placing"


def test_a_restored_workspace_that_had_placed_writes_nothing_but_its_lease_before_the_first_list() -> None:
    d = Drive()
    step = d(Begin(Restored(placed=True, uid=UID)))
    (hold,) = d.of(HoldLease)
    assert step.actions == (hold,) and hold.first_due <= 60 and d.state == "reconciling"
    d.until(10_000.0)  # a watch slow to list must not let the idle GC reap it: the Lease goes on, by uid
    assert [h.uid for h in d.of(HoldLease)] == [UID] and not d.of(DropLease)
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
        step = d(WorkspaceTick(), at=deadline)
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
        d(WorkspaceTick(), at=deadline)
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
    step = d(WorkspaceTick(), at=deadline)
    assert ApplySecret(UID) in step.actions
    d(SecretWritten(), at=deadline + 1)


def test_a_name_held_by_another_runs_workspace_is_a_named_fault_and_never_deleted() -> None:
    d = Drive()
    d(Begin())
    d(NameTaken("ws-x", SandboxKey("run-2", "F-1")), at=1.0)
    (fault,) = d.of(Faulted)
    assert "taken by another run's Workspace" in fault.reason and "ws-x belongs to run-2/F-1" in fault.reason
    d.until(10_000.0)
    assert not d.of(HoldLease) and not d.of(Attach)
    d(Release("run-faulted"), at=10_001.0)
    assert d.of(DeleteSandbox) == [DeleteSandbox("")]  # by name and key only: the shell checks it is ours


def test_a_taken_name_is_adopted_only_when_it_is_this_workspaces_own_and_a_foreign_one_is_a_collision() -> None:
    for holder in (SandboxKey("run-1", "F-1"), None):  # an earlier write's answer was lost; or gone since
        d = Drive(run_id="run-1")
        d(Begin())
        assert d(NameTaken("ws-x", holder), at=1.0).actions == (ApplySandbox(create=False),)
        assert d.state == "placing" and not d.of(Faulted)
    d = Drive(run_id="run-1")
    d(Begin())
    d(NameTaken("ws-x", Foreign("ws-x", "u-9", "no jr2.dev/run-id annotation")), at=1.0)
    assert d.state == "faulted" and "taken by another run's Workspace" in d.of(Faulted)[0].reason


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


def test_an_attach_no_harness_answered_is_tried_again_and_then_runs() -> None:
    d = Drive()
    d.written()
    d(READY, at=1)
    d(AttachFailed("Harness answered 503: no Harness serves here", unavailable=True), at=2)
    assert d.state == "attaching" and not d.of(Faulted)
    due = d.deadline()
    assert due is not None and due > 2
    d.out.clear()
    d(WorkspaceTick(), at=due)
    assert d.of(Attach) == [Attach("http://h")]
    d(Attached({}), at=due + 1)
    assert d.state == "running"


def test_an_attach_racing_an_eviction_ends_lost_never_faulted() -> None:
    # Found by the simulation (seed 184): the evicted pod's Harness answered 503 before the watch said Lost,
    # and the run ended `error` where its workflow handles `workspace.lost`.
    d = Drive()
    d.written()
    d(READY, at=1)
    d(AttachFailed("Harness answered 503: no Harness serves here (the Sandbox is not Ready)", unavailable=True), at=2)
    d(recorded("sandbox-lost-evicted.json"), at=2.1)
    assert d.of(Lost) == [Lost("F-1", "Evicted: The node was low on resource: memory.")] and not d.of(Faulted)


def test_attaches_no_harness_answers_fault_after_their_bound() -> None:
    d = Drive()
    d.written()
    d(READY, at=1)
    for _ in range(ATTACH_ATTEMPTS):
        d(AttachFailed("Harness answered 503: draining", unavailable=True), at=d.now)
        assert d.state == "attaching"
        d.until((d.deadline() or d.now) + 0.01)
    d(AttachFailed("Harness answered 503: draining", unavailable=True), at=d.now)
    assert d.of(Faulted)[0].reason == "attach: Harness answered 503: draining"


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
    d(WatchStopped(), at=1.5)
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
