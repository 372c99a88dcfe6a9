"""What a finished run leaves behind in the orchestrator: nothing that grows with the number of runs (a
soak measured +1.3 KiB of RSS a finished run after the plateau). Objects and entries are counted, never RSS: after a
warm-up past every bound that is meant to fill (the feed hub's `FEED_FINISHED_HELD` finished runs), N more
one-Turn runs through an embedded orchestrator on the fake cluster, then N more; no class of ours gains an
instance per run, and the watch's delivery cache holds no entry per run (its retired uids are a bounded LRU
of `KEEP_LATEST` plain strings).

What holds them, found with tracemalloc snapshots diffed over 300 finished runs: the delivery cache keeps each
finished run's `SandboxGone` (with its key, name and uid) as its key's latest delivery, up to 10,000 keys —
about 0.7 KB a run, which reads as growth through any soak shorter than 10,000 runs. The orchestrator now
tells the watch when a run is over for good (`RunEnded`): no waiter comes back for its keys, so their
deliveries go (a restored waiter — a live run's — keeps its cached Gone and the uid in it)."""

from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.values.constants import FEED_FINISHED_HELD
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.deliveries import KEEP_LATEST, DeliveryCache
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

BATCH = 8
WARM = (FEED_FINISHED_HELD // BATCH + 1) * BATCH  # the hub then holds its newest finished feeds, no more
N = 24
DOCUMENT = read_document(one_state("held"))


def ours() -> Counter[str]:
    """Live instances of the orchestrator's own classes (the fake cluster's aside), by class."""
    gc.collect()
    counts: Counter[str] = Counter()
    for o in gc.get_objects():
        module = getattr(type(o), "__module__", "")
        if isinstance(module, str) and module.startswith("jr2_actors.") and not module.startswith("jr2_actors.fake"):
            counts[f"{module}.{type(o).__qualname__}"] += 1
    return counts


def cache() -> DeliveryCache:
    (found,) = [o for o in gc.get_objects() if type(o) is DeliveryCache]
    return found


def entries(c: DeliveryCache) -> dict[str, int]:
    return {"latest": len(c._last), "tracked": len(c._signature),
            "known": len(c._known), "waiters": len(c.waiters), "answered": len(c._answered)}


def run(orchestrator: Orchestrator, count: int) -> None:
    for _ in range(count // BATCH):
        ids = [orchestrator.submit(DOCUMENT) for _ in range(BATCH)]
        for run_id in ids:
            final = orchestrator.wait_finished(run_id, 60)
            assert final is not None and final["status"] == "done"
    # The watch hears each run's end by message (RunEnded), after the run is reported finished.
    wait_until(lambda: cache().tracked == 0 and not cache().waiters and not cache()._last, timeout=30,
               what="every Sandbox deleted, every waiter gone, and no finished run's delivery kept")


@pytest.mark.slow
def test_runs_that_finished_leave_nothing_that_grows_with_their_number(tmp_path: Path) -> None:
    gc.collect()  # an earlier test's orchestrator, stopped, in cycles not yet collected: `cache()` finds this one alone
    with FakeCluster(namespace="jr2") as cluster:
        cluster.harness(lambda core: core.pick_first_allowed(True))
        client = cluster.client()
        try:
            with Orchestrator(client, state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key) as orch:
                run(orch, WARM)
                run(orch, N)
                before, held_before = ours(), entries(cache())
                run(orch, N)
                after, held_after = ours(), entries(cache())
                retired = len(cache()._retired)
        finally:
            client.close()
    grown = {kind: after[kind] - before[kind] for kind in after if after[kind] - before[kind] >= N // 2}
    assert grown == {}, f"instances gained over {N} more finished runs: {grown}"
    assert held_after == held_before, (held_before, held_after)
    assert held_after["latest"] == 0  # no waiter: no Sandbox's delivery kept
    assert retired <= KEEP_LATEST


@pytest.mark.slow
def test_a_finished_run_leaves_no_reference_cycle_for_the_collector(tmp_path: Path) -> None:
    """A run's objects are freed as it ends, not by the collector's full passes: each run left ~148 objects in
    reference cycles (its WorkspaceActor through a lambda on itself, its attach's HarnessClient through a bound
    method kept on itself, the fake's apply through a nested recursive function), and in serve each full pass
    that found them held the interpreter lock 90-230 ms (a release of 2,000 runs)."""
    gc.collect()  # an earlier test's orchestrator, stopped: `cache()` finds this test's one alone
    with FakeCluster(namespace="jr2") as cluster:
        cluster.harness(lambda core: core.pick_first_allowed(True))
        client = cluster.client()
        try:
            with Orchestrator(client, state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key) as orch:
                run(orch, BATCH)  # warm: what starts once (pools, sessions, threads) is made
                gc.collect()
                gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds is kept in gc.garbage, to be counted
                try:
                    run(orch, N)
                    gc.collect()
                    garbage = list(gc.garbage)
                finally:
                    gc.set_debug(0)
                    gc.garbage.clear()
        finally:
            client.close()
    # A dropped keep-alive connection that urllib3 retries leaves its exception in a cycle through its traceback
    # (urllib3's frame keeps the ProtocolError that wraps it), and the frames on that traceback hold whatever
    # they held: those are the library's, not a cycle of ours.
    held = _through_tracebacks(garbage)
    ours_in_cycles = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in garbage
                             if id(o) not in held and str(getattr(type(o), "__module__", "")).startswith("jr2_actors."))
    assert ours_in_cycles == Counter(), f"objects of ours freed only by the collector over {N} runs"
    assert len(garbage) - len(held) < N, f"{len(garbage) - len(held)} objects in reference cycles over {N} runs"


def _through_tracebacks(garbage: list[object]) -> set[int]:
    """The ids of the garbage an exception's traceback reaches (within the garbage)."""
    among = {id(o) for o in garbage}
    reached: set[int] = set()
    todo = [o for o in garbage if type(o).__name__ == "traceback"]
    while todo:
        o = todo.pop()
        if id(o) in reached:
            continue
        reached.add(id(o))
        todo.extend(r for r in gc.get_referents(o) if id(r) in among and id(r) not in reached)
    return reached
