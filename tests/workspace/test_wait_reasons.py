"""Issue 19 item 6: each wait carries a token beside the scheduler's words (ADR-0064 keeps the words whole),
and `status` says when no current node can take the Sandbox."""

from __future__ import annotations

import json
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import OperatorCore
from jr2_actors.run.listing.render import waiting_line
from jr2_actors.run.listing.wire import WAIT_REASONS, wait_reason
from jr2_actors.values.workflow import read_document
from tests.support.metrics_text import value
from tests.support.serving import KEY, Serve, jr2
from tests.support.waiting import wait_until
from tests.support.workflows import one_state


@pytest.mark.parametrize(("on", "message", "reason"), [
    ("node", "0/3 nodes are available: 3 Insufficient cpu.", "capacity"),
    ("node", "0/3 nodes are available: 1 Insufficient memory, 2 node(s) had untolerated taint "
             "{gpu: true}. preemption: 0/3 nodes are available: 3 No preemption victims found.", "capacity"),
    ("node", "0/2 nodes are available: 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }.",
     "taint"),
    ("node", "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.", "selector"),
    ("quota", 'pods "s-1" is forbidden: exceeded quota: jr2, requested: cpu=1, used: cpu=2, limited: cpu=2',
     "quota"),
    ("node", "", "other"),
    ("node", "0/1 nodes are available: 1 node(s) had volume node affinity conflict.", "selector"),
])
def test_a_wait_is_classified_by_its_message(on: str, message: str, reason: str) -> None:
    assert wait_reason(on, message) == reason and reason in WAIT_REASONS


def test_status_says_when_no_current_node_can_take_it() -> None:
    entry = {"child": "F-1", "on": "node", "reason": "selector", "since": "2026-01-01T00:00:00.000Z",
             "message": "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."}
    line = waiting_line(entry, 1767225720.0)  # two minutes later
    assert line == ("F-1 waiting for a node: 0/4 nodes are available: 4 node(s) didn't match Pod's node "
                    "affinity/selector. (selector, since 2m00s); no current node can take it")
    capacity = waiting_line({**entry, "reason": "capacity"}, 1767225720.0)
    assert capacity.endswith("(capacity, since 2m00s)")


@pytest.mark.slow
def test_serve_counts_open_waits_by_reason_and_status_says_no_node_can_take_it(tmp_path: Path) -> None:
    """Through `serve` on the fake cluster: every node tainted, a run's Workspace waits with reason `taint`;
    `/metrics` counts it under `jr2_run_waits_open{on="node",reason="taint"}` (every reason's series there
    from the start, at 0), `status` prints the reason and that no current node can take it, and once a node
    can the wait closes and the series is back to 0."""
    with FakeCluster(start_seconds=0.05, bookmark_interval=None, signing_key=KEY.encode()) as cluster:
        cluster.harness(lambda core: core.pick_first_allowed(True))
        served = Serve(cluster.write_kubeconfig(str(tmp_path / "kubeconfig")), tmp_path / "state")
        try:
            def waits(reason: str) -> float | None:
                return value(served.call("GET", "/metrics").text, "jr2_run_waits_open", on="node", reason=reason)

            assert {r: waits(r) for r in WAIT_REASONS if r != "quota"} == dict.fromkeys(
                ("capacity", "taint", "selector", "other"), 0.0)
            cluster.faults.unschedulable(seconds=3600, taint="dedicated=gpu:NoSchedule")
            resp = served.call("POST", "/runs", json={"workflow": read_document(one_state("tainted"))})
            assert resp.status_code == 201, resp.text
            run_id = resp.json()["runId"]
            wait_until(lambda: waits("taint") == 1, timeout=60, what="the taint wait counted on /metrics")
            status = jr2("status", run_id, "--server", served.url)
            assert status.returncode == 0, status.stderr
            assert "had untolerated taint {dedicated: gpu}. (taint, since " in status.stdout, status.stdout
            waiting = next(line for line in status.stdout.splitlines() if " waiting for a node: " in line)
            assert waiting.endswith("; no current node can take it"), status.stdout
            doc = json.loads(jr2("status", run_id, "--server", served.url, "-o", "json").stdout)
            assert [w["reason"] for w in doc["waiting"]] == ["taint"]
            missing = jr2("status", "r-000000000000", "--server", served.url)  # bad input: one line, exit 2
            assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr

            def untaint(core: OperatorCore, now: float) -> None:
                for node in list(core.nodes):
                    core.nodes.remove(node)
                    core.add_node(replace(node, taints=()))

            cluster.operate(untaint)
            wait_until(lambda: waits("taint") == 0, timeout=60, what="the wait closed on /metrics")
            wait_until(lambda: served.call("GET", f"/runs/{run_id}").json()["status"] == "done", timeout=60,
                       what="the run placed and done")
        finally:
            served.proc.send_signal(signal.SIGTERM)
            assert served.proc.wait(60) == 0
