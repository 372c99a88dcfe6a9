"""WorkspaceActor on the fake cluster: a wait for capacity with its reason, placement, attach, the Lease,
loss, and delete-what-never-ran — through the real WatchActor, operator and Harness."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pykka
import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SANDBOX, SECRET
from jr2_actors.shell import Timers
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.constants import DELETE_RETRY_BACKOFF
from jr2_actors.values.timefmt import parse_rfc3339
from jr2_actors.values.workflow import RepoSlot, WorkspaceDef
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.identity import KEEPALIVE_ANNOTATION
from jr2_actors.workspace.actor import WorkspaceActor
from jr2_actors.workspace.manifest import WorkspaceSpec, sandbox_body
from jr2_actors.workspace.messages import (
    Faulted,
    Lost,
    Phase,
    PlacedLine,
    PlacingLine,
    Release,
    Released,
    Restored,
    Running,
    Waiting,
)
from tests.support.probes import Inbox
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow
WALL0 = 1_790_000_000.0


class World:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.client = cluster.client()
        self.watch = WatchActor.start(self.client, stall_bound=10)
        self.pool = ThreadPoolExecutor(4, thread_name_prefix="jr2-ws-io")
        self.attach_pool = ThreadPoolExecutor(2, thread_name_prefix="jr2-ws-attach")
        self.timers = Timers(name="jr2-test-shared-timers")  # every Workspace here shares one timer thread

    def start(self, run: str, inbox: Inbox, **kw: Any) -> tuple[WorkspaceSpec, pykka.ActorRef[Any]]:
        definition = WorkspaceDef("F-1", cpu="1", memory="1Gi", branch="feat/x",
                                  repos=(RepoSlot("app", "https://example.test/app.git", "main"),))
        spec = WorkspaceSpec(run_id=run, workflow="wf", definition=definition, image="jr2-sandbox:dev")
        ref = WorkspaceActor.start(spec, client=self.client, watch=self.watch, parent=inbox,
                                   signing_key=self.cluster.signing_key, kube_pool=self.pool,
                                   attach_pool=self.attach_pool, timers=self.timers, seed=1,
                                   **kw)
        return spec, ref

    def close(self) -> None:
        self.watch.stop(block=True, timeout=10)
        self.pool.shutdown(wait=True)
        self.attach_pool.shutdown(wait=True)
        self.timers.stop()


@pytest.fixture
def world() -> Iterator[World]:
    with FakeCluster(nodes=[Node("n1", 1000, 4 * 2**30)], start_seconds=0.05, long_poll=0.2) as cluster:
        w = World(cluster)
        yield w
        w.close()


def kinds(inbox: Inbox, kind: type) -> list[Any]:
    return [m for m in inbox.snapshot() if isinstance(m, kind)]


class Settle:
    """On a virtual clock, with one pool thread: `settle()` returns once whatever came due has been done —
    the timers fired it (a marker fires after every due timer), the actor took it (an ask queues behind),
    and its call left (the one pool thread drained)."""

    def __init__(self, clock: VirtualClock, timers: Timers, ref: pykka.ActorRef[Any],
                 pool: ThreadPoolExecutor) -> None:
        self.clock, self.timers, self.ref, self.pool = clock, timers, ref, pool

    def __call__(self) -> None:
        fired = threading.Event()
        self.timers.schedule(self.clock.monotonic(), fired.set)
        self.timers.poke()
        assert fired.wait(10)
        if not self.ref.is_alive():
            return
        with contextlib.suppress(pykka.ActorDeadError):
            self.ref.ask("settle", timeout=10)  # an unknown message, answered None once all before it are done
            self.pool.submit(lambda: None).result(timeout=10)
            self.ref.ask("settle", timeout=10)  # the call's answer, told back, is taken too


def test_a_workspace_waits_for_capacity_visibly_then_runs(world: World) -> None:
    a_inbox, b_inbox = Inbox(), Inbox()
    a_spec, a_ref = world.start("run-a", a_inbox)
    a_inbox.wait_for(lambda ms: any(isinstance(m, Running) for m in ms), what="A running")
    (running,) = kinds(a_inbox, Running)
    assert running.repos == {"app": "/work/app/feat-x"}
    secret = world.client.get(SECRET, f"{a_spec.name}-token")
    sandbox = world.client.get(SANDBOX, a_spec.name)
    assert secret is not None and sandbox is not None
    assert secret["metadata"]["ownerReferences"][0]["uid"] == sandbox["metadata"]["uid"]

    _, b_ref = world.start("run-b", b_inbox)
    b_inbox.wait_for(lambda ms: any(isinstance(m, PlacingLine) for m in ms), what="B placing")
    (placing,) = kinds(b_inbox, PlacingLine)
    assert (placing.on, placing.message) == ("node", "0/1 nodes are available: 1 Insufficient cpu.")
    assert kinds(b_inbox, Waiting)[0].entry is not None

    a_ref.tell(Release("teardown"))  # A is torn down: its node frees, B is placed
    b_inbox.wait_for(lambda ms: any(isinstance(m, Running) for m in ms), what="B running")
    placed = kinds(b_inbox, PlacedLine)
    assert len(placed) == 1 and placed[0].after_ms >= 0
    assert kinds(b_inbox, Waiting)[-1].entry is None
    wait_until(lambda: world.client.get(SANDBOX, a_spec.name) is None, what="A deleted")
    assert world.client.get(SECRET, f"{a_spec.name}-token") is None  # collected with its Sandbox
    wait_until(lambda: not a_ref.is_alive(), what="A stopped")
    b_ref.stop(block=True, timeout=10)


def test_the_lease_is_renewed_from_the_write_every_five_minutes_within_a_fifth() -> None:
    """On a virtual clock, 30 minutes: the first renewal within the first fifth of the interval, then one
    every 5 min ±20 %, each stamping the clock's time — not merely "the stamp changed once"."""
    clock = VirtualClock(wall=WALL0)
    with FakeCluster(clock=clock, nodes=[Node("tiny", 100, 2**30)], harness=False) as cluster:  # it waits, placing
        client = cluster.client()
        watch = WatchActor.start(client, clock=clock, stall_bound=10**6)
        timers = Timers(clock, name="jr2-test-timers")
        pool = ThreadPoolExecutor(1, thread_name_prefix="jr2-test-pool")  # one thread: FIFO, so it can be drained
        spec = WorkspaceSpec("run-l", "wf", WorkspaceDef("F-1", cpu="1", memory="1Gi"), image="i")
        ref = WorkspaceActor.start(spec, client=client, watch=watch, parent=Inbox(), signing_key=b"k" * 32,
                                   kube_pool=pool, attach_pool=pool, clock=clock, timers=timers, seed=4)

        settle = Settle(clock, timers, ref, pool)

        def stamp() -> float | None:
            obj = client.get(SANDBOX, spec.name)
            return parse_rfc3339(obj["metadata"]["annotations"][KEEPALIVE_ANNOTATION]) if obj else None

        settle()
        stamps = [stamp()]
        assert stamps == [WALL0]  # the Lease is written with the Sandbox
        for _ in range(30 * 60):
            clock.advance(1)
            settle()
            if stamp() != stamps[-1]:
                stamps.append(stamp())
        ref.stop(block=True, timeout=10)
        watch.stop(block=True, timeout=10)
        pool.shutdown(wait=True)
        timers.stop()
    gaps = [b - a for a, b in itertools.pairwise(s for s in stamps if s is not None)]
    assert gaps[0] <= 60  # the first renewal within the first fifth of the interval
    assert len(gaps) >= 6 and all(240 <= g <= 360 for g in gaps[1:]), gaps


