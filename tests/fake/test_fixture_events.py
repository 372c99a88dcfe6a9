"""Issue 19 item 7: the pytest fixtures take the fake's agents as options (`jr2_agents(pick_first=True)`, a
script per agent) and say what happens in the cluster by name (`jr2_cluster_events`: thin names over
`cluster.faults`, each aimed at a run's Workspace); `wait_finished` returns the final RunStatus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick, Say
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.testing.pytest_plugin import ClusterEvents
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.identity import sandbox_name
from tests.support.readme import run_as_a_test_file
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
HANGS = one_state("hangs").replace("on: {finish: done}", "on: {never: done}")  # only the cluster can end it


def running(orch: Orchestrator, run_id: str) -> None:
    wait_until(lambda: ((orch.status(run_id) or {}).get("turn") or {}).get("phase") == "running", timeout=30,
               what="the Turn running")


def waiting(orch: Orchestrator, run_id: str) -> list[dict[str, Any]]:
    wait_until(lambda: bool((orch.status(run_id) or {}).get("waiting")), timeout=30, what="a wait")
    return list((orch.status(run_id) or {})["waiting"])


@pytest.mark.jr2_agents(pick_first=True)
def test_pick_first_walks_a_workflow_to_its_end(jr2_orchestrator: Orchestrator) -> None:
    final = jr2_orchestrator.wait_finished(jr2_orchestrator.submit(read_document(one_state("first"))), 30)
    assert final is not None and final["status"] == "done"


@pytest.mark.jr2_agents(worker=[[Say("not that one"), Pick("never")]])
def test_a_script_per_agent_and_wait_finished_says_how_the_run_ended(jr2_orchestrator: Orchestrator) -> None:
    final = jr2_orchestrator.wait_finished(jr2_orchestrator.submit(read_document(HANGS.replace(
        "done: {final: done}", "done: {final: failed}"))), 30)
    assert final is not None and final["status"] == "failed"  # ended, and not well: the status says so


@pytest.mark.jr2_agents(worker=[[Say("working"), Hang()]])
def test_evict_fails_the_run_that_does_not_handle_it(jr2_orchestrator: Orchestrator,
                                                     jr2_cluster_events: ClusterEvents) -> None:
    run_id = jr2_orchestrator.submit(read_document(HANGS))
    running(jr2_orchestrator, run_id)
    jr2_cluster_events.evict(run_id, "W")
    final = jr2_orchestrator.wait_finished(run_id, 30)
    assert final is not None and final["status"] == "failed" and final["fault"].startswith("Evicted: ")
    assert [c.name for c in jr2_cluster_events.cluster.faults.log] == ["evict"]  # in the log: a failure replays it


@pytest.mark.jr2_agents(worker=[[Say("working"), Hang()]])
@pytest.mark.parametrize("event", ["oom_kill", "harness_restart"])
def test_a_harness_container_that_ends_ends_the_turn_running_there(jr2_orchestrator: Orchestrator,
                                                                   jr2_cluster_events: ClusterEvents,
                                                                   event: str) -> None:
    run_id = jr2_orchestrator.submit(read_document(HANGS))
    running(jr2_orchestrator, run_id)
    getattr(jr2_cluster_events, event)(run_id, "W")
    final = jr2_orchestrator.wait_finished(run_id, 60)
    assert final is not None and final["status"] != "done" and final.get("fault"), final


@pytest.mark.jr2_agents(worker=[[Say("working"), Hang()]])
def test_guard_kill_is_on_the_workspaces_kill_list(jr2_orchestrator: Orchestrator, jr2_fake_cluster: FakeCluster,
                                                   jr2_cluster_events: ClusterEvents) -> None:
    run_id = jr2_orchestrator.submit(read_document(HANGS))
    running(jr2_orchestrator, run_id)
    jr2_cluster_events.guard_kill(run_id, "W", peak="1.9Gi", limit="2Gi")
    (call,) = jr2_fake_cluster.faults.log
    assert (call.name, call.params["sandbox"], call.skipped) == ("guard_kill", sandbox_name(run_id, "W"), "")


def test_quota_and_unschedulable_make_a_new_workspace_wait_with_its_reason(
        jr2_orchestrator: Orchestrator, jr2_cluster_events: ClusterEvents) -> None:
    jr2_cluster_events.quota(3600, cpu_millis=1)
    quota = waiting(jr2_orchestrator, jr2_orchestrator.submit(read_document(one_state("q"))))
    assert [(w["on"], w["reason"]) for w in quota] == [("quota", "quota")]
    jr2_cluster_events.quota(0.0, cpu_millis=None)  # gone again (the lever's undo comes at once)
    jr2_cluster_events.unschedulable(3600, taint="dedicated=gpu:NoSchedule")
    tainted = waiting(jr2_orchestrator, jr2_orchestrator.submit(read_document(one_state("t"))))
    assert [(w["on"], w["reason"]) for w in tainted] == [("node", "taint")]


def test_an_event_aimed_at_a_workspace_that_is_not_there_is_recorded_as_skipped(
        jr2_cluster_events: ClusterEvents) -> None:
    jr2_cluster_events.evict("r-000000000000", "W")  # bad input: no raise, and the log says why it did nothing
    (call,) = jr2_cluster_events.cluster.faults.log
    assert call.skipped.startswith("no such Sandbox")


def test_the_fixtures_as_a_suite_of_ones_own_uses_them(tmp_path: Path) -> None:
    """As another project's suite: one test whose run is done, one whose run the cluster fails."""
    source = '''
import pytest
from jr2_actors.fake.harness.core import Hang, Say
from jr2_actors.values.workflow import read_document

DOC = """
name: mine
workspaces: {W: {size: {cpu: "1", memory: "1Gi"}}}
agents: {worker: {instructions: "You work.", workspace: W, access: write}}
start: work
states:
  work: {holds: [W], turn: {agent: worker, prompt: "Work."}, on: {finish: done}}
  done: {final: done}
"""


@pytest.mark.jr2_agents(pick_first=True)
def test_done(jr2_orchestrator):
    assert jr2_orchestrator.wait_finished(jr2_orchestrator.submit(read_document(DOC)), 30)["status"] == "done"


@pytest.mark.jr2_agents(worker=[[Say("working"), Hang()]])
def test_evicted(jr2_orchestrator, jr2_cluster_events):
    run_id = jr2_orchestrator.submit(read_document(DOC))
    while (jr2_orchestrator.status(run_id).get("turn") or {}).get("phase") != "running":
        jr2_orchestrator.wait_finished(run_id, 0.05)
    jr2_cluster_events.evict(run_id, "W")
    assert jr2_orchestrator.wait_finished(run_id, 30)["status"] == "done"
'''
    out = run_as_a_test_file(tmp_path, source)
    assert out.returncode == 1 and "1 failed, 1 passed" in out.stdout, out.stdout + out.stderr
    assert "'failed' == 'done'" in out.stdout and "the faults it met" in out.stdout, out.stdout
    assert '"fault": "evict"' in out.stdout, out.stdout  # the failed test's faults, as a schedule to replay
