"""Issue 30 item 2: the fake operator's core (OperatorCore) behind its second shell, `RemoteOperator`, on a
real API server — a Sandbox the orchestrator's identity applies there comes to life as on the fake: Scheduled,
Ready with an endpoint at the fake Harness on loopback (which answers, token checked), a capacity wait in the
scheduler's words, a Harness restart's count and last end, an eviction's Lost. Every status is the real
server's to accept: its CRD's schema (status subresource) validates each one the core writes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from jr2_actors.fake.operator.remote import RemoteOperator, merge_diff
from jr2_actors.harness.tokens import DIGEST_ENV, harness_token, token_digest
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.frames import WatchEvent
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.watch.sandbox import view
from realcluster.cluster import RealCluster

KEY = os.urandom(32)


@pytest.fixture
def operator(real_cluster: RealCluster) -> Iterator[RemoteOperator]:
    with RemoteOperator(real_cluster.access(real_cluster.admin), signing_key=KEY) as op:
        yield op


@pytest.fixture
def client(real_cluster: RealCluster) -> Iterator[KubeClient]:
    c = KubeClient(real_cluster.access())  # the orchestrator's identity: the shipped Role
    yield c
    for item in c.list(SANDBOX).items:
        c.delete(SANDBOX, item["metadata"]["name"])
    c.close()


def await_sandbox(client: KubeClient, name: str, holds: Callable[[dict[str, Any]], bool],
                  within: float = 30) -> dict[str, Any]:
    """The Sandbox once `holds(it)`: its watch's events waited on (bounded by the server's timeoutSeconds
    and `within` in all), never a sleep."""
    current = client.get(SANDBOX, name)
    if current is not None and holds(current):
        return current
    rv = (current or {}).get("metadata", {}).get("resourceVersion") or client.list(SANDBOX).resource_version
    # The server ends the watch after `within` seconds: the bound on the wait.
    with client.watch(SANDBOX, resource_version=rv, timeout_seconds=int(within)) as stream:
        for frame in stream:
            if isinstance(frame, WatchEvent) and frame.object["metadata"]["name"] == name \
                    and holds(dict(frame.object)):
                return dict(frame.object)
    raise AssertionError(f"Sandbox {name} never held within {within} s; last: {client.get(SANDBOX, name)}")


def apply_sandbox(client: KubeClient, name: str, **spec: Any) -> dict[str, Any]:
    env = [{"name": DIGEST_ENV, "value": token_digest(harness_token(KEY, name))}]
    return client.apply(SANDBOX, name, {"spec": {"port": 8080, "env": env, **spec}})


def test_a_sandbox_comes_to_life_with_its_harness(operator: RemoteOperator, client: KubeClient) -> None:
    apply_sandbox(client, "life")
    ready = view(await_sandbox(client, "life", lambda o: view(o).phase == "Ready"))
    assert ready.endpoint == f"{operator.harness_url}/life"
    assert ready.node.startswith("fake-node-") and ready.pod_uid
    health = requests.get(f"{ready.endpoint}/healthz", timeout=10)
    assert health.status_code == 200
    headers = {"Authorization": f"Bearer {harness_token(KEY, 'life')}"}
    assert requests.get(f"{ready.endpoint}/conversations", headers=headers, timeout=10).status_code != 401
    wrong = {"Authorization": f"Bearer {harness_token(KEY, 'other')}"}
    assert requests.get(f"{ready.endpoint}/conversations", headers=wrong, timeout=10).status_code == 401


def test_a_capacity_wait_in_the_schedulers_words(operator: RemoteOperator, client: KubeClient) -> None:
    del operator
    apply_sandbox(client, "too-big", podResources={"requests": {"cpu": "64"}})
    waiting = await_sandbox(client, "too-big", lambda o: any(
        c["type"] == "Scheduled" and c["reason"] == "Unschedulable" for c in o.get("status", {}).get("conditions", [])))
    (scheduled,) = [c for c in waiting["status"]["conditions"] if c["type"] == "Scheduled"]
    assert scheduled["status"] == "False"
    assert scheduled["message"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert waiting["status"]["phase"] == "Pending"


def test_a_restart_then_an_eviction(operator: RemoteOperator, client: KubeClient) -> None:
    apply_sandbox(client, "restarts")
    await_sandbox(client, "restarts", lambda o: view(o).phase == "Ready")
    operator.operate(lambda core, now: core.kill_harness("restarts", now, reason="OOMKilled", message="oom"))
    restarted = view(await_sandbox(client, "restarts", lambda o: view(o).restart_count == 1))
    assert restarted.last_terminated is not None and restarted.last_terminated.reason == "OOMKilled"
    assert restarted.last_terminated.exit_code == 137
    operator.operate(lambda core, now: core.evict("restarts", reason="Evicted", message="The node was low"))
    lost = await_sandbox(client, "restarts", lambda o: view(o).phase == "Lost")
    assert lost["status"]["harness"]["restartCount"] == 1  # a dropped field is gone, a kept one stays


def test_a_sandbox_deleted_and_made_again_is_a_new_one(operator: RemoteOperator, client: KubeClient) -> None:
    first = apply_sandbox(client, "again")
    await_sandbox(client, "again", lambda o: view(o).phase == "Ready")
    client.delete(SANDBOX, "again", uid=first["metadata"]["uid"])
    second = apply_sandbox(client, "again")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    ready = view(await_sandbox(client, "again", lambda o: view(o).phase == "Ready"
                               and o["metadata"]["uid"] == second["metadata"]["uid"]))
    assert ready.restart_count == 0 and ready.endpoint.endswith("/again")
    del operator


def test_merge_diff_nulls_what_went_and_keeps_what_stayed() -> None:
    old = {"phase": "Ready", "harness": {"restartCount": 1, "lastTerminated": {"reason": "OOMKilled"}}, "node": "n"}
    new = {"phase": "Lost", "harness": {"restartCount": 1}}
    assert merge_diff(old, new) == {"phase": "Lost", "harness": {"lastTerminated": None}, "node": None}
    assert merge_diff(new, new) == {}
