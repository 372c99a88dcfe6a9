"""Runs end to end on the fake cluster through the Orchestrator facade: a wait for capacity behind another
run, a stop and a restart mid-placing, a cancel, an eviction — with the real watch, operator and Harness."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick, Say
from jr2_actors.fake.operator.core import Node
from jr2_actors.harness import briefing
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run.actor import RunActor
from jr2_actors.run.feed.hub import FeedHub
from jr2_actors.values.constants import RUN_REVIVALS
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.identity import sandbox_name
from jr2_actors.workspace.actor import WorkspaceActor
from tests.support.orchestrators import on_fake
from tests.support.probes import CRASH, crashing
from tests.support.waiting import wait_until
from tests.support.workflows import HOLD_THEN_LINGER, one_state

pytestmark = pytest.mark.slow

ONE_STATE = one_state("one")


def doc(text: str) -> Any:
    return read_document(text)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(nodes=[Node("only", 1500, 8 * 2**30)], start_seconds=0.05, long_poll=0.5,
                     bookmark_interval=None) as c:
        yield c


def feed(orch: Orchestrator, run_id: str) -> list[Any]:
    got = orch.feed(run_id, 0, 0.0)
    assert got is not None
    return got[0]


def sandboxes_created(cluster: FakeCluster) -> list[str]:
    return [r["path"] for r in cluster.requests() if r["method"] == "POST" and r["path"].endswith("/sandboxes")]


def test_the_second_run_waits_behind_the_first_with_the_schedulers_words(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.script("holder", [Say("holding"), Pick("release")])
    cluster.script("worker", [Pick("finish")])
    with on_fake(cluster, tmp_path) as orch:
        first = orch.submit(doc(HOLD_THEN_LINGER))
        wait_until(lambda: any(e.kind == "running" for e in feed(orch, first)), what="the holder running")
        second = orch.submit(doc(ONE_STATE))
        wait_until(lambda: any(e.kind == "placing" for e in feed(orch, second)), what="the second run placing")
        listing = {r["runId"]: r for r in orch.runs()}
        assert listing[second]["placing"] == ["W"] and list(listing[second])[:2] == ["runId", "placing"]
        status = orch.status(second)
        assert status is not None
        (waiting,) = status["waiting"]
        assert (waiting["child"], waiting["on"], waiting["reason"]) == ("W", "node", "capacity")
        assert waiting["message"] == "0/1 nodes are available: 1 Insufficient cpu."
        assert orch.wait_finished(first, 30) and orch.wait_finished(second, 30)
        kinds = [e.kind for e in feed(orch, second)]
        assert kinds.count("placing") == 1 and kinds.count("placed") == 1
        final = orch.status(second)
        assert final is not None and final["status"] == "done"


def test_a_stop_mid_placing_and_a_restart_continue_the_run_with_no_second_sandbox(cluster: FakeCluster,
                                                                                 tmp_path: Path) -> None:
    cluster.script("worker", [Pick("finish")])
    blocker = cluster.client()
    blocker.create(SANDBOX, {"metadata": {"name": "blocker"}, "spec": {"podResources": {
        "requests": {"cpu": "1", "memory": "1Gi"}}}})  # takes the node: the run's Workspace must wait
    cluster.reconcile()
    cluster.requests(clear=True)
    orch = on_fake(cluster, tmp_path).start()
    run_id = orch.submit(doc(ONE_STATE))
    wait_until(lambda: any(e.kind == "placing" for e in feed(orch, run_id)), what="placing")
    orch.stop()
    assert len(sandboxes_created(cluster)) == 1
    blocker.delete(SANDBOX, "blocker")  # capacity frees while no orchestrator runs
    again = on_fake(cluster, tmp_path).start()
    try:
        assert again.wait_finished(run_id, 30)
        final = again.status(run_id)
        assert final is not None and final["status"] == "done", final
        assert len(sandboxes_created(cluster)) == 1  # the restart re-adopted it; no second Sandbox
        placed = [e for e in feed(again, run_id) if e.kind in ("placing", "placed")]
        assert [e.kind for e in placed] == ["placing", "placed"]  # the wait from before the restart ended once
    finally:
        again.stop()
        blocker.close()


def test_a_cancel_deletes_the_sandbox_that_never_ran(cluster: FakeCluster, tmp_path: Path) -> None:
    blocker = cluster.client()
    blocker.create(SANDBOX, {"metadata": {"name": "blocker"}, "spec": {"podResources": {
        "requests": {"cpu": "1", "memory": "1Gi"}}}})
    with on_fake(cluster, tmp_path) as orch:
        run_id = orch.submit(doc(ONE_STATE))
        wait_until(lambda: any(e.kind == "placing" for e in feed(orch, run_id)), what="placing")
        name = sandbox_name(run_id, "W")
        assert orch.client.get(SANDBOX, name) is not None
        orch.cancel(run_id)
        assert orch.wait_finished(run_id, 30)
        wait_until(lambda: orch.client.get(SANDBOX, name) is None, what="deleted")
        final = orch.status(run_id)
        assert final is not None and final["status"] == "cancelled"
        assert final["children"] == [{"child": "W", "phase": "deleted"}]
    blocker.close()


def test_a_workspace_actor_that_dies_during_its_teardown_still_lets_the_run_finish(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16 item 10: our bug kills the Workspace's actor while it deletes its Sandbox. The run used to wait
    for that teardown for the life of the process (its row live, `wait_finished` never true); now the death
    ends the teardown — the Sandbox is left to the idle GC — and the run finishes as it ended."""

    def bug(self: WorkspaceActor, uid: str, rv: str) -> Any:
        raise RuntimeError("our bug, mid-delete")

    monkeypatch.setattr(WorkspaceActor, "_delete", bug)
    cluster.script("worker", [Pick("finish")])
    with on_fake(cluster, tmp_path) as orch:
        run_id = orch.submit(doc(ONE_STATE))
        assert orch.wait_finished(run_id, 30), "the run waited for a teardown whose actor had died"
        final = orch.status(run_id)
        assert final is not None and final["status"] == "done" and not final.get("fault")
        assert final["children"] == [{"child": "W", "phase": "kept"}]  # not deleted: the idle GC's now
        assert orch.health() == (True, "")