@dataclass
class Placing:
    """One Workspace waiting for a node on a virtual clock (a node too small for it): what never ran is owed
    a delete when it is released."""

    clock: VirtualClock
    cluster: FakeCluster
    client: KubeClient
    inbox: Inbox
    spec: WorkspaceSpec
    ref: pykka.ActorRef[Any]
    settle: Settle

    def deletes(self) -> int:
        return sum(1 for r in self.cluster.requests() if r["method"] == "DELETE")


@contextlib.contextmanager
def placing_on_a_virtual_clock(run: str) -> Iterator[Placing]:
    clock = VirtualClock(wall=WALL0)
    with FakeCluster(clock=clock, nodes=[Node("tiny", 100, 2**30)], harness=False, bookmark_interval=None) as cluster:
        client = cluster.client()
        watch = WatchActor.start(client, clock=clock, stall_bound=10**6)
        timers = Timers(clock, name="jr2-test-timers")
        pool = ThreadPoolExecutor(1, thread_name_prefix="jr2-test-pool")
        inbox = Inbox()
        spec = WorkspaceSpec(run, "wf", WorkspaceDef("F-1", cpu="1", memory="1Gi"), image="i")
        ref = WorkspaceActor.start(spec, client=client, watch=watch, parent=inbox, signing_key=b"k" * 32,
                                   kube_pool=pool, attach_pool=pool, clock=clock, timers=timers, seed=4)
        settle = Settle(clock, timers, ref, pool)
        wait_until(lambda: client.get(SECRET, spec.secret_name) is not None, what="the token Secret written")
        settle()  # the Secret's answer taken: the Workspace's writes are over
        assert client.get(SANDBOX, spec.name) is not None
        try:
            yield Placing(clock, cluster, client, inbox, spec, ref, settle)
        finally:
            ref.stop(block=True, timeout=10)
            watch.stop(block=True, timeout=10)
            pool.shutdown(wait=True)
            timers.stop()


