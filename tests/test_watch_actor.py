"""The WatchActor against the fake cluster: bursts, every fault knob, shutdown, one watch, no Pods."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.watch.actor import (
    Health,
    Register,
    SandboxGone,
    SandboxSeen,
    WatchActor,
    WatchClosed,
    WatchFailed,
    WatchHealth,
)
from jr2_actors.watch.identity import SandboxKey, annotations_for, labels_for, sandbox_name
from tests.probes import Inbox, Probe

pytestmark = pytest.mark.slow


def body(run: str, workspace: str = "F-1") -> dict[str, Any]:
    return {"metadata": {"name": sandbox_name(run, workspace), "labels": labels_for(run, "wf"),
                         "annotations": annotations_for(run, workspace)}, "spec": {"port": 8080}}


def set_phase(cluster: FakeCluster, runs: list[str], phase: str) -> None:
    def write(s: ClusterState) -> None:
        for run in runs:
            s.merge_patch(SANDBOX, "jr2", sandbox_name(run, "F-1"), {"status": {"phase": phase}}, subresource="status")
    cluster.call(write)


def create(cluster: FakeCluster, runs: list[str]) -> None:
    def write(s: ClusterState) -> None:
        for run in runs:
            s.create(SANDBOX, "jr2", body(run), now=0)
    cluster.call(write)


def last_phase(inbox: Inbox, key: SandboxKey) -> str | None:
    seen = [m for m in inbox.snapshot() if isinstance(m, SandboxSeen) and m.key == key]
    return seen[-1].sandbox.phase if seen else None


@pytest.fixture
def watcher(cluster: FakeCluster) -> Iterator[tuple[pykka.ActorRef[Any], Inbox]]:
    inbox = Inbox()
    ref = WatchActor.start(cluster.client(), stall_bound=1.0, seed=3)
    yield ref, inbox
    if ref.is_alive():
        ref.stop(block=True, timeout=5)


def register(ref: pykka.ActorRef[Any], inbox: Inbox, runs: list[str]) -> None:
    for run in runs:
        ref.tell(Register(SandboxKey(run, "F-1"), inbox))


def all_phases(inbox: Inbox, runs: list[str], phase: str) -> None:
    def ok(messages: list[Any]) -> bool:
        last: dict[SandboxKey, str] = {}
        for m in messages:
            if isinstance(m, SandboxSeen):
                last[m.key] = m.sandbox.phase
        return all(last.get(SandboxKey(r, "F-1")) == phase for r in runs)
    inbox.wait_for(ok, timeout=30, what=f"every Sandbox {phase}")


def test_two_hundred_sandboxes_reach_two_hundred_registered_actors(cluster: FakeCluster,
                                                                    watcher: tuple[pykka.ActorRef[Any], Inbox]) -> None:
    ref, _ = watcher
    runs = [f"run-{i:03d}" for i in range(200)]
    inboxes = {run: Inbox() for run in runs}
    probes = [Probe.start(inboxes[run]) for run in runs]
    for run, probe in zip(runs, probes, strict=True):
        ref.tell(Register(SandboxKey(run, "F-1"), probe))
    create(cluster, runs)
    for run in runs:
        inboxes[run].wait_for(lambda ms: any(isinstance(m, SandboxSeen) for m in ms), timeout=30, what=run)
    for run in runs:
        seen = [m for m in inboxes[run].snapshot() if isinstance(m, SandboxSeen)]
        assert len(seen) == 1
        assert seen[0].key == SandboxKey(run, "F-1")  # each got only its own


@pytest.mark.parametrize("fault", ["drop", "stall", "compact", "restart"])
def test_faults_lose_nothing(cluster: FakeCluster, watcher: tuple[pykka.ActorRef[Any], Inbox], fault: str) -> None:
    ref, inbox = watcher
    runs = [f"run-{i}" for i in range(5)]
    register(ref, inbox, runs)
    create(cluster, runs[:3])
    all_phases(inbox, runs[:3], "")
    from tests.waiting import wait_until

    wait_until(lambda: cluster.watch_stats()["open"] == 1)
    if fault == "drop":
        cluster.end_watches()
    elif fault == "stall":
        cluster.stall_watches()
    elif fault == "compact":
        create(cluster, runs[3:])
        cluster.compact()
        cluster.end_watches()
    elif fault == "restart":
        cluster.restart()
    create(cluster, [r for r in runs[3:] if fault != "compact"])
    set_phase(cluster, runs, "Ready")
    all_phases(inbox, runs, "Ready")
    cluster.call(lambda s: s.delete(SANDBOX, "jr2", sandbox_name("run-0", "F-1")))
    inbox.wait_for(lambda ms: any(isinstance(m, SandboxGone) for m in ms), timeout=30, what="gone")
    assert not any(isinstance(m, WatchFailed) for m in inbox.snapshot())
    assert cluster.watch_stats()["maxOpen"] == 1


def test_shutdown_from_mid_stall_is_prompt_and_leaves_no_thread(cluster: FakeCluster) -> None:
    before = {t.ident for t in threading.enumerate()}
    inbox = Inbox()
    ref = WatchActor.start(cluster.client(), stall_bound=60.0)
    key = SandboxKey("run-x", "F-1")
    ref.tell(Register(key, inbox))
    from tests.waiting import wait_until

    wait_until(lambda: cluster.watch_stats()["open"] == 1)
    cluster.stall_watches()
    ref.stop(block=True, timeout=2.0)  # raises pykka.Timeout past the 2 s budget
    assert inbox.snapshot()[-1] == WatchClosed(key)
    wait_until(lambda: not [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("jr2-")])
    with pytest.raises(pykka.ActorDeadError):
        ref.tell(Register(SandboxKey("run-y", "F-1"), inbox))


def test_one_watch_at_a_time_and_never_a_pod(cluster: FakeCluster, watcher: tuple[pykka.ActorRef[Any], Inbox]) -> None:
    ref, inbox = watcher
    runs = ["run-a", "run-b"]
    register(ref, inbox, runs)
    create(cluster, runs)
    from tests.waiting import wait_until

    for _ in range(3):
        wait_until(lambda: cluster.watch_stats()["open"] == 1)
        opened = cluster.watch_stats()["opened"]
        cluster.end_watches()
        wait_until(lambda n=opened: cluster.watch_stats()["opened"] > n)  # type: ignore[misc]
    set_phase(cluster, runs, "Ready")
    all_phases(inbox, runs, "Ready")
    health = ref.ask(Health(), timeout=10)
    assert isinstance(health, WatchHealth)
    assert health.up and health.waiters == 2 and health.resource_version is not None
    log = cluster.requests()
    assert cluster.watch_stats()["maxOpen"] == 1
    assert not [r for r in log if "/pods" in r["path"]]
    lists = [r for r in log if not r["watch"] and r["method"] == "GET"]
    assert all(r["query"].get("labelSelector") == "jr2.dev/run" for r in lists)


def test_a_failing_api_ends_in_a_classified_failure_for_every_waiter(cluster: FakeCluster) -> None:
    inbox = Inbox()
    ref = WatchActor.start(cluster.client(), stall_bound=1.0, max_failures=3, seed=1)
    try:
        key = SandboxKey("run-z", "F-1")
        ref.tell(Register(key, inbox))
        from tests.waiting import wait_until

        wait_until(lambda: cluster.watch_stats()["opened"] >= 1)
        cluster.fail_next(50, 403)
        cluster.end_watches()
        inbox.wait_for(lambda ms: any(isinstance(m, WatchFailed) for m in ms), timeout=30, what="failure")
        (failed,) = [m for m in inbox.snapshot() if isinstance(m, WatchFailed)]
        assert "403" in failed.message and "injected 403" in failed.message
        health = ref.ask(Health(), timeout=10)
        assert isinstance(health, WatchHealth)
        assert (health.phase, health.up, health.waiters) == ("stopped", False, 1)
    finally:
        ref.stop(block=True, timeout=5)
