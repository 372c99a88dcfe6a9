"""The WatchActor against the fake cluster: bursts, every fault knob, shutdown, one watch, no Pods, a
failing API it outlives, a key that changes hands, and surprises on its I/O thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.client import KubeClient, ListResult
from jr2_actors.kube.frames import Decoded
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.kube.watch_stream import WatchStream
from jr2_actors.values.backoff import Backoff
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.deliveries import SandboxGone, SandboxSeen, WatchFailed
from jr2_actors.watch.identity import SandboxKey, sandbox_name
from jr2_actors.watch.messages import Health, Register, Unregister, WatchClosed, WatchHealth, WatchReport
from jr2_actors.watch.stream import Terminated
from tests.support.probes import Inbox, Probe
from tests.support.sandboxes import create
from tests.support.waiting import wait_until

FAST = Backoff(initial=0.01, cap=0.05, immediate_first=True)  # the schedule's shape, in milliseconds

pytestmark = pytest.mark.slow


def set_phase(cluster: FakeCluster, runs: list[str], phase: str) -> None:
    def write(s: ClusterState) -> None:
        for run in runs:
            s.merge_patch(SANDBOX, "jr2", sandbox_name(run, "F-1"), {"status": {"phase": phase}}, subresource="status")
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


def health(ref: pykka.ActorRef[Any]) -> WatchHealth:
    answer = ref.ask(Health(), timeout=10)
    assert isinstance(answer, WatchHealth)
    return answer


def test_a_failing_api_tells_every_waiter_once_and_the_watch_comes_back(cluster: FakeCluster) -> None:
    inbox = Inbox()
    ref = WatchActor.start(cluster.client(), stall_bound=1.0, max_failures=3, seed=1, backoff=FAST)
    try:
        key = SandboxKey("run-z", "F-1")
        ref.tell(Register(key, inbox))
        create(cluster, ["run-z"])
        all_phases(inbox, ["run-z"], "")
        wait_until(lambda: cluster.watch_stats()["open"] == 1)
        cluster.fail_next(8, 403)  # 3 reach the bound; the loop goes on re-listing through the other 5
        cluster.end_watches()
        inbox.wait_for(lambda ms: any(isinstance(m, WatchFailed) for m in ms), timeout=30, what="failure")
        set_phase(cluster, ["run-z"], "Ready")  # a change the blind watch cannot see
        all_phases(inbox, ["run-z"], "Ready")  # the first list that works reconciles
        (failed,) = [m for m in inbox.snapshot() if isinstance(m, WatchFailed)]
        assert "403" in failed.message and "injected 403" in failed.message
        wait_until(lambda: health(ref).up, what="up again")
        assert health(ref).waiters == 1
    finally:
        ref.stop(block=True, timeout=5)


def test_while_blind_health_is_down_but_the_loop_goes_on(cluster: FakeCluster) -> None:
    ref = WatchActor.start(cluster.client(), stall_bound=1.0, max_failures=2, seed=1, backoff=FAST)
    try:
        wait_until(lambda: cluster.watch_stats()["open"] == 1)
        cluster.fail_next(10_000, 503)
        cluster.end_watches()
        wait_until(lambda: not health(ref).up, what="degraded")
        before = len(cluster.requests())
        wait_until(lambda: len(cluster.requests()) >= before + 3, what="more re-lists")
        assert health(ref).phase in ("listing", "waiting")
        assert all(not r["watch"] for r in cluster.requests()[before:])  # re-lists, never a resume
    finally:
        ref.stop(block=True, timeout=5)


def test_an_unregister_from_a_former_holder_never_silences_its_successor(
        cluster: FakeCluster, watcher: tuple[pykka.ActorRef[Any], Inbox]) -> None:
    ref, _ = watcher
    key = SandboxKey("run-s", "F-1")
    predecessor, successor = Inbox(), Inbox()
    ref.tell(Register(key, predecessor))
    ref.tell(Register(key, successor))  # the successor starts before its predecessor's cleanup ran
    ref.tell(Unregister(key, predecessor))
    create(cluster, ["run-s"])
    all_phases(successor, ["run-s"], "")
    assert health(ref).waiters == 1
    assert predecessor.snapshot() == []
    ref.tell(Unregister(key, successor))
    wait_until(lambda: health(ref).waiters == 0)


def test_a_successor_is_not_handed_its_predecessors_end(cluster: FakeCluster,
                                                        watcher: tuple[pykka.ActorRef[Any], Inbox]) -> None:
    """ADR-0064: a state re-entered places the same name again. The predecessor's Sandbox was deleted
    (with a delay: the watch saw it go); the successor registers, then its apply creates a new one."""
    ref, _ = watcher
    key = SandboxKey("run-t", "F-1")
    predecessor, successor = Inbox(), Inbox()
    ref.tell(Register(key, predecessor))
    create(cluster, ["run-t"])
    all_phases(predecessor, ["run-t"], "")
    cluster.call(lambda s: s.delete(SANDBOX, "jr2", sandbox_name("run-t", "F-1")))
    predecessor.wait_for(lambda ms: any(isinstance(m, SandboxGone) for m in ms), what="the predecessor's end")
    ref.tell(Register(key, successor))
    ref.tell(Unregister(key, predecessor))  # its cleanup, after the successor registered
    create(cluster, ["run-t"])
    all_phases(successor, ["run-t"], "")
    set_phase(cluster, ["run-t"], "Ready")
    all_phases(successor, ["run-t"], "Ready")
    assert not any(isinstance(m, SandboxGone) for m in successor.snapshot())
    (new,) = {m.sandbox.uid for m in successor.snapshot() if isinstance(m, SandboxSeen)}
    (old,) = {m.sandbox.uid for m in predecessor.snapshot() if isinstance(m, SandboxSeen)}
    assert new != old
    assert health(ref).waiters == 1


class _Surprise(Exception):
    """Not an error the client raises on purpose: a bug, ours or a library's."""