def test_a_delete_owed_outlasts_an_api_server_outage_and_lands() -> None:
    """Issue 16 item 11: a delete that met an outage used to be tried 5 times and left to the idle GC (30
    minutes of a node). On a virtual clock: every delete fails for a dozen tries (over a minute), then the
    server answers again, and the Sandbox that never ran is deleted by the Workspace itself."""
    with placing_on_a_virtual_clock("run-o") as w:
        w.cluster.requests(clear=True)
        w.cluster.fail_next(12, 503)
        w.ref.tell(Release("run-stopped"))
        for _ in range(100):
            if kinds(w.inbox, Released):
                break
            w.clock.advance(DELETE_RETRY_BACKOFF.cap * (1 + DELETE_RETRY_BACKOFF.jitter))
            w.settle()
        assert w.deletes() == 13  # twelve refused, then the one that landed
        assert kinds(w.inbox, Released) == [Released("F-1", deleted=True)]
        assert w.client.get(SANDBOX, w.spec.name) is None
        wait_until(lambda: not w.ref.is_alive(), what="the Workspace stopped")


def test_a_delete_retry_ends_when_the_watch_says_the_sandbox_is_gone() -> None:
    """Someone else deleted it meanwhile (an operator's kubectl): the watch's word ends the retry at once."""
    with placing_on_a_virtual_clock("run-g") as w:
        w.cluster.requests(clear=True)
        w.cluster.fail_next(1000, 503)
        w.ref.tell(Release("run-stopped"))
        w.settle()
        assert w.deletes() == 1 and not kinds(w.inbox, Released)
        w.cluster.call(lambda state: state.delete(SANDBOX, "jr2", w.spec.name))  # past the faults of HTTP
        w.inbox.wait_for(lambda ms: any(isinstance(m, Released) for m in ms), what="released")
        assert kinds(w.inbox, Released) == [Released("F-1", deleted=True)]
        wait_until(lambda: not w.ref.is_alive(), what="the Workspace stopped")
        w.clock.advance(3600)
        w.settle()
        assert w.deletes() == 1  # no retry after the watch spoke


def test_an_evicted_sandbox_is_lost_with_the_operators_reason(world: World) -> None:
    inbox = Inbox()
    spec, ref = world.start("run-e", inbox)
    inbox.wait_for(lambda ms: any(isinstance(m, Running) for m in ms), what="running")
    world.cluster.evict(spec.name)
    inbox.wait_for(lambda ms: any(isinstance(m, Lost) for m in ms), what="lost")
    assert kinds(inbox, Lost)[0].reason == "Evicted: The node was low on resource: memory."
    ref.stop(block=True, timeout=10)


def test_a_sandbox_that_never_ran_is_deleted_when_its_run_stops(world: World) -> None:
    first, waiting = Inbox(), Inbox()
    _, holder = world.start("run-h", first)
    first.wait_for(lambda ms: any(isinstance(m, Running) for m in ms), what="holder running")
    spec, ref = world.start("run-w", waiting)
    waiting.wait_for(lambda ms: any(isinstance(m, PlacingLine) for m in ms), what="waiting")
    ref.tell(Release("run-stopped"))
    wait_until(lambda: world.client.get(SANDBOX, spec.name) is None, what="never-ran deleted")
    waiting.wait_for(lambda ms: Released("F-1", deleted=True) in ms, what="released")
    wait_until(lambda: not ref.is_alive(), what="stopped")
    holder.stop(block=True, timeout=10)


