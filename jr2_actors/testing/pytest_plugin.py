"""A pytest plugin (entry point `jr2_fake_cluster`): the fake cluster, and an orchestrator on it, as
fixtures for any test suite.

    def test_my_harness(jr2_fake_cluster):
        client = jr2_fake_cluster.client()

    @pytest.mark.jr2_agents(pick_first=True)            # or coder=[[Pick("finish")]]: a script per agent
    def test_my_workflow(jr2_orchestrator, jr2_fake_cluster):
        run_id = jr2_orchestrator.submit(read_file("my-workflow.yaml"))
        assert jr2_orchestrator.wait_finished(run_id, 30)["status"] == "done"

    def test_an_eviction(jr2_orchestrator, jr2_cluster_events):
        ...
        jr2_cluster_events.evict(run_id, "F-1")          # what happens in the cluster, by name
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from jr2_actors.fake.cluster import FakeCluster

if TYPE_CHECKING:
    from jr2_actors.orchestrator import Orchestrator


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "jr2_faults(schedule=None, seed=None): play this fault schedule (a list of "
                                       "FaultCall, or of {at, fault, ...}) or a seed's on jr2_fake_cluster")
    _configure_time(config)
    config.addinivalue_line("markers", "jr2_agents(pick_first=False, **scripts): how the fake Harness's agents act "
                                       "on jr2_fake_cluster: pick_first=True picks the first Allowed pick of every "
                                       "unscripted Turn; AGENT=[[actions of a Turn], ...] scripts that agent")


@pytest.fixture
def jr2_fake_cluster(request: pytest.FixtureRequest) -> Iterator[FakeCluster]:
    """A started fake cluster (API server, operator, Harness) in namespace `jr2`, stopped after the test.

    `@pytest.mark.jr2_faults(schedule=[...])` or `(seed=N)` plays a fault schedule on it from the start; a
    test that fails then prints every fault the cluster met, as a schedule that replays them.
    `@pytest.mark.jr2_agents(pick_first=True, coder=[[Say("…"), Pick("finish")]])` sets how its agents act."""
    from jr2_actors.fake.faults import FaultCall, Faults

    with FakeCluster(namespace="jr2", **_time_options(request)) as cluster:
        marker = request.node.get_closest_marker("jr2_faults")
        if marker is not None:
            schedule = marker.kwargs.get("schedule")
            seed = marker.kwargs.get("seed")
            calls = [c if isinstance(c, FaultCall) else Faults.load([c])[0] for c in schedule or []]
            if seed is not None:
                calls += Faults.draw(int(seed))
            cluster.faults.play(calls)
        agents = request.node.get_closest_marker("jr2_agents")
        if agents is not None:
            scripts = dict(agents.kwargs)
            if scripts.pop("pick_first", False):
                cluster.harness(lambda core: core.pick_first_allowed(True))
            for agent, turns in scripts.items():
                cluster.script(agent, *turns)
        request.node.stash[_CLUSTER] = cluster
        yield cluster


_CLUSTER = pytest.StashKey[FakeCluster]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                           pytest.TestReport]:
    report = yield
    cluster = item.stash.get(_CLUSTER, None)
    if cluster is not None and report.failed and cluster.faults.log:
        report.sections.append(("jr2 fake cluster: the faults it met (replay with "
                                "@pytest.mark.jr2_faults(schedule=json.loads(...)))", cluster.faults.schedule_json()))
    return report


@pytest.fixture
def jr2_orchestrator(jr2_fake_cluster: FakeCluster, tmp_path: Path) -> Iterator[Orchestrator]:
    """A started orchestrator on `jr2_fake_cluster` (its state in the test's temp folder), stopped after."""
    from jr2_actors.orchestrator import Orchestrator

    client = jr2_fake_cluster.client()
    orchestrator = Orchestrator(client, state_dir=str(tmp_path / "jr2-state"), signing_key=jr2_fake_cluster.signing_key,
                                instance_harness=jr2_fake_cluster.instance_harness_url,
                                clock=jr2_fake_cluster.clock)  # one clock: the cluster's (virtual or real)
    with orchestrator:
        yield orchestrator
    client.close()


class ClusterEvents:
    """What happens in the cluster, said by name and aimed at a run's Workspace (its id and the Workspace's
    path, as `status` shows them): thin names over `cluster.faults`, so each is recorded in its log and a
    failing test prints them as a schedule that replays them."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    @staticmethod
    def sandbox(run_id: str, child: str) -> str:
        """The Sandbox name of a run's Workspace (the name the orchestrator gives it)."""
        from jr2_actors.watch.identity import sandbox_name

        return sandbox_name(run_id, child)

    def evict(self, run_id: str, child: str, **kw: Any) -> None:
        """The Workspace's pod is evicted (`reason`, `message`): the Sandbox turns `Lost`."""
        self.cluster.faults.evict(self.sandbox(run_id, child), **kw)

    def oom_kill(self, run_id: str, child: str, **kw: Any) -> None:
        """The kernel OOM-kills its Harness container (`faults.kernel_oom`): a Turn running there faults."""
        self.cluster.faults.kernel_oom(self.sandbox(run_id, child), **kw)

    def guard_kill(self, run_id: str, child: str, **kw: Any) -> None:
        """The Harness's memory guard kills its processes while no Submission runs (`peak`, `limit`, `agent`):
        a notice for the next Turn (ADR-0062). A kill during a Turn is the agent's script: `GuardKill`."""
        self.cluster.faults.guard_kill(self.sandbox(run_id, child), **kw)

    def harness_restart(self, run_id: str, child: str) -> None:
        """Its Harness container restarts: its conversations are gone, its Turns end."""
        self.cluster.faults.harness_restart(self.sandbox(run_id, child))

    def quota(self, seconds: float, **kw: Any) -> None:
        """A ResourceQuota this tight (`cpu_millis`, `memory_bytes`) for `seconds`: new Workspaces wait on it."""
        self.cluster.faults.quota(seconds, **kw)

    def unschedulable(self, seconds: float, taint: str = "") -> None:
        """No node takes a new Workspace for `seconds` (gone, or with `taint` all tainted)."""
        self.cluster.faults.unschedulable(seconds, taint=taint)


@pytest.fixture
def jr2_cluster_events(jr2_fake_cluster: FakeCluster) -> ClusterEvents:
    """`evict`, `oom_kill`, `guard_kill`, `harness_restart` of a run's Workspace, `quota`, `unschedulable`:
    what happens in `jr2_fake_cluster`, by name (`ClusterEvents`)."""
    return ClusterEvents(jr2_fake_cluster)


# -- virtual time (`@pytest.mark.jr2_fake_cluster(time="virtual")`) ------------------------------------------
# One driven VirtualClock for the fake cluster and the orchestrator on it: it moves only by
# `jr2_fake_cluster.clock.advance(s)` / `.run_until(predicate)`, jumping to the next timer whenever nothing
# is under way (testing/clock.py says what that means). docs/fake-cluster.md, "Virtual time".

TIMES = ("real", "virtual")


def _configure_time(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "jr2_fake_cluster(time='real'): time='virtual' runs jr2_fake_cluster and "
                                       "jr2_orchestrator on one virtual clock (jr2_fake_cluster.clock) that jumps "
                                       "to the next timer whenever nothing is under way")


def _time_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    from jr2_actors.testing.clock import VirtualClock

    marker = request.node.get_closest_marker("jr2_fake_cluster")
    unknown = set(marker.kwargs) - {"time"} if marker is not None else set()
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.jr2_fake_cluster takes time=..., not {sorted(unknown)}")
    time = marker.kwargs.get("time", "real") if marker is not None else "real"
    if time not in TIMES:
        raise pytest.UsageError(f"@pytest.mark.jr2_fake_cluster(time={time!r}): time is one of {TIMES}")
    return {"clock": VirtualClock(settle=True)} if time == "virtual" else {}