def test_an_eviction_fails_a_run_that_does_not_handle_it_within_two_seconds(cluster: FakeCluster,
                                                                            tmp_path: Path) -> None:
    with on_fake(cluster, tmp_path) as orch:
        cluster.script("worker", [Say("working"), Hang()])
        run_id = orch.submit(doc(ONE_STATE.replace("on: {finish: done}", "on: {never: done}")))
        wait_until(lambda: any(e.kind == "running" for e in feed(orch, run_id)), what="running")
        evicted = time.monotonic()
        cluster.evict(sandbox_name(run_id, "W"))
        assert orch.wait_finished(run_id, 2.0), "an eviction must end the run within 2 s"
        assert time.monotonic() - evicted < 2.0
        final = orch.status(run_id)
        assert final is not None and final["status"] == "failed"
        assert final["fault"] == "Evicted: The node was low on resource: memory."


def test_the_jr2_orchestrator_fixture_runs_a_workflow_in_two_lines(jr2_orchestrator: Orchestrator,
                                                                   jr2_fake_cluster: FakeCluster) -> None:
    jr2_fake_cluster.script("worker", [Pick("finish")])
    run_id = jr2_orchestrator.submit(doc(ONE_STATE))
    assert jr2_orchestrator.wait_finished(run_id, 30)
    status = jr2_orchestrator.status(run_id)
    assert status is not None and status["status"] == "done"


def crash(orch: Orchestrator, run_id: str) -> pykka.ActorRef[Any]:
    """Kill the run's actor; answer the one that replaces it."""
    old = orch._live(run_id)
    assert old is not None
    old.tell(CRASH)
    wait_until(lambda: (ref := orch._live(run_id)) is None or (ref is not old and ref.is_alive()),
               what="the run's actor replaced")
    new = orch._live(run_id)
    assert new is not None
    return new


