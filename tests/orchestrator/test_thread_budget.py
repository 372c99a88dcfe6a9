"""Issue 18 item 2: what a live run costs in threads. Each actor is one thread (pykka's ThreadingActor); a
seat reading its Turn's long poll adds its reader; everything else — the kube, attach and agent pools, the
timers, the watch's I/O thread, an admission's liveness probe (one per agent-pool thread at most) — is
shared by the process and bounded by the orchestrator's settings, whatever the number of runs
(docs/architecture.md, "Threads")."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from jr2_actors.agent.actor import AgentActor
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang
from jr2_actors.fake.operator.core import Node
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run.actor import RunActor
from jr2_actors.store.actor import StoreActor
from jr2_actors.values.constants import RENEWAL_LANE_THREADS
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.actor import WatchActor
from jr2_actors.workspace.actor import WorkspaceActor
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
OURS = (RunActor, WorkspaceActor, AgentActor, StoreActor, WatchActor)
KUBE, ATTACH, AGENT = 3, 2, 2
# Beside the pools: the renewal lane, the run, store and watch timers, the watch's I/O thread, one admission
# probe per agent pool thread — and no more, whatever the number of runs.
FIXED = KUBE + ATTACH + AGENT + RENEWAL_LANE_THREADS + 4 + AGENT


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(nodes=[Node("big", 64_000, 256 * 2**30)], start_seconds=0.05, long_poll=0.5,
                     bookmark_interval=None) as c:
        yield c


def census(before: frozenset[threading.Thread] = frozenset()) -> tuple[int, int, int, list[str]]:
    """(our threads, our actors, our seats): the fake cluster's own threads and actors are not counted, nor
    threads alive `before` the test (in one pytest process, an earlier test's leftovers are not this one's)."""
    actors = [ref for ref in pykka.ActorRegistry.get_all() if issubclass(ref.actor_class, OURS)]
    seats = sum(1 for ref in actors if issubclass(ref.actor_class, AgentActor))
    names = (*(cls.__name__ for cls in OURS), "jr2-")
    mine = [t.name for t in threading.enumerate() if t not in before and t.name.startswith(names)
            and not t.name.startswith("jr2-fake")]
    threads = len(mine)
    return threads, len(actors), seats, mine


@pytest.mark.parametrize("runs", [3, 12])
def test_live_runs_cost_one_thread_per_actor_and_seat_reader_plus_a_fixed_few(cluster: FakeCluster, tmp_path: Path,
                                                                              runs: int) -> None:
    before = frozenset(threading.enumerate())
    cluster.script("worker", *([Hang()] for _ in range(runs)))
    with Orchestrator(cluster.client(), state_dir=str(tmp_path), signing_key=cluster.signing_key,
                      instance_harness=cluster.instance_harness_url, kube_threads=KUBE, attach_threads=ATTACH,
                      agent_threads=AGENT) as orch:
        ids = [orch.submit(read_document(one_state(f"w{i}"))) for i in range(runs)]
        wait_until(lambda: all((orch.status(r) or {}).get("turn", {}).get("phase") == "running" for r in ids),
                   timeout=60, what="every Turn admitted")
        _, actors, seats, _ = census()
        assert actors == 3 * runs + 2 and seats == runs  # per run: a RunActor, a WorkspaceActor, a seat
        # An admission's probe ends at its next look after the answer: the count settles within moments.
        wait_until(lambda: (c := census(before))[0] <= c[1] + c[2] + FIXED, timeout=10,
                   what=f"at most {actors} actors + {seats} seat readers + {FIXED} threads: "
                        + " ".join(sorted(census(before)[3])))
