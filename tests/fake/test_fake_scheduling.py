"""Issue 20 item 8: the fake places Sandboxes as kube-scheduler places pods, and says what it cannot place
in kube-scheduler's words — requests across nodes, taints and tolerations, node selectors, a ResourceQuota.

The messages are kube-scheduler's FitError (`0/<n> nodes are available: ` then each node's first failing
filter, counted, as "<count> <reason>" sorted as strings, then `.`), TaintToleration's
`node(s) had untolerated taint {key: value}`, NodeAffinity's `node(s) didn't match Pod's node
affinity/selector`, and the ResourceQuota admission's `exceeded quota: <name>, requested: …, used: …,
limited: …`. The fake adds no `preemption: …` tail (it preempts nothing).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import NO_NODES, Node, OperatorCore, Quota, Taint, make_nodes
from jr2_actors.run.listing.wire import wait_reason
from jr2_actors.watch.sandbox import view
from tests.conformance.clients import GROUP, NS, PLURAL, VERSION

NOW = 1_790_000_000.0
GI = 2**30


def sbx(name: str, cpu: str = "1", memory: str = "1Gi", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": "2026-09-30T10:00:00Z",
                         "generation": 1},
            "spec": {"podResources": {"requests": {"cpu": cpu, "memory": memory}}, **spec}}


def scheduled(statuses: dict[Any, dict[str, Any]], name: str) -> tuple[str, str, str]:
    cond = view({"status": statuses[(None, name)]}).condition("Scheduled")
    assert cond is not None
    return cond.status, cond.reason, cond.message


def test_requests_are_placed_across_nodes_until_none_fits() -> None:
    core = OperatorCore(nodes=make_nodes(3, cpu_millis=2000, memory_bytes=4 * GI))
    objs = [sbx(f"s{i}") for i in range(7)]
    d = core.reconcile(objs, NOW)
    placed = [str(d.statuses[(None, f"s{i}")].get("node")) for i in range(6)]
    assert sorted(placed) == ["fake-node-0001"] * 2 + ["fake-node-0002"] * 2 + ["fake-node-0003"] * 2
    assert scheduled(d.statuses, "s6") == ("False", "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")


def test_each_nodes_first_failing_filter_is_counted_and_sorted_as_the_scheduler_does() -> None:
    nodes = [Node("tainted", 8000, 8 * GI, taints=(Taint("gpu", "yes"),)),
             Node("elsewhere", 8000, 8 * GI, labels={"zone": "b"}),
             Node("small", 500, 8 * GI, labels={"zone": "a"}),
             Node("tiny", 500, GI // 2, labels={"zone": "a"})]
    d = OperatorCore(nodes=nodes).reconcile([sbx("a", cpu="1", memory="1Gi", nodeSelector={"zone": "a"})], NOW)
    # The tainted node fails TaintToleration before its labels are looked at; "tiny" is short of both.
    assert scheduled(d.statuses, "a")[2] == (
        "0/4 nodes are available: 1 Insufficient memory, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {gpu: yes}, 2 Insufficient cpu.")


def test_the_counts_sort_as_strings_as_gos_sort_strings_does() -> None:
    nodes = make_nodes(10, cpu_millis=500) + [Node("t", 8000, 8 * GI, taints=(Taint("a", ""),))] * 9
    d = OperatorCore(nodes=nodes).reconcile([sbx("a")], NOW)
    assert scheduled(d.statuses, "a")[2] == ("0/19 nodes are available: 10 Insufficient cpu, "
                                            "9 node(s) had untolerated taint {a: }.")


def test_a_thousand_full_nodes_in_the_schedulers_words(tmp_path: Path) -> None:
    with FakeCluster(namespace=NS, nodes=1000, harness=False) as cluster:
        api = config.new_client_from_config(config_file=cluster.write_kubeconfig(str(tmp_path / "kubeconfig")))
        custom = k8s.CustomObjectsApi(api)
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Sandbox", "metadata": {"name": "huge"},
            "spec": {"port": 8080, "podResources": {"requests": {"cpu": "5", "memory": "1Gi"}}}})
        cluster.reconcile()
        got = custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "huge")
        api.close()
    cond = view(got).condition("Scheduled")
    assert cond is not None and (cond.reason, cond.message) == (
        "Unschedulable", "0/1000 nodes are available: 1000 Insufficient cpu.")
    assert wait_reason("node", cond.message) == "capacity"  # the orchestrator reads it as the real one


def test_a_toleration_lets_a_pod_onto_a_tainted_node_and_prefer_no_schedule_keeps_none_off() -> None:
    nodes = [Node("gpu", 4000, 8 * GI, taints=(Taint("gpu", "yes"), Taint("spot", "", "PreferNoSchedule")))]
    d = OperatorCore(nodes=nodes).reconcile([
        sbx("plain"),
        sbx("equal", tolerations=[{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]),
        sbx("exists", tolerations=[{"key": "gpu", "operator": "Exists"}]),
        sbx("wrong", tolerations=[{"key": "gpu", "value": "no"}]),
        sbx("other-effect", tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}]),
        sbx("all", tolerations=[{"operator": "Exists"}])], NOW)
    for name in ("equal", "exists", "all"):
        assert d.statuses[(None, name)]["node"] == "gpu", name
    for name in ("plain", "wrong", "other-effect"):
        assert scheduled(d.statuses, name) == ("False", "Unschedulable",
                                               "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: yes}.")
    assert wait_reason("node", scheduled(d.statuses, "plain")[2]) == "taint"


def test_a_node_selector_picks_the_node_by_its_labels_and_hostname() -> None:
    nodes = [Node("a", 4000, 8 * GI, labels={"pool": "x"}), Node("b", 4000, 8 * GI, labels={"pool": "y"})]
    d = OperatorCore(nodes=nodes).reconcile([
        sbx("by-label", nodeSelector={"pool": "y"}),
        sbx("by-host", nodeSelector={"kubernetes.io/hostname": "a"}),
        sbx("nowhere", nodeSelector={"pool": "z"})], NOW)
    assert d.statuses[(None, "by-label")]["node"] == "b" and d.statuses[(None, "by-host")]["node"] == "a"
    assert scheduled(d.statuses, "nowhere")[2] == \
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


def test_no_nodes_is_the_schedulers_own_sentence() -> None:
    d = OperatorCore(nodes=[]).reconcile([sbx("a")], NOW)
    assert scheduled(d.statuses, "a") == ("False", "Unschedulable", NO_NODES)
    assert NO_NODES == "no nodes available to schedule pods"


def test_a_quota_refusal_names_every_resource_it_refuses() -> None:
    core = OperatorCore(nodes=make_nodes(4), quota=Quota(cpu_millis=4000, memory_bytes=8 * GI, name="team"))
    first = [sbx("a", cpu="3", memory="6Gi"), sbx("b", cpu="2", memory="4Gi")]
    d = core.reconcile(first, NOW)
    status, reason, message = scheduled(d.statuses, "b")
    assert (status, reason) == ("False", "QuotaExceeded") and "podUID" not in d.statuses[(None, "b")]
    assert message == ('pods "b" is forbidden: exceeded quota: team, requested: requests.cpu=2,requests.memory=4Gi, '
                       "used: requests.cpu=3,requests.memory=6Gi, limited: requests.cpu=4,requests.memory=8Gi")
    later = core.reconcile([*first, sbx("c", cpu="1", memory="1Gi")], NOW)
    assert later.statuses[(None, "c")]["node"]  # what still fits is admitted: the quota counts requests, not order


@pytest.fixture
def one_node(tmp_path: Path) -> Iterator[tuple[FakeCluster, k8s.CustomObjectsApi]]:
    with FakeCluster(namespace=NS, nodes=[Node("only", 1000, 4 * GI)], harness=False) as cluster:
        api = config.new_client_from_config(config_file=cluster.write_kubeconfig(str(tmp_path / "kubeconfig")))
        yield cluster, k8s.CustomObjectsApi(api)
        api.close()


def test_a_sandbox_waits_then_places_when_a_node_frees(one_node: tuple[FakeCluster, k8s.CustomObjectsApi]) -> None:
    cluster, custom = one_node

    def create(name: str) -> None:
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Sandbox", "metadata": {"name": name},
            "spec": {"port": 8080, "podResources": {"requests": {"cpu": "1", "memory": "1Gi"}}}})

    def status(name: str) -> Any:
        return view(custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name))

    create("first")
    create("second")
    cluster.reconcile()
    assert status("first").node == "only"
    waiting = status("second").condition("Scheduled")
    assert waiting is not None and (waiting.reason, waiting.message) == (
        "Unschedulable", "0/1 nodes are available: 1 Insufficient cpu.")
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "first")
    cluster.reconcile()
    placed = status("second")
    assert placed.node == "only" and placed.scheduling_reason == "Scheduled"


def test_nodes_as_a_count_and_the_unschedulable_fault_still_work(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        FakeCluster(nodes=True)
    with FakeCluster(namespace=NS, nodes=3, harness=False) as cluster:
        assert [n.name for n in cluster.operate(lambda core, now: list(core.nodes))] == [
            "fake-node-0001", "fake-node-0002", "fake-node-0003"]


def test_the_fault_levers_for_placing_still_speak_the_schedulers_and_the_quotas_words(
        one_node: tuple[FakeCluster, k8s.CustomObjectsApi]) -> None:
    cluster, custom = one_node

    def create(name: str) -> Any:
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Sandbox", "metadata": {"name": name},
            "spec": {"port": 8080, "podResources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}})
        cluster.reconcile()
        cond = view(custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)).condition("Scheduled")
        assert cond is not None
        return cond.reason, cond.message

    cluster.faults.unschedulable(3600)  # undone by a timer far past this test; the cluster's stop cancels it
    assert create("a") == ("Unschedulable", NO_NODES)
    cluster.faults.quota(3600, cpu_millis=100)
    # "a"'s pod exists, unplaced: a quota counts it, as a real one counts a Pending pod.
    assert create("b") == ("QuotaExceeded", 'pods "b" is forbidden: exceeded quota: jr2, requested: '
                                             "requests.cpu=500m, used: requests.cpu=500m, limited: requests.cpu=100m")