def test_a_run_whose_actor_dies_is_restored_from_its_row_and_finishes(cluster: FakeCluster, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jr2_actors.orchestrator.RunActor", crashing(RunActor))
    cluster.script("worker", [Hang()], [Pick("finish")])  # two Turns: the first hangs
    with on_fake(cluster, tmp_path) as orch:
        run_id = orch.submit(doc(ONE_STATE))
        # The run took the Harness's answer to the admission (and saved it): the conversation is kept.
        wait_until(lambda: (orch.status(run_id) or {}).get("turn", {}).get("phase") == "running",
                   what="the Turn admitted")
        crash(orch, run_id)
        assert orch.wait_finished(run_id, 30)
        final = orch.status(run_id)
        assert final is not None and final["status"] == "done"
        assert orch.health() == (True, "")
    again = cluster.admissions()[1]["body"]
    assert again["message"] == briefing.readmit("Work.") and again["kept"] is True  # the same Turn, re-admitted
    assert len(sandboxes_created(cluster)) == 1  # its Workspace reconciled: no second Sandbox


def test_a_run_whose_actor_keeps_dying_is_ended_in_error_and_the_orchestrator_stays_healthy(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jr2_actors.orchestrator.RunActor", crashing(RunActor))
    cluster.script("worker", [Hang()])
    with on_fake(cluster, tmp_path) as orch:
        run_id = orch.submit(doc(ONE_STATE))
        wait_until(lambda: len(cluster.admissions()) == 1, what="the Turn admitted")
        for _ in range(RUN_REVIVALS):
            crash(orch, run_id)
        orch._live(run_id).tell(CRASH)  # type: ignore[union-attr]
        assert orch.wait_finished(run_id, 30)
        final = orch.status(run_id)
        assert final is not None and final["status"] == "error"
        assert final["fault"].startswith(f"the run's actor died {RUN_REVIVALS + 1} times, last: RuntimeError")
        assert orch.health() == (True, "")
        assert orch.runs() == []
        lines = feed(orch, run_id)
        assert lines[-1].kind == "ended" and lines[-1].line.status == "error"
        ids = [e.id for e in lines]
        assert ids == sorted(set(ids))  # every revival numbered its lines after what readers held


class _DiesWhenRevived(RunActor):
    """Our bug at every revival, before the revived run makes any child: nothing of it writes."""

    def started(self) -> None:
        if self._restored:
            raise RuntimeError("our bug, at every revival")
        super().started()


def test_a_run_that_keeps_dying_while_placing_has_its_never_ran_sandbox_deleted(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jr2_actors.orchestrator.RunActor", crashing(_DiesWhenRevived))
    blocker = cluster.client()
    blocker.create(SANDBOX, {"metadata": {"name": "blocker"}, "spec": {"podResources": {
        "requests": {"cpu": "1", "memory": "1Gi"}}}})
    with on_fake(cluster, tmp_path) as orch:
        run_id = orch.submit(doc(ONE_STATE))
        # Placing is told once its create's answer is in: no write of its Sandbox is in flight now.
        wait_until(lambda: any(e.kind == "placing" for e in feed(orch, run_id)), what="placing")
        name = sandbox_name(run_id, "W")
        assert orch.client.get(SANDBOX, name) is not None
        orch._live(run_id).tell(CRASH)  # type: ignore[union-attr]  # and each of its 3 revivals dies at once
        assert orch.wait_finished(run_id, 30)
        final = orch.status(run_id)
        assert final is not None and final["status"] == "error" and "died 4 times" in final["fault"]
        assert orch.client.get(SANDBOX, name) is None  # ADR-0064: what never ran is deleted
    blocker.close()


def test_a_cancel_that_meets_a_dying_actor_reaches_its_revival(cluster: FakeCluster, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jr2_actors.orchestrator.RunActor", crashing(RunActor))
    cluster.script("worker", [Hang()])
    with on_fake(cluster, tmp_path) as orch:
        run_id = orch.submit(doc(ONE_STATE))
        wait_until(lambda: (orch.status(run_id) or {}).get("turn", {}).get("phase") == "running",
                   what="the Turn admitted")
        old = orch._live(run_id)
        assert old is not None
        old.tell(CRASH)
        orch.cancel(run_id)  # queued behind the crash (dropped with the dead inbox), or told to the dead ref
        assert orch.wait_finished(run_id, 30)
        final = orch.status(run_id)
        assert final is not None and final["status"] == "cancelled"


def test_failing_kill_list_reads_are_one_warning_per_harness(cluster: FakeCluster, tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """ADR-0062 through the run: the Turn's read and its nudge's read both fail (the list is garbage, as the
    agent's uid may write it); the run logs one line for that Harness, not one per read."""
    run_id = "r-reads-fail"
    cluster.harness(lambda core: core.set_raw_memory_kills(sandbox_name(run_id, "W"), b"\x00not json"))
    cluster.script("worker", [Say("no pick")], [Say("still no pick")])  # a Turn, then its nudge
    with caplog.at_level(logging.WARNING, logger="jr2_actors.run"), on_fake(cluster, tmp_path) as orch:
        orch.submit(doc(ONE_STATE), run_id=run_id)
        assert orch.wait_finished(run_id, 30)
        final = orch.status(run_id)
        assert final is not None and final["status"] == "failed"  # ended without a pick after its nudge
    admissions = [a for a in cluster.admissions() if a["agent"] == "worker"]
    assert len(admissions) == 2  # two admissions, so two reads before them
    lines = [r.getMessage() for r in caplog.records if "memory-kill reads from" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"run {run_id}: memory-kill reads from http") and "fail" in lines[0]


def test_a_follower_that_resumes_after_a_restart_misses_none_of_the_restored_runs_lines(
        cluster: FakeCluster, tmp_path: Path) -> None:
    """Issue 16 item 5: the Agent's words save nothing, so a restore that numbered from the last save gave
    their ids again, and a follower resuming with `Last-Event-ID` (as EventSource does) skipped those lines."""
    cluster.script("worker", [Say("one"), Say("two"), Hang()], [Say("three"), Pick("finish")])
    orch = on_fake(cluster, tmp_path).start()
    run_id = orch.submit(doc(ONE_STATE))
    wait_until(lambda: sum(e.kind == "said" for e in feed(orch, run_id)) == 2, what="the Agent said two things")
    held = feed(orch, run_id)
    last = held[-1].id  # what a follower holds when the process stops
    orch.stop()
    again = on_fake(cluster, tmp_path).start()
    try:
        assert again.wait_finished(run_id, 30)
        got = again.feed(run_id, last, 0.0)  # the follower resumes from its Last-Event-ID
        assert got is not None
        resumed = got.events
        assert [e.kind for e in resumed][-1] == "ended"
        assert {"turn", "admitted", "said", "pick"} <= {e.kind for e in resumed}  # the restored Turn, all of it
        assert not {e.id for e in resumed} & {e.id for e in held}
        every = feed(again, run_id)
        assert [e.id for e in every] == sorted({e.id for e in every})  # one line per id, increasing
    finally:
        again.stop()


def test_the_hub_holds_a_bounded_number_of_finished_feeds_and_the_row_serves_the_rest(cluster: FakeCluster,
                                                                                     tmp_path: Path) -> None:
    """Issue 16 item 10: the FeedHub forgets finished runs beyond its bound; their feed is still read, from
    the store row, until the sweep removes it."""
    cluster.script("worker", [Pick("finish")], [Pick("finish")])
    orch = on_fake(cluster, tmp_path)
    orch.feed_hub = FeedHub(finished_held=1)
    with orch:
        first = orch.submit(doc(ONE_STATE))
        assert orch.wait_finished(first, 30)
        wait_until(lambda: orch.feed_hub.read(first, 0, 0.0).finished, what="the hub told the run finished")
        from_hub = [e.id for e in feed(orch, first)]
        second = orch.submit(doc(ONE_STATE))
        assert orch.wait_finished(second, 30)
        assert [(orch.status(r) or {}).get("status") for r in (first, second)] == ["done", "done"]
        wait_until(lambda: not orch.feed_hub.known(first), what="the older finished feed forgotten")
        assert orch.feed_hub.held() == 1
        got = orch.feed(first, 0, 0.0)  # from its row now
        assert got is not None and got.finished and [e.id for e in got.events] == from_hub


def test_a_kill_listed_with_an_id_that_reads_like_a_time_mark_does_not_kill_the_run(cluster: FakeCluster,
                                                                                    tmp_path: Path) -> None:
    """Issue 16 item 3: the Agent's uid can write the kill list; a kill whose id is `at:x` became the Turn's
    mark, every read after it raised, and the run died on each revival and ended `error`."""
    cluster.script("worker", [Say("looking")], [Pick("finish")])  # the first Submission ends without a pick
    run_id = "r-atx"
    name = sandbox_name(run_id, "W")
    cluster.harness(lambda core: core._harness(name).kills.append(
        {"id": "at:x", "at": "2026-11-29T10:00:00.000Z", "agent": "", "instanceId": "", "peak": "1.1Gi",
         "limit": "2Gi", "told": []}))
    with on_fake(cluster, tmp_path) as orch:
        orch.submit(doc(ONE_STATE), run_id=run_id)
        assert orch.wait_finished(run_id, 30)
        final = orch.status(run_id)
        assert final is not None and final["status"] == "done", final
    admitted = [e for e in feed(orch, run_id) if e.kind == "admitted"]
    assert [getattr(e.line, "nudge", None) for e in admitted] == [False, True]  # the Turn, then its nudge
