"""The fake operator: placement over nodes and a quota, readiness, Harness faults, loss, the idle GC."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node, OperatorCore, Quota
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.watch.sandbox import view

T0 = 1_790_000_000.0


def sbx(name: str, cpu: str = "1", memory: str = "2Gi", created: str = "2026-09-30T10:00:00Z",
        keepalive: str | None = None, idle: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "creationTimestamp": created, "generation": 1,
                            "annotations": {}}
    if keepalive:
        meta["annotations"]["jr2.dev/keepalive"] = keepalive
    spec: dict[str, Any] = {"podResources": {"requests": {"cpu": cpu, "memory": memory}}}
    if idle:
        spec["idleTimeout"] = idle
    return {"metadata": meta, "spec": spec}


def core(**kw: Any) -> OperatorCore:
    kw.setdefault("nodes", [Node("n1", 2000, 4 * 2**30), Node("n2", 2000, 4 * 2**30)])
    return OperatorCore(start_seconds=5, endpoint="http://harness", **kw)


NOW = 1_790_000_000.0  # 2026-09-21; the fixtures' creation is 2026-09-30, so the idle GC never fires here


def test_full_cluster_is_unschedulable_with_the_schedulers_words() -> None:
    c = core()
    objs = [sbx("a", cpu="2"), sbx("b", cpu="2"), sbx("c", cpu="2")]
    d = c.reconcile(objs, NOW)
    views = {n: view({"metadata": {"name": n}, "status": s}) for (_, n), s in d.statuses.items()}
    assert views["a"].scheduling_reason == "Scheduled" and views["b"].scheduling_reason == "Scheduled"
    c_status = views["c"]
    assert c_status.phase == "Pending"
    sched = c_status.condition("Scheduled")
    assert sched is not None
    assert (sched.status, sched.reason) == ("False", "Unschedulable")
    assert sched.message == "0/2 nodes are available: 2 Insufficient cpu."
    assert c_status.pod_uid  # the pod exists; it has no node


def test_memory_shortage_is_named() -> None:
    d = core().reconcile([sbx("a", cpu="1", memory="6Gi")], NOW)
    sched = view({"status": d.statuses[(None, "a")]}).condition("Scheduled")
    assert sched is not None and sched.message == "0/2 nodes are available: 2 Insufficient memory."


def test_quota_refuses_with_no_pod_uid_and_the_api_servers_words() -> None:
    c = core(quota=Quota(cpu_millis=2000))
    d = c.reconcile([sbx("a"), sbx("b"), sbx("ws-x")], NOW)
    refused = view({"status": d.statuses[(None, "ws-x")]})
    assert refused.pod_uid == ""
    sched = refused.condition("Scheduled")
    assert sched is not None
    assert sched.reason == "QuotaExceeded"
    assert sched.message == ('pods "ws-x" is forbidden: exceeded quota: jr2, requested: requests.cpu=1, '
                             "used: requests.cpu=2, limited: requests.cpu=2")


def test_freed_capacity_places_the_waiting_sandbox() -> None:
    c = core()
    d = c.reconcile([sbx("a", cpu="2"), sbx("b", cpu="2"), sbx("c", cpu="2")], NOW)
    assert view({"status": d.statuses[(None, "c")]}).scheduling_reason == "Unschedulable"
    d = c.reconcile([sbx("b", cpu="2"), sbx("c", cpu="2")], NOW + 1)
    assert view({"status": d.statuses[(None, "c")]}).scheduling_reason == "Scheduled"


def test_ready_after_the_start_time_and_transition_times_are_stable() -> None:
    c = core()
    first = c.reconcile([sbx("a")], NOW)
    assert first.statuses[(None, "a")]["phase"] == "Pending"
    assert first.next_wake == NOW + 5
    later = c.reconcile([sbx("a")], NOW + 5)
    assert later.statuses[(None, "a")]["phase"] == "Ready"
    again = c.reconcile([sbx("a")], NOW + 50)
    assert again.statuses[(None, "a")] == later.statuses[(None, "a")]  # nothing changed, nothing to write
    assert later.statuses[(None, "a")]["endpoint"] == "http://harness/a"


def test_harness_kill_and_crash_loop_and_eviction() -> None:
    c = core()
    c.reconcile([sbx("a"), sbx("b"), sbx("e")], NOW)
    c.kill_harness("a", NOW + 6, reason="OOMKilled", message="node: heap grew past the container limit\nKilled")
    c.crash_loop("b", NOW + 6, message="jr2 harness: listen EADDRINUSE: port 8080 is taken")
    c.evict("e")
    d = c.reconcile([sbx("a"), sbx("b"), sbx("e")], NOW + 6)
    a, b, e = (view({"status": d.statuses[(None, n)]}) for n in "abe")
    assert a.phase == "Ready" and a.restart_count == 1
    assert a.last_terminated is not None and (a.last_terminated.reason, a.last_terminated.exit_code) == (
        "OOMKilled", 137)
    assert b.phase == "Pending" and b.waiting_reason == "CrashLoopBackOff" and b.restart_count == 2
    assert b.last_terminated is not None and "EADDRINUSE" in b.last_terminated.message
    assert e.phase == "Lost"
    lost = e.condition("Lost")
    assert lost is not None and (lost.status, lost.reason) == ("True", "Evicted")


def test_node_loss_loses_its_sandboxes_and_frees_nothing_twice() -> None:
    c = core()
    d = c.reconcile([sbx("a", cpu="2"), sbx("b", cpu="2")], NOW)
    node_a = d.statuses[(None, "a")]["node"]
    c.lose_node(node_a)
    d = c.reconcile([sbx("a", cpu="2"), sbx("b", cpu="2")], NOW + 1)
    assert d.statuses[(None, "a")]["phase"] == "Lost"
    assert view({"status": d.statuses[(None, "a")]}).condition("Lost").reason == "NodeLost"  # type: ignore[union-attr]
    assert d.statuses[(None, "b")]["phase"] != "Lost"


def test_idle_gc_reaps_after_max_of_creation_and_keepalive_plus_idle_timeout() -> None:
    c = core()
    created = "2026-09-30T10:00:00Z"
    t_created = datetime.fromisoformat("2026-09-30T10:00:00+00:00").timestamp()
    kept = sbx("kept", created=created, keepalive="2026-09-30T10:20:00.000Z", idle="30m")
    stale = sbx("stale", created=created, idle="30m")
    d = c.reconcile([kept, stale], t_created + 31 * 60)
    assert d.deletes == ((None, "stale", "uid-stale"),)
    assert c.reconcile([kept], t_created + 50 * 60 - 1).deletes == ()
    assert c.reconcile([kept], t_created + 50 * 60).deletes == ((None, "kept", "uid-kept"),)


# -- the actor, on a virtual clock ---------------------------------------------------------------------

@pytest.fixture
def operated() -> Iterator[tuple[FakeCluster, VirtualClock]]:
    clock = VirtualClock(wall=T0)
    with FakeCluster(clock=clock, nodes=[Node("n1", 1000, 4 * 2**30)], start_seconds=10) as cluster:
        yield cluster, clock


def test_operator_actor_places_readies_and_writes_only_on_change(operated: tuple[FakeCluster, VirtualClock]) -> None:
    cluster, clock = operated
    client = cluster.client()
    client.apply(SANDBOX, "ws-a", {"spec": {"podResources": {"requests": {"cpu": "1", "memory": "1Gi"}}}})
    client.apply(SANDBOX, "ws-b", {"spec": {"podResources": {"requests": {"cpu": "1", "memory": "1Gi"}}}})
    cluster.reconcile()
    a = view(client.get(SANDBOX, "ws-a") or {})
    b = view(client.get(SANDBOX, "ws-b") or {})
    assert (a.phase, a.scheduling_reason) == ("Pending", "Scheduled")
    assert (b.phase, b.scheduling_reason) == ("Pending", "Unschedulable")
    rv = cluster.resource_version
    cluster.reconcile()
    assert cluster.resource_version == rv  # status written only when it changes
    clock.advance(10)
    cluster.reconcile()
    assert view(client.get(SANDBOX, "ws-a") or {}).phase == "Ready"
    cluster.add_node(Node("n2", 1000, 4 * 2**30))
    assert view(client.get(SANDBOX, "ws-b") or {}).scheduling_reason == "Scheduled"
    cluster.evict("ws-a")
    assert view(client.get(SANDBOX, "ws-a") or {}).phase == "Lost"


def test_a_step_looks_only_at_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    c = core(nodes=[Node("big", 1_000_000, 2**50)])
    objs = [sbx(f"s{i:03d}", cpu="10m", memory="1Mi") for i in range(200)]
    for o in objs:
        c.observe("ADDED", o)
    c.step(NOW)
    looked: list[str] = []
    real_status = c._status

    def counting(obj: Any, rec: Any, now: float) -> dict[str, Any]:
        looked.append(obj["metadata"]["name"])
        return real_status(obj, rec, now)

    monkeypatch.setattr(c, "_status", counting)
    changed = {**objs[7], "metadata": {**objs[7]["metadata"], "labels": {"x": "y"}}}
    c.observe("MODIFIED", changed)
    c.step(NOW + 1)
    assert looked == ["s007"]


def test_freed_capacity_looks_again_at_what_waits_for_it() -> None:
    c = core(nodes=[Node("n1", 1000, 4 * 2**30)])
    a, b = sbx("a", cpu="1"), sbx("b", cpu="1")
    c.observe("ADDED", a)
    c.observe("ADDED", b)
    first = c.step(NOW)
    assert view({"status": first.statuses[(None, "b")]}).scheduling_reason == "Unschedulable"
    c.observe("DELETED", a)
    second = c.step(NOW + 1)
    assert view({"status": second.statuses[(None, "b")]}).scheduling_reason == "Scheduled"


def test_operator_reconciles_sandboxes_in_every_namespace(operated: tuple[FakeCluster, VirtualClock]) -> None:
    from jr2_actors.kube.kinds import NAMESPACE

    cluster, clock = operated
    client = cluster.client()
    client.create(NAMESPACE, {"metadata": {"name": "elsewhere"}})
    client.create(SANDBOX, {"metadata": {"name": "ws-x"},
                            "spec": {"podResources": {"requests": {"cpu": "1", "memory": "1Gi"}}}},
                  namespace="elsewhere")
    cluster.reconcile()
    clock.advance(10)
    cluster.reconcile()
    assert view(client.get(SANDBOX, "ws-x", namespace="elsewhere") or {}).phase == "Ready"


def test_each_pod_uid_is_the_shells_and_differs_by_default() -> None:
    handed = iter(["uid-from-the-shell-1", "uid-from-the-shell-2"])
    d = core(new_uid=lambda: next(handed)).reconcile([sbx("a"), sbx("b")], NOW)
    uids = sorted(view({"metadata": {"name": n}, "status": s}).pod_uid for (_, n), s in d.statuses.items())
    assert uids == ["uid-from-the-shell-1", "uid-from-the-shell-2"]
    plain = core().reconcile([sbx("a"), sbx("b")], NOW)  # the core's own: a counter, never random
    assert len({view({"metadata": {"name": n}, "status": s}).pod_uid for (_, n), s in plain.statuses.items()}) == 2
