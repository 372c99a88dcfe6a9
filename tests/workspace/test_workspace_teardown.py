"""WorkspaceCore's release and delete (ADR-0064: the delete guard, the retries owed), and its table."""

from __future__ import annotations

from typing import Any

import pytest

from jr2_actors.values.constants import DELETE_RETRY_BACKOFF, FORBIDDEN_GRACE_SECONDS
from jr2_actors.values.step import OffTable
from jr2_actors.watch.deliveries import SandboxGone, SandboxSeen
from jr2_actors.workspace.core import TRANSITIONS
from jr2_actors.workspace.messages import (
    Applied,
    Attached,
    Begin,
    DeleteConflict,
    Deleted,
    DeleteFailed,
    DeleteSandbox,
    Release,
    Released,
    Restored,
    WorkspaceTick,
    WriteFailed,
)
from tests.support.paths import DOCS
from tests.support.workspace_drive import KEY, READY, SCHEDULED, UID, UNSCHEDULABLE, Drive, recorded, seen


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
    d(Applied(UID, "7"), at=0.5)
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
        step = d(WorkspaceTick(), at=deadline)
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
        d(WorkspaceTick(), at=deadline)
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
    from jr2_actors.values.step import Edge
    from jr2_actors.workspace import core as workspace_core

    edge = TRANSITIONS[("placing", SandboxSeen)]
    monkeypatch.setitem(workspace_core.MACHINE.edges, ("placing", SandboxSeen),
                        Edge(frozenset({"lost", "faulted"}), edge.handler))
    d = Drive()
    d.written()
    with pytest.raises(OffTable, match="SandboxSeen in placing cannot lead to provisioning"):
        d(SCHEDULED, at=1)


def test_the_architecture_doc_carries_the_transition_table_as_the_code_has_it() -> None:

    from jr2_actors.workspace.core import transitions_markdown

    doc = (DOCS / "architecture.md").read_text()
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
    d(Applied(UID, "14"), at=0.3)  # a write again (a retried apply)
    d(Applied(UID, "12"), at=0.4)  # an older answer never moves it back (the lane's renewals: the shell's)
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


def test_the_delete_guard_is_the_cores_a_moved_version_of_its_own_sandbox_is_deleted_again() -> None:
    from jr2_actors.values.constants import DELETE_VERSION_REREADS
    from jr2_actors.watch.identity import KEEPALIVE_ANNOTATION

    def held(uid: str, rv: str, stamp: str) -> dict[str, Any]:
        return {"metadata": {"uid": uid, "resourceVersion": rv, "annotations": {KEEPALIVE_ANNOTATION: stamp}}}

    d = Drive()
    d.written()
    d(Release("teardown"), at=1.0)
    assert d.of(DeleteSandbox) == [DeleteSandbox(UID, "")]
    for n in range(DELETE_VERSION_REREADS):  # ours (its uid, our stamp), its version moved: deleted again
        step = d(DeleteConflict(UID, "409", held(UID, str(10 + n), "s-1"), ("s-1",)), at=2.0)
        assert step.actions == (DeleteSandbox(UID, str(10 + n)),)
    step = d(DeleteConflict(UID, "409", held(UID, "99", "s-1"), ("s-1",)), at=3.0)
    assert step.actions == () and d.core.deadline is not None  # still moving: the delete's backoff
    successor = Drive()
    successor.written()
    successor(Release("teardown"), at=1.0)
    successor(DeleteConflict(UID, "409", held(UID, "12", "theirs"), ("s-1",)), at=2.0)  # stamped since: not ours
    assert successor.of(Released) == [Released("F-1", deleted=False)]
    gone = Drive()
    gone.written()
    gone(Release("teardown"), at=1.0)
    gone(DeleteConflict(UID, "409", None), at=2.0)
    assert gone.of(Released) == [Released("F-1", deleted=False)]
