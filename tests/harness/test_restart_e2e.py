"""A Harness restart end to end, through `serve` as a process, against the strict fake Harness (CONTRACTS §3:
a new process keeps the conversations, runs none of the old Submissions and settles none of them).

ADR-0062: a restart that cut the Turn re-admits it (`kept: true`, the re-admit text) and the run goes on;
only a kernel kill faults it, and its notice names that Turn's Agent; the next Turn after a kernel kill
waits on no Submission of the container that ended; a restart of a process that never held the Turn
faults nothing and names no one."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick, Say
from jr2_actors.harness import briefing
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.values.constants import PREVIOUS_SETTLE_SECONDS
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.identity import sandbox_name
from tests.support.serving import KEY, Serve
from tests.support.waiting import wait_until
from tests.support.workflows import RESTARTS

pytestmark = pytest.mark.slow

KERNEL_CODER = ("The Sandbox's processes were killed at its memory limit of 2Gi during `coder`'s Turn; "
                "/dev/shm was cleared.")
KERNEL = "The Sandbox's processes were killed at its memory limit of 2Gi; /dev/shm was cleared."


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None, signing_key=KEY.encode(),
                     harness_mode="strict") as c:
        yield c


@pytest.fixture
def serve(cluster: FakeCluster, tmp_path: Path) -> Iterator[Serve]:
    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    process = Serve(kubeconfig, tmp_path / "state", instance_harness=cluster.instance_harness_url)
    try:
        yield process
    finally:
        process.proc.send_signal(signal.SIGTERM)
        assert process.proc.wait(10) == 0


def admissions(cluster: FakeCluster, agent: str) -> list[dict[str, Any]]:
    return [a for a in cluster.admissions() if a["agent"] == agent]


def run(serve: Serve) -> str:
    return str(serve.call("POST", "/runs", json={"workflow": read_document(RESTARTS)}).json()["runId"])


def status(serve: Serve, run_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = serve.call("GET", f"/runs/{run_id}").json()
    return doc


def restarts(cluster: FakeCluster, name: str) -> int:
    """The restart count the operator published for the Sandbox (what the watch shows)."""
    def look(state: Any) -> int:
        for o in state.objects(SANDBOX):
            if o["metadata"]["name"] == name:
                return int(((o.get("status") or {}).get("harness") or {}).get("restartCount", 0))
        return 0

    return cluster.call(look)


def message(a: dict[str, Any]) -> str:
    return str((a.get("briefing") or {}).get("message", ""))


def test_a_restart_that_cut_the_turn_re_admits_it_and_the_run_ends_done(cluster: FakeCluster, serve: Serve) -> None:
    cluster.script("coder", [Say("working"), Hang()], [Pick("finish")])
    cluster.script("reviewer", [Pick("approve")])
    run_id = run(serve)
    name = sandbox_name(run_id, "F-1")
    wait_until(lambda: len(admissions(cluster, "coder")) == 1, timeout=30, what="the coder admitted")
    cluster.faults.harness_restart(name, watch_lag=0.5)  # not a kernel kill: the Turn goes on
    wait_until(lambda: status(serve, run_id).get("status") == "done", timeout=60, what="the run done")
    coder = admissions(cluster, "coder")
    assert len(coder) == 2 and coder[1]["body"]["kept"] is True and coder[1]["status"] == 200
    assert coder[1]["body"]["message"] == briefing.readmit("Fix it.")  # the same Turn, re-admitted
    assert coder[1]["bootId"] != coder[0]["bootId"]  # (a fault would have routed to `again`: "Fix it again.")


def test_a_kernel_kill_faults_the_turn_it_cut_and_the_next_turn_waits_on_nothing_of_the_old_process(
        cluster: FakeCluster, serve: Serve) -> None:
    cluster.script("coder", [Say("working"), Hang()], [Pick("finish")])
    cluster.script("reviewer", [Pick("approve")])
    run_id = run(serve)
    name = sandbox_name(run_id, "F-1")
    wait_until(lambda: len(admissions(cluster, "coder")) == 1, timeout=30, what="the coder admitted")
    cluster.faults.kernel_oom(name, watch_lag=0.5)
    wait_until(lambda: status(serve, run_id).get("status") == "done", timeout=60, what="the run done")
    coder = admissions(cluster, "coder")
    assert len(coder) == 2 and coder[1]["body"]["message"] == "Fix it again."  # `agent.fault` routed to `again`
    assert KERNEL_CODER in message(coder[1])  # the fault's notice names the Turn the kill ended
    assert sum(KERNEL_CODER in message(a) or KERNEL in message(a) for a in cluster.admissions()) == 1
    # The next Turn of that conversation waited on no Submission of the container that ended: admitted well
    # inside the settle bound after the new process began (the figure is docs/reliability.md's).
    began = next(b["began"] for b in cluster.harness_read(lambda core: list(core.boots))
                 if b["sandbox"] == name and b["bootId"] == coder[1]["bootId"])
    assert coder[1]["at"] - began < PREVIOUS_SETTLE_SECONDS / 2


def test_a_restart_the_watch_reports_after_the_next_turn_was_admitted_faults_nothing(
        cluster: FakeCluster, serve: Serve) -> None:
    """The next Turn's admission reaches the restarted Harness before the watch's report of the restart: the
    ended process never held it, so nothing is faulted (ADR-0062: a kill while no Turn runs faults nothing)."""
    cluster.script("coder", [Pick("wait")])
    cluster.script("triage", [Hang()])  # no Turn runs in F-1 while the triage waits on the Instance Harness
    cluster.script("reviewer", [Say("looking"), Hang()])
    run_id = run(serve)
    name = sandbox_name(run_id, "F-1")
    wait_until(lambda: status(serve, run_id).get("state") == "idle", timeout=30, what="the wait")
    cluster.faults.kernel_oom(name, watch_lag=3.0)  # the watch shows the end 3 s after the new process answers
    wait_until(lambda: cluster.harness(lambda core: core.pick_now("triage", "go")), timeout=30, what="the triage")
    wait_until(lambda: any(a["status"] == 200 for a in admissions(cluster, "reviewer")), timeout=30,
               what="the reviewer admitted to the new process")
    first = admissions(cluster, "reviewer")[0]
    ended = [b for b in cluster.harness_read(lambda core: list(core.boots)) if b["sandbox"] == name and "ended" in b]
    assert ended and first["bootId"] != ended[0]["bootId"]
    wait_until(lambda: restarts(cluster, name) >= 1, timeout=30, what="the watch's view of the restart")
    wait_until(lambda: cluster.harness(lambda core: core.pick_now("reviewer", "approve")), timeout=30,
               what="the reviewer's Turn hanging on, untouched")
    wait_until(lambda: status(serve, run_id).get("status") == "done", timeout=60, what="the run done")
    assert len(admissions(cluster, "reviewer")) == 1  # never cut, never re-admitted
    assert not any(KERNEL_CODER in message(a) for a in cluster.admissions())  # and its notice names no Turn
