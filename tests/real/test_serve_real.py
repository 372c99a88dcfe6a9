"""Issue 30 item 3: the orchestrator's end-to-end workflows through `serve` as a process on a real
kube-apiserver, as its ServiceAccount under the shipped Role, with the fake operator and Harness brought to
that server by `RemoteOperator` (item 2): a run to done (its Sandbox applied as `jr2`, its token Secret owned
by the Sandbox), a capacity wait with the scheduler's words, an eviction seen as `workspace.lost`, a guard
memory kill's notice in the next Turn's Briefing, a restart of `serve` with a live run, and the API server
itself restarting under a live run (its watch cache gone: the watch's 410, a re-list, nothing lost)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.harness.core import GuardKill, Hang, Pick, Say
from jr2_actors.fake.operator.core import Node
from jr2_actors.fake.operator.remote import RemoteOperator
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SANDBOX, SECRET
from jr2_actors.values.constants import SERVE_STOP_SECONDS
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.identity import sandbox_name
from realcluster.cluster import ORCHESTRATOR_UIDS, RealCluster
from tests.support.serving import KEY, Serve
from tests.support.waiting import wait_until
from tests.support.workflows import HOLD_UNTIL_RELEASED, one_state

pytestmark = pytest.mark.slow
ONE_STATE = one_state("real")
GUARD = ("The Sandbox's processes were killed at its memory limit (peak 1.9Gi of 2Gi) during `worker`'s Turn; "
         "/dev/shm was cleared. Anything that was running in the Sandbox at that time is gone.")
TWO_TURNS = ONE_STATE.replace('memory: "1Gi"', 'memory: "2Gi"').replace(
    "on: {finish: done}", "on: {finish: again}").replace(
    "  done: {final: done}", "  again:\n    holds: [W]\n    turn: {agent: worker, prompt: \"Again.\"}\n"
    "    on: {finish: done}\n  done: {final: done}")


@pytest.fixture
def admin(real_cluster: RealCluster) -> Iterator[KubeClient]:
    """The test's own hand; every Sandbox and Secret a test left is removed (no controller-manager here,
    so no garbage collector: the owned Secrets go by hand)."""
    c = KubeClient(real_cluster.access(real_cluster.admin))
    yield c
    for kind in (SANDBOX, SECRET):
        for item in c.list(kind).items:
            if kind is SANDBOX or item["metadata"].get("ownerReferences"):
                c.delete(kind, item["metadata"]["name"])
    c.close()


def operator(cluster: RealCluster, **kw: Any) -> RemoteOperator:
    return RemoteOperator(cluster.access(cluster.admin), signing_key=KEY.encode(), start_seconds=0.05, **kw).start()


def serve(cluster: RealCluster, op: RemoteOperator, tmp_path: Path, state: str = "state") -> Serve:
    kubeconfig = tmp_path / "kubeconfig"
    if not kubeconfig.exists():
        cluster.write_kubeconfig(str(kubeconfig))  # the orchestrator's ServiceAccount: the shipped Role
    return Serve(str(kubeconfig), tmp_path / state, instance_harness=op.instance_harness_url)


def stop(s: Serve) -> None:
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(SERVE_STOP_SECONDS) == 0, "".join(s.lines)
    assert not s.tracebacks(), "".join(s.lines)


def submit(s: Serve, text: str) -> str:
    resp = s.call("POST", "/runs", json={"workflow": read_document(text)})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["runId"])


def status(s: Serve, run_id: str) -> dict[str, Any]:
    got: dict[str, Any] = s.call("GET", f"/runs/{run_id}").json()
    return got


def lost_line(s: Serve, run_id: str) -> dict[str, Any] | None:
    """The run's `workspace.lost` line, read from its feed (the event stream, from the start) up to the
    `ended` line, which an ended run's feed holds; each read bounded by the call's 10 s timeout."""
    with s.call("GET", f"/runs/{run_id}/events", stream=True) as stream:
        kind = ""
        for line in stream.iter_lines(decode_unicode=True):
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: ") and kind in ("event", "ended"):
                doc: dict[str, Any] = json.loads(line.removeprefix("data: "))
                if kind == "ended":
                    return None
                if doc.get("event") == "workspace.lost":
                    return doc
    return None


def test_a_run_to_done_with_its_sandbox_and_owned_secret(real_cluster: RealCluster, admin: KubeClient,
                                                        tmp_path: Path) -> None:
    op = operator(real_cluster)
    s = serve(real_cluster, op, tmp_path)
    try:
        op.harness(lambda core: core.script("worker", [[Say("on it"), Hang()]]))
        run_id = submit(s, ONE_STATE)
        name = sandbox_name(run_id, "W")
        wait_until(lambda: (status(s, run_id).get("turn") or {}).get("phase") == "running", timeout=60,
                   what="the Turn running on the real server")
        sb = admin.get(SANDBOX, name)
        assert sb is not None and sb["status"]["phase"] == "Ready"
        # Created (POST, no fieldManager: the server names the manager after the user agent); its status
        # written by the operator; server-side apply as `jr2` comes with a re-adoption (the restart's test).
        managers = {(e["manager"], e["operation"], e.get("subresource")) for e in sb["metadata"]["managedFields"]}
        assert ("jr2-actors", "Update", None) in managers, managers
        secret = admin.get(SECRET, f"{name}-token")
        assert secret is not None
        (owner,) = secret["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Sandbox", name, sb["metadata"]["uid"])
        op.harness(lambda core: core.pick_now("worker", "finish"))
        wait_until(lambda: status(s, run_id).get("status") == "done", timeout=60, what="the run done")
    finally:
        stop(s)
        op.stop()


def test_a_capacity_wait_in_the_schedulers_words(real_cluster: RealCluster, admin: KubeClient,
                                                tmp_path: Path) -> None:
    del admin
    op = operator(real_cluster, nodes=[Node("only", 1500, 8 * 2**30)])
    s = serve(real_cluster, op, tmp_path)
    try:
        op.harness(lambda core: core.script("holder", [[Say("holding"), Hang()]]))
        op.harness(lambda core: core.script("worker", [[Pick("finish")]]))
        first = submit(s, HOLD_UNTIL_RELEASED)
        wait_until(lambda: (status(s, first).get("turn") or {}).get("phase") == "running", timeout=60,
                   what="the holder running")
        second = submit(s, ONE_STATE)
        wait_until(lambda: bool(status(s, second).get("waiting")), timeout=60, what="the second run waiting")
        (waiting,) = status(s, second)["waiting"]
        assert (waiting["child"], waiting["on"], waiting["reason"]) == ("W", "node", "capacity")
        assert waiting["message"] == "0/1 nodes are available: 1 Insufficient cpu."
        op.harness(lambda core: core.pick_now("holder", "release"))
        wait_until(lambda: status(s, second).get("status") == "done", timeout=60, what="the second run done")
    finally:
        stop(s)
        op.stop()


def test_an_eviction_is_workspace_lost(real_cluster: RealCluster, admin: KubeClient, tmp_path: Path) -> None:
    del admin
    op = operator(real_cluster)
    s = serve(real_cluster, op, tmp_path)
    try:
        op.harness(lambda core: core.script("worker", [[Say("working"), Hang()]]))
        run_id = submit(s, ONE_STATE.replace("on: {finish: done}", "on: {never: done}"))
        wait_until(lambda: (status(s, run_id).get("turn") or {}).get("phase") == "running", timeout=60,
                   what="the Turn running")
        name = sandbox_name(run_id, "W")
        op.operate(lambda core, now: core.evict(name))
        wait_until(lambda: status(s, run_id).get("status") == "failed", timeout=30, what="the run failed")
        assert status(s, run_id)["fault"] == "Evicted: The node was low on resource: memory."
        lost = lost_line(s, run_id)
        assert lost is not None and lost["reason"] == "Evicted: The node was low on resource: memory.", lost
    finally:
        stop(s)
        op.stop()


def test_a_guard_kill_reaches_the_next_turn_in_the_briefings_words(real_cluster: RealCluster, admin: KubeClient,
                                                                   tmp_path: Path) -> None:
    del admin
    op = operator(real_cluster)
    s = serve(real_cluster, op, tmp_path)
    try:
        op.harness(lambda core: core.script("worker", [[Say("tests"), GuardKill(peak="1.9Gi", limit="2Gi"),
                                                        Pick("finish")], [Pick("finish")]]))
        run_id = submit(s, TWO_TURNS)
        wait_until(lambda: status(s, run_id).get("status") == "done", timeout=60, what="the run done")
        admitted = op.harness_read(lambda c: list(c.admissions))
        briefings = [(a.get("briefing") or {}).get("message", "") for a in admitted]
        assert len(briefings) == 2 and GUARD not in briefings[0] and GUARD in briefings[1]
    finally:
        stop(s)
        op.stop()


def test_a_restart_of_serve_with_a_live_run_readopts_its_sandbox(real_cluster: RealCluster, admin: KubeClient,
                                                                 tmp_path: Path) -> None:
    op = operator(real_cluster)
    first = serve(real_cluster, op, tmp_path)
    try:
        op.harness(lambda core: core.script("worker", [[Say("working"), Hang()], [Pick("finish")]]))
        run_id = submit(first, ONE_STATE)
        wait_until(lambda: (status(first, run_id).get("turn") or {}).get("phase") == "running", timeout=60,
                   what="the Turn running")
        uid = (admin.get(SANDBOX, sandbox_name(run_id, "W")) or {})["metadata"]["uid"]
    finally:
        stop(first)
    second = serve(real_cluster, op, tmp_path)
    try:
        wait_until(lambda: status(second, run_id).get("status") == "done", timeout=60, what="the restored run")
        assert [i["metadata"]["uid"] for i in admin.list(SANDBOX).items] in ([uid], [])  # re-adopted, not remade
    finally:
        stop(second)
        op.stop()


def test_the_api_server_restarting_under_a_live_run_loses_nothing(real_cluster: RealCluster, admin: KubeClient,
                                                                 tmp_path: Path) -> None:
    del admin
    op = operator(real_cluster)
    s = serve(real_cluster, op, tmp_path)
    try:
        op.harness(lambda core: core.script("worker", [[Say("working"), Hang()]]))
        run_id = submit(s, ONE_STATE)
        wait_until(lambda: (status(s, run_id).get("turn") or {}).get("phase") == "running", timeout=60,
                   what="the Turn running")
        real_cluster.compact()
        real_cluster.restart()  # every watch ends; a resume from an old version is now a 410
        op.harness(lambda core: core.pick_now("worker", "finish"))
        wait_until(lambda: status(s, run_id).get("status") == "done", timeout=60, what="the run done after it")
        metrics = s.call("GET", "/metrics").text
        assert "jr2_watch" in metrics
    finally:
        stop(s)
        op.stop()


def test_the_token_file_replaced_under_a_running_serve_is_read_at_the_next_request(
        real_cluster: RealCluster, admin: KubeClient, tmp_path: Path) -> None:
    """ADR-0063: the token file is read on every request. The server's audit log names the token each request
    carried (its uid in the token file): a run before the file is replaced is written with the first token, the
    next run, by the same `serve`, with the second. (The 401 answered by one re-read: test_watch_rules.py.)"""
    del admin
    op = operator(real_cluster)
    s = serve(real_cluster, op, tmp_path)
    try:
        op.harness(lambda core: core.script("worker", [[Pick("finish")], [Pick("finish")]]))
        first = submit(s, ONE_STATE)
        wait_until(lambda: status(s, first).get("status") == "done", timeout=60, what="the first run done")
        before = len(real_cluster.audit())
        real_cluster.rotate_orchestrator_token()
        second = submit(s, ONE_STATE)
        wait_until(lambda: status(s, second).get("status") == "done", timeout=60, what="the second run done")
    finally:
        stop(s)
        op.stop()
    events = real_cluster.audit()

    def creates(among: list[dict[str, Any]], run_id: str) -> set[str]:
        name = sandbox_name(run_id, "W")
        return {e["user"]["uid"] for e in among if e["verb"] == "create" and e.get("userAgent", "").startswith(
            "jr2-actors/") and e.get("objectRef", {}).get("name") in (name, None)
            and e.get("objectRef", {}).get("resource") == "sandboxes"}

    assert creates(events[:before], first) == {ORCHESTRATOR_UIDS[0]}
    assert creates(events[before:], second) == {ORCHESTRATOR_UIDS[1]}