def test_a_never_ran_sandbox_whose_version_moved_unseen_is_still_deleted(world: World) -> None:
    """ADR-0064: what never ran is deleted at once — even when its version moved since the Workspace last
    looked (the operator's status writes, a watch that is late): the delete reads it again and retries while
    it is still the one this Workspace wrote."""
    first, waiting = Inbox(), Inbox()
    _, holder = world.start("run-h", first)
    first.wait_for(lambda ms: any(isinstance(m, Running) for m in ms), what="holder running")
    spec, ref = world.start("run-w", waiting)
    waiting.wait_for(lambda ms: any(isinstance(m, PlacingLine) for m in ms), what="waiting")
    world.cluster.stall_watches(True)  # nothing the server writes from here reaches the Workspace
    world.client.merge_patch(SANDBOX, spec.name, {"metadata": {"labels": {"someone": "else"}}})
    ref.tell(Release("run-stopped"))
    waiting.wait_for(lambda ms: any(isinstance(m, Released) for m in ms), what="released")
    assert Released("F-1", deleted=True) in waiting.snapshot()
    assert world.client.get(SANDBOX, spec.name) is None
    world.cluster.stall_watches(False)
    holder.stop(block=True, timeout=10)


def test_a_restored_teardown_of_a_sandbox_deleted_before_the_restart_writes_nothing(world: World) -> None:
    """A run saved while its teardown was under way, and whose delete went through before the crash: the
    restore finishes the teardown without writing the Sandbox again (ADR-0064: what never ran is deleted)."""
    inbox = Inbox()
    world.cluster.requests(clear=True)
    spec, ref = world.start("run-d", inbox, restored=Restored(placed=False, uid="uid-deleted-before-the-crash",
                                                                releasing=True))
    ref.tell(Release("run-stopped"))
    inbox.wait_for(lambda ms: any(isinstance(m, Released) for m in ms), what="released")
    writes = [r for r in world.cluster.requests() if r["method"] in ("POST", "PATCH", "PUT")]
    assert writes == [] and world.client.get(SANDBOX, spec.name) is None
    assert Released("F-1", deleted=False) in inbox.snapshot()


def test_a_restored_workspace_whose_sandbox_is_gone_is_lost_and_never_written_again(world: World) -> None:
    inbox = Inbox()
    world.cluster.requests(clear=True)
    world.start("run-r", inbox, restored=Restored(placed=True, uid="uid-of-a-sandbox-long-gone"))
    inbox.wait_for(lambda ms: any(isinstance(m, Lost) for m in ms), what="lost")
    writes = [r for r in world.cluster.requests() if r["method"] in ("POST", "PATCH", "PUT")]
    assert writes == []  # no fresh Sandbox, no Secret, no Lease on a name that is not ours any more
    assert not kinds(inbox, Running)


def test_transient_api_errors_on_the_first_write_never_fault(world: World) -> None:
    inbox = Inbox()
    world.cluster.fail_next(3, 500)
    world.start("run-t", inbox)
    inbox.wait_for(lambda ms: any(isinstance(m, Running) for m in ms), what="running despite three 500s")
    assert not kinds(inbox, Faulted)


def test_a_name_held_by_another_runs_sandbox_is_a_named_fault_and_left_alone(world: World) -> None:
    inbox = Inbox()
    definition = WorkspaceDef("F-1", cpu="1", memory="1Gi")
    ours = WorkspaceSpec(run_id="run-c", workflow="wf", definition=definition, image="jr2-sandbox:dev")
    theirs = WorkspaceSpec(run_id="run-other", workflow="wf", definition=definition, image="jr2-sandbox:dev")
    body = sandbox_body(theirs, world.cluster.signing_key, 0.0)
    body["metadata"]["name"] = ours.name  # a collision, as a short hash would make it
    world.client.create(SANDBOX, body)
    before = world.client.get(SANDBOX, ours.name)
    assert before is not None
    _, ref = world.start("run-c", inbox)
    inbox.wait_for(lambda ms: any(isinstance(m, Faulted) for m in ms), what="collision fault")
    assert "taken by another run's Workspace" in kinds(inbox, Faulted)[0].reason
    ref.tell(Release("run-faulted"))
    inbox.wait_for(lambda ms: any(isinstance(m, Released) for m in ms), what="released")
    after = world.client.get(SANDBOX, ours.name)
    assert after is not None and after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["annotations"] == before["metadata"]["annotations"]  # never renewed or adopted


