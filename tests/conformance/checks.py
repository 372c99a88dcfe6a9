"""The conformance suite's checks: each written once against `clients.Client`, run for every client that offers
the operation (`clients.NOT_OFFERED` names the gaps). What each asserts is what a real kube-apiserver answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from tests.conformance.clients import API_VERSION, Client, ClientError

Check = Callable[[Client, FakeCluster], None]
CHECKS: dict[str, Check] = {}


def check(fn: Check) -> Check:
    CHECKS[fn.__name__.removeprefix("check_")] = fn
    return fn


def sandbox(name: str, run: str = "r1", port: int = 8080) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "Sandbox",
            "metadata": {"name": name, "labels": {"jr2.dev/run": run}}, "spec": {"port": port}}


@check
def check_create_get(client: Client, cluster: FakeCluster) -> None:
    created = client.create(sandbox("a"))
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    got = client.get("a")
    assert got["metadata"]["uid"] == created["metadata"]["uid"] and got["spec"]["port"] == 8080
    with pytest.raises(ClientError) as again:
        client.create(sandbox("a"))
    assert again.value.code == 409  # AlreadyExists
    with pytest.raises(ClientError) as missing:
        client.get("nope")
    assert missing.value.code == 404


@check
def check_list_selector(client: Client, cluster: FakeCluster) -> None:
    for name, run in (("a", "r1"), ("b", "r2"), ("c", "r1")):
        client.create(sandbox(name, run))
    names, rv = client.names("jr2.dev/run=r1")
    assert names == ["a", "c"]
    assert rv is None or rv == str(cluster.resource_version)  # the list's version is the store's, now
    assert client.names()[0] == ["a", "b", "c"]


@check
def check_field_selector(client: Client, cluster: FakeCluster) -> None:
    for name in ("a", "b", "c"):
        client.create(sandbox(name))
    assert client.named("metadata.name=b") == ["b"]
    assert client.named("metadata.name!=b,metadata.namespace=jr2") == ["a", "c"]
    with pytest.raises(ClientError) as unsupported:
        client.named("spec.port=8080")
    assert unsupported.value.code == 400  # `field label not supported` for a custom resource


@check
def check_watch_from_version_with_selector(client: Client, cluster: FakeCluster) -> None:
    client.create(sandbox("before"))
    rv = str(cluster.resource_version)
    client.create(sandbox("a"))
    client.create(sandbox("other", run="r2"))  # not selected: never sent
    client.merge_patch("a", {"metadata": {"annotations": {"seen": "yes"}}})
    client.merge_patch("a", {"metadata": {"labels": {"jr2.dev/run": "r2"}}})  # relabelled out: DELETED
    assert client.watch(rv, "jr2.dev/run=r1", 3) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


@check
def check_merge_patch(client: Client, cluster: FakeCluster) -> None:
    client.create(sandbox("a"))
    patched = client.merge_patch("a", {"metadata": {"labels": {"extra": "1", "jr2.dev/run": None}},
                                       "spec": {"port": 9090}})
    assert patched["metadata"]["labels"] == {"extra": "1"} and patched["spec"]["port"] == 9090
    assert patched["metadata"]["generation"] == 2  # the spec moved


@check
def check_json_patch(client: Client, cluster: FakeCluster) -> None:
    client.create(sandbox("a"))
    patched = client.json_patch("a", [{"op": "replace", "path": "/spec/port", "value": 7070},
                                      {"op": "add", "path": "/metadata/labels/extra", "value": "1"}])
    assert patched["spec"]["port"] == 7070 and patched["metadata"]["labels"]["extra"] == "1"
    with pytest.raises(ClientError) as failed:
        client.json_patch("a", [{"op": "test", "path": "/spec/port", "value": 1}])
    assert failed.value.code == 422  # a failed `test` op is the server's 422
    assert client.get("a")["spec"]["port"] == 7070


@check
def check_apply(client: Client, cluster: FakeCluster) -> None:
    first = client.apply(sandbox("a"))
    assert first["spec"]["port"] == 8080
    second = client.apply(sandbox("a", port=9090))
    assert second["spec"]["port"] == 9090 and second["metadata"]["uid"] == first["metadata"]["uid"]
    managers = {m["manager"] for m in second["metadata"]["managedFields"]}
    assert "conformance" in managers


@check
def check_status_subresource(client: Client, cluster: FakeCluster) -> None:
    client.create(sandbox("a"))
    written = client.patch_status("a", {"phase": "Pending"})
    assert written["status"]["phase"] == "Pending"
    # The main resource ignores a status; the status subresource ignores the spec.
    client.merge_patch("a", {"status": {"phase": "Ready"}})
    client.patch_status("a", {"phase": "Pending"} | {"endpoint": "http://a"})
    got = client.get("a")
    assert got["status"] == {"phase": "Pending", "endpoint": "http://a"}
    assert got["metadata"]["generation"] == 1  # a status write moves no generation


@check
def check_delete_precondition(client: Client, cluster: FakeCluster) -> None:
    created = client.create(sandbox("a"))
    client.merge_patch("a", {"metadata": {"annotations": {"moved": "on"}}})
    with pytest.raises(ClientError) as stale:
        client.delete("a", resource_version=created["metadata"]["resourceVersion"])
    assert stale.value.code == 409
    client.delete("a", resource_version=client.get("a")["metadata"]["resourceVersion"])
    with pytest.raises(ClientError) as gone:
        client.get("a")
    assert gone.value.code == 404


@check
def check_delete(client: Client, cluster: FakeCluster) -> None:
    client.create(sandbox("a"))
    client.delete("a")
    with pytest.raises(ClientError) as gone:
        client.get("a")
    assert gone.value.code == 404
    with pytest.raises(ClientError) as again:
        client.delete("a")
    assert again.value.code == 404


@check
def check_expired_410(client: Client, cluster: FakeCluster) -> None:
    client.create(sandbox("a"))
    old = str(cluster.resource_version)
    client.create(sandbox("b"))
    cluster.compact()
    assert client.watch_expired(old) == 410


@check
def check_events(client: Client, cluster: FakeCluster) -> None:
    target = client.create(sandbox("a"))
    involved = {"apiVersion": API_VERSION, "kind": "Sandbox", "name": "a", "namespace": "jr2",
                "uid": target["metadata"]["uid"]}
    body = {"metadata": {"generateName": "conformance-", "namespace": "jr2"}, "involvedObject": involved,
            "reason": "Logging", "message": "handled a", "type": "Normal", "source": {"component": "conformance"}}
    created = client.create_event(body)
    assert created["metadata"]["name"].startswith("conformance-") and created["metadata"]["resourceVersion"]
    client.create_event({**body, "involvedObject": {**involved, "name": "b"}, "message": "handled b"})
    assert client.events_of("a") == ["handled a"]
