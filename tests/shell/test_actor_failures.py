"""No actor dies silently (issue 7, item 15): each kind, killed by our bug in the middle of a message, cleans
up as a stop does — no thread of its outlives it — and tells its parent an `ActorFault`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pykka
import pytest

from jr2_actors.agent.actor import AgentActor
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang
from jr2_actors.fake.operator.core import Node
from jr2_actors.run.actor import RunActor, RunEnv
from jr2_actors.run.core import RunCore
from jr2_actors.run.feed.hub import FeedHub
from jr2_actors.shell import ActorFault, Timers
from jr2_actors.shell.clock import SystemClock
from jr2_actors.store.actor import StoreActor
from jr2_actors.values.workflow import WorkspaceDef, load_workflow, read_document
from jr2_actors.watch.actor import WatchActor
from jr2_actors.workspace.actor import WorkspaceActor
from jr2_actors.workspace.manifest import WorkspaceSpec
from jr2_actors.workspace.messages import PlacingLine
from tests.support.probes import CRASH, Inbox, crashing
from tests.support.waiting import wait_until
from tests.support.workflows import TINY_TURN

pytestmark = pytest.mark.slow
def jr2_threads() -> set[str]:
    """The threads our actors start (a test's own pools are the test's)."""
    return {t.name for t in threading.enumerate() if t.name.startswith("jr2-") and not t.name.startswith("jr2-test-")}


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(nodes=[Node("n", 500, 2**30)], start_seconds=0.05, long_poll=0.3,
                     bookmark_interval=None) as c:
        yield c


def dies_told_and_leaves_no_thread(ref: pykka.ActorRef[Any], parent: Inbox, kind: str,
                                   before: set[str]) -> None:
    ref.tell(CRASH)
    parent.wait_for(lambda ms: any(isinstance(m, ActorFault) for m in ms), what=f"the {kind}'s fault")
    (fault,) = [m for m in parent.snapshot() if isinstance(m, ActorFault)]
    assert fault.kind == kind and "our bug, mid-message" in fault.error
    wait_until(lambda: not ref.is_alive(), what=f"the {kind} stopped")
    wait_until(lambda: jr2_threads() <= before, what=f"no thread of the {kind} left: {jr2_threads() - before}")


def test_a_watch_actor_that_dies_cleans_up_and_says_so(cluster: FakeCluster) -> None:
    before, parent = jr2_threads(), Inbox()
    ref = crashing(WatchActor).start(cluster.client(), stall_bound=10, parent=parent)
    wait_until(lambda: cluster.watch_stats()["open"] == 1, what="the watch open")
    dies_told_and_leaves_no_thread(ref, parent, "WatchActor", before)


def test_a_store_actor_that_dies_cleans_up_and_says_so(tmp_path: Path) -> None:
    before, parent = jr2_threads(), Inbox()
    ref = crashing(StoreActor).start(str(tmp_path), parent=parent)
    dies_told_and_leaves_no_thread(ref, parent, "StoreActor", before)


def test_a_workspace_actor_that_dies_cleans_up_and_says_so(cluster: FakeCluster) -> None:
    watch = WatchActor.start(cluster.client(), stall_bound=10)
    pool = ThreadPoolExecutor(2, thread_name_prefix="jr2-test-pool")
    before, parent = jr2_threads(), Inbox()
    spec = WorkspaceSpec("run-f", "wf", WorkspaceDef("F-1", cpu="1", memory="1Gi"), image="i")  # never fits: placing
    ref = crashing(WorkspaceActor).start(spec, client=cluster.client(), watch=watch, parent=parent,
                                         signing_key=b"k" * 32, kube_pool=pool, attach_pool=pool)
    parent.wait_for(lambda ms: any(isinstance(m, PlacingLine) for m in ms), what="placing")
    dies_told_and_leaves_no_thread(ref, parent, "WorkspaceActor", before)
    watch.stop(block=True, timeout=10)
    pool.shutdown(wait=True)


def test_an_agent_actor_that_dies_cleans_up_and_says_so() -> None:
    pool = ThreadPoolExecutor(2, thread_name_prefix="jr2-test-pool")
    before, parent = jr2_threads(), Inbox()
    ref = crashing(AgentActor).start("coder", parent=parent, pool=pool)
    wait_until(lambda: "jr2-agent-coder" in jr2_threads(), what="its reader running")
    dies_told_and_leaves_no_thread(ref, parent, "AgentActor", before)
    pool.shutdown(wait=True)


def test_a_run_actor_that_dies_stops_its_children_and_says_so(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.script("a", [Hang()])
    client = cluster.client()
    watch = WatchActor.start(client, stall_bound=10)
    store = StoreActor.start(str(tmp_path))
    pools = [ThreadPoolExecutor(2, thread_name_prefix=f"jr2-test-{n}") for n in ("kube", "attach", "agent")]
    timers = Timers(name="jr2-test-timers")
    env = RunEnv(client=client, watch=watch, store=store, feed=FeedHub(), signing_key=cluster.signing_key,
                 kube_pool=pools[0], attach_pool=pools[1], agent_pool=pools[2], timers=timers, clock=SystemClock(),
                 sandbox_image="i")
    doc = read_document(TINY_TURN)
    assert isinstance(doc, dict)
    before, parent = jr2_threads(), Inbox()
    ref = crashing(RunActor).start(RunCore("run-crash", load_workflow(TINY_TURN), doc), env, parent)
    wait_until(lambda: len(cluster.admissions()) == 1, what="its Turn admitted")
    children = [r for r in pykka.ActorRegistry.get_all() if r.actor_class.__name__ in ("WorkspaceActor",
                                                                                       "AgentActor")]
    assert len(children) == 2
    dies_told_and_leaves_no_thread(ref, parent, "RunActor", before)
    wait_until(lambda: not any(r.is_alive() for r in children), what="its children stopped")
    for r in (watch, store):
        r.stop(block=True, timeout=10)
    for p in pools:
        p.shutdown(wait=True)
    timers.stop()


def test_a_timer_callback_that_raises_never_ends_the_shared_timer_thread() -> None:
    timers = Timers(name="jr2-test-timer-survives")
    later = threading.Event()
    try:
        timers.schedule(timers.clock.monotonic(), lambda: 1 / 0)  # our bug, in one owner's timeout
        timers.schedule(timers.clock.monotonic(), later.set)  # another owner's timeout, due as well
        timers.poke()
        assert later.wait(10), "the timer thread died with the first callback"
    finally:
        timers.stop()


def test_a_store_whose_sweep_fails_keeps_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jr2_actors.store import messages as store
    from jr2_actors.store.messages import RunRecord

    ref = StoreActor.start(str(tmp_path))
    try:
        def broken(*_: object) -> int:
            raise OSError("disk I/O error")

        monkeypatch.setattr(ref.proxy().store.get(timeout=10), "sweep", broken)
        assert ref.ask(store.Sweep(), timeout=10) == 0  # logged, not raised: the writer lives on
        ref.ask(store.Persist("r-1", "live", {"runId": "r-1"}), timeout=10)
        record = ref.ask(store.Fetch("r-1"), timeout=10)
        assert isinstance(record, RunRecord) and record.status == "live"
    finally:
        ref.stop(block=True, timeout=10)
