"""Issue 18 item 7: every Lease renewal of the process leaves from one thread (`workspace/renewals.py`), and a
Workspace's writes still leave one at a time and in order (ADR-0063/0064): a renewal on the lane never
overtakes the write before it, and a delete waits for the renewal before it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import Kind
from jr2_actors.shell import Timers
from jr2_actors.values.workflow import WorkspaceDef
from jr2_actors.watch.actor import WatchActor
from jr2_actors.workspace.actor import WorkspaceActor
from jr2_actors.workspace.manifest import WorkspaceSpec
from jr2_actors.workspace.messages import Release, Released
from jr2_actors.workspace.renewals import RenewalLane
from tests.support.probes import Inbox
from tests.support.waiting import wait_until

LANE = "jr2-test-renewals"


def test_a_lane_of_one_thread_runs_its_jobs_in_order_and_outlives_a_job_that_raises(
        caplog: pytest.LogCaptureFixture) -> None:
    lane = RenewalLane(name=LANE, threads=1)
    ran: list[tuple[int, str]] = []
    gate, done = threading.Event(), threading.Event()

    def job(i: int) -> None:
        if i == 0:
            gate.wait(10)  # the rest queue behind it, and go back to back once it returns
        if i == 3:
            raise RuntimeError("our bug")
        ran.append((i, threading.current_thread().name))
        if i == 9:
            done.set()

    try:
        for i in range(10):
            lane.submit(lambda i=i: job(i))  # type: ignore[misc]
        gate.set()
        assert done.wait(10)
    finally:
        lane.shutdown()
    assert ran == [(i, f"{LANE}-0") for i in range(10) if i != 3]
    assert "failed unexpectedly" in caplog.text


def test_a_shut_down_lane_drops_what_is_queued_and_refuses_more() -> None:
    lane = RenewalLane(name=LANE, threads=1)
    gate, started = threading.Event(), threading.Event()
    ran: list[int] = []

    def first() -> None:
        started.set()
        gate.wait(10)
        ran.append(1)

    lane.submit(first)
    assert started.wait(10)
    lane.submit(lambda: ran.append(2))
    stopper = threading.Thread(target=lane.shutdown)
    stopper.start()
    gate.set()
    stopper.join(10)
    assert not stopper.is_alive() and ran == [1]  # the one running ended first; the queued one was dropped
    with pytest.raises(RuntimeError, match="shut down"):
        lane.submit(lambda: None)


class Recording(KubeClient):
    """The real client, noting each write's verb and thread; a renewal waits on `hold` while it is cleared."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.hold = threading.Event()
        self.hold.set()
        self.holding = threading.Event()

    def _note(self, verb: str) -> None:
        with self.lock:
            self.calls.append((verb, threading.current_thread().name))

    def verbs(self) -> list[str]:
        with self.lock:
            return [verb for verb, _ in self.calls]

    def create(self, kind: Kind, body: Any, namespace: str | None = None) -> dict[str, Any]:
        self._note("create")
        return super().create(kind, body, namespace)

    def apply(self, kind: Kind, name: str, body: Any, namespace: str | None = None) -> dict[str, Any]:
        self._note("apply")
        return super().apply(kind, name, body, namespace)

    def merge_patch(self, kind: Kind, name: str, patch: Any, namespace: str | None = None, *,
                    status: bool = False) -> dict[str, Any]:
        if not self.hold.is_set():
            self.holding.set()
            self.hold.wait(10)
        self._note("renew")
        return super().merge_patch(kind, name, patch, namespace, status=status)

    def delete(self, kind: Kind, name: str, namespace: str | None = None, *, uid: str | None = None,
               resource_version: str | None = None) -> bool:
        self._note("delete")
        return super().delete(kind, name, namespace, uid=uid, resource_version=resource_version)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(nodes=[Node("n1", 1000, 4 * 2**30)], start_seconds=0.05, long_poll=0.2,
                     bookmark_interval=None) as c:
        yield c


def test_the_lanes_threads_take_the_renewals_waiting_together() -> None:
    """A slow renewal does not hold the ones behind it for the whole lane: three run at once on three threads."""
    lane = RenewalLane(name=LANE, threads=3)
    three = threading.Barrier(3, timeout=10)  # each job waits for the other two: it passes only if all three run
    passed: list[str] = []

    def job() -> None:
        three.wait()
        passed.append(threading.current_thread().name)

    try:
        for _ in range(3):
            lane.submit(job)
        wait_until(lambda: len(passed) == 3, what="three renewals running at once")
    finally:
        lane.shutdown()
    assert len(set(passed)) == 3 and not three.broken


@pytest.mark.slow
def test_renewals_leave_from_the_lane_in_their_turn_and_a_delete_waits_for_the_one_before_it(
        cluster: FakeCluster) -> None:
    client = Recording(cluster.access())
    watch = WatchActor.start(client, stall_bound=10)
    pool, lane, timers, inbox = ThreadPoolExecutor(4, thread_name_prefix="jr2-test-kube"), RenewalLane(name=LANE), \
        Timers(name="jr2-test-timers"), Inbox()
    spec = WorkspaceSpec("run-lane", "wf", WorkspaceDef("F-1", cpu="100m", memory="256Mi"), image="i")
    ref = WorkspaceActor.start(spec, client=client, watch=watch, parent=inbox, signing_key=cluster.signing_key,
                               kube_pool=pool, attach_pool=pool, timers=timers, seed=3, renewals=lane,
                               lease_interval=0.3)
    try:
        wait_until(lambda: client.verbs().count("renew") >= 3, what="three renewals")
        client.hold.clear()  # the next renewal is held on the lane: the delete after it must wait
        assert client.holding.wait(10)
        ref.tell(Release("teardown"))
        wait_until(lambda: ref.actor_inbox.empty(), what="the release taken")
        assert "delete" not in client.verbs()  # not while the renewal before it is out
        client.hold.set()
        inbox.wait_for(lambda ms: any(isinstance(m, Released) for m in ms), what="Released")
    finally:
        client.hold.set()
        ref.stop(block=True, timeout=10)
        watch.stop(block=True, timeout=10)
        pool.shutdown(wait=True)
        lane.shutdown()
        timers.stop()
        client.close()
    with client.lock:
        calls = list(client.calls)
    verbs = [verb for verb, _ in calls]
    assert verbs[:2] == ["create", "apply"] and verbs[-1] == "delete"  # the Sandbox, its Secret ... the delete
    assert verbs.index("delete") > max(i for i, v in enumerate(verbs) if v == "renew")
    assert all(thread.startswith(LANE) for verb, thread in calls if verb == "renew")
    assert all(thread.startswith("jr2-test-kube") for verb, thread in calls if verb != "renew")
    logging.getLogger(__name__).debug("calls: %s", calls)
