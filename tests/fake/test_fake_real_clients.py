"""Real peers accept the fake: the official `kubernetes` Python client, and kubectl when it is on PATH."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config, watch
from kubernetes.client.rest import ApiException

from jr2_actors.fake.cluster import FakeCluster
from tests.support.kube_clients import GROUP, KUBECTL, PLURAL, SANDBOX_YAML, VERSION, body, kubectl, needs_kubectl


def test_official_client_apply_and_list(api: k8s.ApiClient) -> None:
    custom = k8s.CustomObjectsApi(api)
    for _ in range(2):  # the first apply creates (201, which this client maps to None); the second updates
        custom.patch_namespaced_custom_object(GROUP, VERSION, "jr2", PLURAL, "ws-1", body("ws-1"),
                                              field_manager="jr2", force=True,
                                              _content_type="application/apply-patch+yaml")
    created = custom.get_namespaced_custom_object(GROUP, VERSION, "jr2", PLURAL, "ws-1")
    assert created["metadata"]["uid"]
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, "jr2", PLURAL, label_selector="jr2.dev/run")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["ws-1"]
    assert listed["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_official_client_watch_sees_events_and_bookmarks(api: k8s.ApiClient, cluster: FakeCluster) -> None:
    custom = k8s.CustomObjectsApi(api)
    rv = str(cluster.resource_version)
    custom.create_namespaced_custom_object(GROUP, VERSION, "jr2", PLURAL, body("ws-2"))
    types: list[str] = []
    w = watch.Watch()
    for event in w.stream(custom.list_namespaced_custom_object, GROUP, VERSION, "jr2", PLURAL,
                          resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=1):
        types.append(event["type"])
    assert types[0] == "ADDED"
    assert "BOOKMARK" in types


def test_official_client_sees_the_410(api: k8s.ApiClient, cluster: FakeCluster) -> None:
    custom = k8s.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(GROUP, VERSION, "jr2", PLURAL, body("ws-3"))
    old = str(cluster.resource_version - 1)
    custom.create_namespaced_custom_object(GROUP, VERSION, "jr2", PLURAL, body("ws-4"))
    cluster.compact()
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(custom.list_namespaced_custom_object, GROUP, VERSION, "jr2", PLURAL,
                                      resource_version=old, timeout_seconds=2):
            pass
    assert err.value.status == 410


def test_official_client_delete_collects_the_token_secret(api: k8s.ApiClient) -> None:
    custom = k8s.CustomObjectsApi(api)
    core = k8s.CoreV1Api(api)
    sbx = custom.create_namespaced_custom_object(GROUP, VERSION, "jr2", PLURAL, body("ws-5"))
    owner = k8s.V1OwnerReference(api_version=f"{GROUP}/{VERSION}", kind="Sandbox", name="ws-5",
                                 uid=sbx["metadata"]["uid"])
    core.create_namespaced_secret("jr2", k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(name="ws-5-token", labels={"jr2.dev/sandbox": "ws-5"}, owner_references=[owner]),
        data={"JR2_SANDBOX_TOKEN": "dG9rZW4="}))
    assert core.read_namespaced_secret("ws-5-token", "jr2").metadata.name == "ws-5-token"
    custom.delete_namespaced_custom_object(GROUP, VERSION, "jr2", PLURAL, "ws-5")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_secret("ws-5-token", "jr2")
    assert err.value.status == 404


# -- kubectl -------------------------------------------------------------------------------------------

@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_get_and_server_side_apply(kenv: dict[str, str]) -> None:
    empty = kubectl(kenv, "get", "sandboxes.core.jr2.dev")
    assert empty.returncode == 0, empty.stderr
    applied = kubectl(kenv, "apply", "--server-side", "-f", "-", stdin=SANDBOX_YAML)
    assert applied.returncode == 0, applied.stderr
    assert "serverside-applied" in applied.stdout
    listed = kubectl(kenv, "get", "sandboxes.core.jr2.dev")
    assert listed.returncode == 0, listed.stderr
    assert "ws-k" in listed.stdout


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_get_watch_sees_a_status_change(kenv: dict[str, str], cluster: FakeCluster) -> None:
    from jr2_actors.kube.kinds import SANDBOX

    client = cluster.client()
    client.apply(SANDBOX, "ws-w", {"metadata": {"labels": {"jr2.dev/run": "r1"}}, "spec": {"port": 8080}})
    assert KUBECTL is not None
    proc = subprocess.Popen([KUBECTL, "get", "sandboxes.core.jr2.dev", "-w", "--request-timeout=30s"], env=kenv,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        first = lines.get(timeout=30)
        assert "NAME" in first or "ws-w" in first
        from tests.support.waiting import wait_until

        wait_until(lambda: cluster.watch_stats()["open"] == 1, timeout=30)
        client.merge_patch(SANDBOX, "ws-w", {"status": {"phase": "Ready"}}, status=True)
        seen = ""
        while "Ready" not in seen:
            seen = lines.get(timeout=30)
        assert "ws-w" in seen
    finally:
        proc.kill()
        proc.wait(10)


# -- kubernetes_asyncio --------------------------------------------------------------------------------

def test_kubernetes_asyncio_watch_streams(cluster: FakeCluster, tmp_path: Path) -> None:
    """Issue 20 item 1: kubernetes_asyncio sends `watch=True`; a real server reads any spelling but `0` and
    `false` as true, so the fake streams (it used to answer a list, which the client cannot read as events)."""
    import asyncio

    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig
    from kubernetes_asyncio import watch as awatch

    path = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    core = k8s.CoreV1Api(config.new_client_from_config(config_file=path))
    core.create_namespaced_secret("jr2", k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s1")))

    async def stream() -> list[tuple[str, str]]:
        api_client = await aconfig.new_client_from_config(config_file=path)
        seen: list[tuple[str, str]] = []
        try:
            w = awatch.Watch()
            async for event in w.stream(aclient.CoreV1Api(api_client).list_namespaced_secret, "jr2",
                                        timeout_seconds=5):
                seen.append((event["type"], event["object"].metadata.name))
                if len(seen) == 1:
                    core.create_namespaced_secret("jr2", k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s2")))
                else:
                    w.stop()
        finally:
            await api_client.close()
        return seen

    assert asyncio.run(stream()) == [("ADDED", "s1"), ("ADDED", "s2")]
    watched = [r for r in cluster.requests() if r["path"].endswith("/secrets") and r["watch"]]
    assert watched and watched[0]["query"]["watch"] == "True"  # the spelling this client sends


# -- the kubeconfig (issue 20 item 2) ------------------------------------------------------------------

def _secrets_listed(kubeconfig: dict[str, Any]) -> int:
    api_client = config.new_client_from_config_dict(kubeconfig)
    try:
        return len(k8s.CoreV1Api(api_client).list_namespaced_secret("jr2").items)
    finally:
        api_client.close()


def test_the_kubeconfig_carries_the_token_inline_for_a_client_that_reads_no_token_file(
        cluster: FakeCluster, tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load(Path(cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))).read_text())
    user = doc["users"][0]["user"]
    assert user["tokenFile"] == cluster.token_file
    del user["tokenFile"]  # what kr8s reads: the inline token alone
    assert _secrets_listed(doc) == 0


def test_a_rotation_rewrites_the_kubeconfig_it_wrote(cluster: FakeCluster, tmp_path: Path) -> None:
    import requests
    import yaml

    path = Path(cluster.write_kubeconfig(str(tmp_path / "kubeconfig")))
    old = cluster.token
    assert cluster.tls is not None
    requests.post(cluster.url + "/_fake/rotate-token", verify=cluster.tls.ca_file, timeout=10).raise_for_status()
    doc = yaml.safe_load(path.read_text())
    assert doc["users"][0]["user"]["token"] == cluster.token != old  # the HTTP knob's rotation reached it
    assert (path.stat().st_mode & 0o777) == 0o600
    assert _secrets_listed(doc) == 0  # a client loaded after the rotation works from either key


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_prefers_the_token_file_to_the_inline_token(cluster: FakeCluster, tmp_path: Path) -> None:
    # client-go (clientcmd's getUserIdentificationPartialConfig, then the transport's file token source)
    # sends what the file holds when both are given: a stale inline token beside a current file works.
    # The Python clients prefer the inline token (their FileOrData), hence the rewrite on a rotation.
    import yaml

    path = Path(cluster.write_kubeconfig(str(tmp_path / "kubeconfig")))
    old = cluster.token
    cluster.rotate_token()
    doc = yaml.safe_load(path.read_text())
    doc["users"][0]["user"]["token"] = old
    path.write_text(yaml.safe_dump(doc))
    got = kubectl({**os.environ, "KUBECONFIG": str(path), "HOME": str(tmp_path)}, "get", "secrets")
    assert got.returncode == 0, got.stderr


def test_the_kubeconfig_is_replaced_whole_or_not_at_all(cluster: FakeCluster, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    path = tmp_path / "kubeconfig"
    cluster.write_kubeconfig(str(path))
    first = path.read_text()
    inode = path.stat().st_ino

    def broken(*_: object, **__: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(yaml, "safe_dump", broken)
    with pytest.raises(OSError, match="No space"):
        cluster.write_kubeconfig(str(path))
    assert path.read_text() == first  # a waiting reader never sees an empty or half file
    monkeypatch.undo()
    cluster.write_kubeconfig(str(path))
    assert path.stat().st_ino != inode  # renamed over, not rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig"]  # no temp file left