class SurprisingClient(KubeClient):
    """The fake cluster's client, whose first list and first watch raise what nobody expects."""

    list_surprises = 1
    read_surprises = 1

    def list(self, *args: Any, **kwargs: Any) -> ListResult:
        if self.list_surprises:
            self.list_surprises -= 1
            raise _Surprise("a bug on the list path")
        return super().list(*args, **kwargs)

    def watch(self, *args: Any, **kwargs: Any) -> WatchStream:
        stream = super().watch(*args, **kwargs)
        if not self.read_surprises:
            return stream
        self.read_surprises -= 1
        return _Exploding(stream)  # type: ignore[return-value]


class _Exploding:
    def __init__(self, stream: WatchStream) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[Decoded]:
        self._stream.close()
        raise _Surprise("a bug while reading")

    def ready(self) -> bool:
        return False

    def close(self) -> None:
        self._stream.close()


def test_the_io_thread_reports_a_surprise_as_a_transport_failure_and_goes_on(cluster: FakeCluster) -> None:
    tap = Inbox()
    ref = WatchActor.start(SurprisingClient(cluster.access()), stall_bound=5.0, seed=1, backoff=FAST, tap=tap)
    try:
        def terminations(messages: list[Any]) -> list[Terminated]:
            return [m.report for m in messages if isinstance(m, WatchReport) and isinstance(m.report, Terminated)]

        tap.wait_for(lambda ms: len(terminations(ms)) == 2, what="both surprises reported")
        create(cluster, ["run-u"])
        set_phase(cluster, ["run-u"], "Ready")
        all_phases(tap, ["run-u"], "Ready")  # the loop went on
        first, second = terminations(tap.snapshot())
        assert (first.termination.value, first.action, first.detail) == (
            "transport", "relist", "unexpected _Surprise: a bug on the list path")
        assert (second.termination.value, second.action, second.detail) == (
            "transport", "resume", "unexpected _Surprise: a bug while reading")
        assert health(ref).up
    finally:
        ref.stop(block=True, timeout=5)