@pytest.mark.parametrize("delay", [False, True], ids=["at-once", "after-the-teardown"])
def test_a_successor_under_the_same_key_runs_and_is_never_told_lost(world: World, delay: bool) -> None:
    """ADR-0064: a state re-entered gives its new Workspace the same name; the old one's delete must never
    remove what the successor holds (its preconditions: the uid and the newest version it wrote or saw)."""
    first = Inbox()
    spec, old = world.start("run-s", first)
    first.wait_for(lambda ms: any(isinstance(m, Running) for m in ms), what="the first running")
    old.tell(Release("teardown"))
    if delay:
        first.wait_for(lambda ms: any(isinstance(m, Released) for m in ms), what="the first released")
    second = Inbox()
    _, new = world.start("run-s", second)
    second.wait_for(lambda ms: any(isinstance(m, Running) for m in ms), what="the successor running")
    first.wait_for(lambda ms: any(isinstance(m, Released) for m in ms), what="the first released")
    # The successor stays registered: a change of its Sandbox still reaches it, and nothing says it is lost.
    world.client.merge_patch(SANDBOX, spec.name, {"metadata": {"annotations": {"touched": "yes"}}})
    wait_until(lambda: world.client.get(SANDBOX, spec.name) is not None, what="the successor's Sandbox there")
    world.cluster.evict(spec.name)
    second.wait_for(lambda ms: any(isinstance(m, Lost) for m in ms), what="the eviction heard by the successor")
    (lost,) = kinds(second, Lost)
    assert lost.reason.startswith("Evicted")  # the one loss it hears is the real one, not its predecessor's delete
    new.stop(block=True, timeout=10)


class _HangingAttach:
    """A Harness whose attach does not answer until the test lets it: a slow clone."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        self._entered, self._release = entered, release

    def attach(self, slots: Any, branch: str) -> dict[str, str]:
        self._entered.set()
        self._release.wait(60)
        return {}

    def close(self) -> None:
        pass


def test_a_slow_attach_never_holds_the_workspaces_cluster_calls(world: World) -> None:
    """Issue 7, item 9: the attach has its own lane. While one hangs, the Workspace's release still
    deletes its Sandbox at once (the kube lane is free), and nothing waits for the attach to end."""
    entered, release = threading.Event(), threading.Event()
    inbox = Inbox()
    spec, ref = world.start("run-slow", inbox, harness_factory=lambda url, token: _HangingAttach(entered, release))
    assert entered.wait(30), "the attach never started"
    ref.tell(Release("teardown"))  # a normal teardown deletes, attached or not
    wait_until(lambda: world.client.get(SANDBOX, spec.name) is None, what="deleted while the attach hangs")
    assert not release.is_set()  # the attach is still hanging: the delete did not wait for it
    release.set()
    inbox.wait_for(lambda ms: any(isinstance(m, Released) for m in ms), what="released")


def test_a_stopped_workspace_ends_its_attach_at_a_harness_that_refuses_connections(world: World) -> None:
    """Issue 16 item 9: the attach retries a refused connection for 90 s; a stop must end it at once, or the
    attach pool's shutdown (the orchestrator's stop) waits for all of it."""
    with socket.socket() as refusing:
        refusing.bind(("127.0.0.1", 0))  # bound, never listening: every connect is refused
        url = f"http://127.0.0.1:{refusing.getsockname()[1]}"
        world.cluster.operate(lambda core, now: setattr(core, "endpoint", url))
        inbox = Inbox()
        _, ref = world.start("run-refused", inbox)
        inbox.wait_for(lambda ms: Phase("F-1", "attaching") in ms, timeout=30, what="attaching")
        ref.stop(block=True, timeout=10)
        drained = threading.Thread(target=world.attach_pool.shutdown, kwargs={"wait": True}, daemon=True)
        drained.start()
        drained.join(10)
        assert not drained.is_alive(), "the attach went on retrying after its Workspace stopped"
        assert not kinds(inbox, Running)