# -- issue 18: the frame is stepped where it is read; a Workspace's own renewal is not told back ----------

class ThreadNoting(Inbox):
    """An Inbox that notes which thread told it each message."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def tell(self, message: Any) -> None:
        self.threads.append(threading.current_thread().name)
        super().tell(message)


def test_a_frame_is_stepped_and_delivered_on_the_thread_that_read_it(cluster: FakeCluster) -> None:
    recipient = ThreadNoting()
    ref = WatchActor.start(cluster.client(), stall_bound=5.0)
    try:
        ref.tell(Register(SandboxKey("run-t", "F-1"), recipient))
        wait_until(lambda: cluster.watch_stats()["open"] == 1, what="the watch open")
        create(cluster, ["run-t"])
        set_phase(cluster, ["run-t"], "Ready")
        all_phases(recipient, ["run-t"], "Ready")
        # One thread woken per event (the read), not the reader and then the actor.
        assert recipient.threads == ["jr2-watch-io", "jr2-watch-io"]
    finally:
        ref.stop(block=True, timeout=5)


class _StepBug(WatchActor):
    def _step(self, event: Any) -> None:
        from jr2_actors.watch import stream as core

        if isinstance(event, core.FrameReceived):
            raise RuntimeError("our bug, on the I/O thread")
        super()._step(event)


def test_a_step_that_fails_on_the_io_thread_kills_the_actor_which_says_so(cluster: FakeCluster) -> None:
    from jr2_actors.shell import ActorFault

    parent = Inbox()
    ref = _StepBug.start(cluster.client(), stall_bound=5.0, parent=parent)
    wait_until(lambda: cluster.watch_stats()["open"] == 1, what="the watch open")
    create(cluster, ["run-x"])
    parent.wait_for(lambda ms: any(isinstance(m, ActorFault) for m in ms), what="the WatchActor's fault")
    (fault,) = [m for m in parent.snapshot() if isinstance(m, ActorFault)]
    assert fault.kind == "_StepBug" and "our bug, on the I/O thread" in fault.error
    wait_until(lambda: not ref.is_alive(), what="the WatchActor stopped")
    wait_until(lambda: not any(t.name == "jr2-watch-io" for t in threading.enumerate()), what="its I/O thread ended")


def test_a_renewal_the_lane_noted_is_not_told_back_and_the_next_change_is(cluster: FakeCluster) -> None:
    from jr2_actors.watch.identity import KEEPALIVE_ANNOTATION
    from jr2_actors.watch.messages import OwnStamps

    stamps, inbox = OwnStamps(), Inbox()
    ref = WatchActor.start(cluster.client(), stall_bound=1.0, seed=3, own_stamps=stamps)
    key = SandboxKey("run-k", "F-1")
    try:
        register(ref, inbox, ["run-k"])
        create(cluster, ["run-k"])
        set_phase(cluster, ["run-k"], "Ready")
        all_phases(inbox, ["run-k"], "Ready")
        stamp = "2026-12-01T23:00:00.000Z"
        stamps.note(key, stamp)  # what the renewal lane does before its PATCH leaves: no message to the watch
        client = cluster.client()
        own = client.merge_patch(SANDBOX, sandbox_name("run-k", "F-1"),
                                 {"metadata": {"annotations": {KEEPALIVE_ANNOTATION: stamp}}})
        set_phase(cluster, ["run-k"], "Lost")
        all_phases(inbox, ["run-k"], "Lost")
        seen = [m.sandbox for m in inbox.snapshot() if isinstance(m, SandboxSeen) and m.key == key]
        assert own["metadata"]["resourceVersion"] not in [s.resource_version for s in seen]
        assert [s.phase for s in seen].count("Ready") == 1  # the renewal at Ready was the Workspace's own
    finally:
        ref.stop(block=True, timeout=5)
