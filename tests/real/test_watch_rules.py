"""Issue 30 item 3, ADR-0063's rules shown on a real kube-apiserver, through the orchestrator's own KubeClient
as its ServiceAccount (the shipped Role): list then watch with bookmarks; the server ending a watch at its
timeoutSeconds and a resume from the bookmark losing nothing; a 410 once the server's history is gone
(etcd compacted, the watch cache restarted) and a re-list that loses nothing; a 401 answered by one re-read
of the token file; server-side apply as `jr2` with force; the Lease's merge patch and its uid precondition.
(The token Secret owned by its Sandbox: test_serve_real.py, from a real run.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.frames import Bookmark, ErrorFrame, WatchEvent
from jr2_actors.kube.kinds import SANDBOX, SECRET
from jr2_actors.values.constants import WATCH_TIMEOUT_SECONDS
from jr2_actors.values.errors import KubeError
from jr2_actors.workspace.manifest import lease_patch
from realcluster.cluster import RealCluster


@pytest.fixture
def client(real_cluster: RealCluster) -> Iterator[KubeClient]:
    c = KubeClient(real_cluster.access())
    yield c
    for item in c.list(SANDBOX).items:
        c.delete(SANDBOX, item["metadata"]["name"])
    c.close()


def sandbox(name: str, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations} if annotations else {}, "spec": {"port": 8080}}


def test_a_watch_the_server_ends_brings_a_bookmark_and_its_resume_loses_nothing(client: KubeClient) -> None:
    assert WATCH_TIMEOUT_SECONDS == 240  # what the orchestrator asks; here a short one, which the server ends
    listed = client.list(SANDBOX)
    with client.watch(SANDBOX, resource_version=listed.resource_version, timeout_seconds=12) as stream:
        client.apply(SANDBOX, "before", sandbox("before"))
        # A write elsewhere: the watch cache learns of a newer revision only from etcd's progress notices
        # (every 5 s, as kubeadm sets it), and sends the bookmark 2 s before the deadline only if it is newer
        # than what this watch has seen. A live cluster always has such writes; this quiet one gets one.
        client.apply(SECRET, "bookmark-nudge", {"stringData": {"k": "v"}})
        frames = list(stream)  # to the server's end of the stream (its timeoutSeconds): the bound on this wait
    client.delete(SECRET, "bookmark-nudge")
    events = [f for f in frames if isinstance(f, WatchEvent)]
    bookmarks = [f for f in frames if isinstance(f, Bookmark)]
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "before")]
    assert bookmarks, "kube-apiserver sends a bookmark before it ends a watch that asked for them"
    last = bookmarks[-1].resource_version
    assert int(last) > int(events[0].resource_version or 0)
    client.apply(SANDBOX, "after", sandbox("after"))  # written while no watch is open
    with client.watch(SANDBOX, resource_version=last, timeout_seconds=2) as stream:
        resumed = [f for f in stream if isinstance(f, WatchEvent)]
    assert [(e.type, e.object["metadata"]["name"]) for e in resumed] == [("ADDED", "after")]


def test_a_410_after_the_history_is_gone_and_the_relist_loses_nothing(real_cluster: RealCluster,
                                                                     client: KubeClient) -> None:
    old = client.list(SANDBOX).resource_version
    for i in range(3):
        client.apply(SANDBOX, f"gone-{i}", sandbox(f"gone-{i}"))
    client.delete(SANDBOX, "gone-0")
    real_cluster.compact()  # etcd keeps no version before now
    real_cluster.restart()  # and the watch cache starts from now: nothing older is served
    with client.watch(SANDBOX, resource_version=old, timeout_seconds=5) as stream:
        first = next(iter(stream))
    assert isinstance(first, ErrorFrame), first
    assert first.status.code == 410 and first.status.reason in ("Expired", "Gone"), first.status
    relisted = client.list(SANDBOX)
    assert sorted(i["metadata"]["name"] for i in relisted.items) == ["gone-1", "gone-2"]
    with client.watch(SANDBOX, resource_version=relisted.resource_version, timeout_seconds=2) as stream:
        client.apply(SANDBOX, "gone-3", sandbox("gone-3"))
        after = [f for f in stream if isinstance(f, WatchEvent)]
    assert [e.object["metadata"]["name"] for e in after] == ["gone-3"]


def test_a_401_is_answered_by_one_reread_of_the_token_file(real_cluster: RealCluster, tmp_path: Path) -> None:
    """The token file holds a token the server refuses (revoked); the file is replaced with a good one just
    after the client read it, as a kubelet's rotation can land between a read and its request."""
    assert real_cluster.orchestrator is not None
    token_file = tmp_path / "token"
    token_file.write_text("revoked-token")
    access = ClusterAccess(server=real_cluster.url, namespace="jr2", source="test", ca_file=real_cluster.ca_file,
                           token_file=str(token_file))
    client = KubeClient(access)
    reads: list[str | None] = []
    read = client._credentials.authorization  # the one read the client makes per request

    def read_then_rotate() -> str | None:
        got = read()
        reads.append(got)
        if len(reads) == 1:
            token_file.write_text(Path(real_cluster.orchestrator.token_file).read_text())  # type: ignore[union-attr]
        return got

    client._credentials.authorization = read_then_rotate  # type: ignore[method-assign]
    try:
        assert client.list(SANDBOX).resource_version
        assert reads[0] == "Bearer revoked-token" and len(reads) == 2  # the 401, then one re-read and retry
        token_file.write_text("revoked-token")
        with pytest.raises(KubeError) as refused:  # a second 401 after the re-read is the caller's
            client.list(SANDBOX)
        assert refused.value.status == 401 and len(reads) == 4
    finally:
        client.close()


def test_apply_as_jr2_with_force_takes_a_field_another_manager_owns(real_cluster: RealCluster,
                                                                   client: KubeClient) -> None:
    admin = real_cluster.session()
    url = f"{real_cluster.url}/apis/core.jr2.dev/v1alpha1/namespaces/jr2/sandboxes/ssa"
    body = {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", "metadata": {"name": "ssa"},
            "spec": {"port": 9090}}
    made = admin.patch(url, params={"fieldManager": "someone"}, json=body,
                       headers={"Content-Type": "application/apply-patch+yaml"}, timeout=10)
    assert made.status_code == 201, made.text
    body["spec"] = {"port": 8080}
    refused = admin.patch(url, params={"fieldManager": "jr2"}, json=body,
                          headers={"Content-Type": "application/apply-patch+yaml"}, timeout=10)
    assert refused.status_code == 409 and refused.json()["reason"] == "Conflict"  # without force
    assert 'conflict with "someone"' in refused.json()["message"]
    forced = client.apply(SANDBOX, "ssa", sandbox("ssa"))  # the orchestrator's call: force=true
    assert forced["spec"]["port"] == 8080
    owners = {e["manager"]: e for e in forced["metadata"]["managedFields"]}
    assert "f:port" in owners["jr2"]["fieldsV1"]["f:spec"] and owners["jr2"]["operation"] == "Apply"


def test_the_leases_merge_patch_lands_and_its_uid_guards_a_successor(client: KubeClient) -> None:
    first = client.apply(SANDBOX, "leased", sandbox("leased"))
    uid = first["metadata"]["uid"]
    renewed = client.merge_patch(SANDBOX, "leased", lease_patch(1_800_000_000.0, uid))
    assert renewed["metadata"]["annotations"]["jr2.dev/keepalive"] == "2027-01-15T08:00:00.000Z"
    assert int(renewed["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    client.delete(SANDBOX, "leased", uid=uid)
    client.apply(SANDBOX, "leased", sandbox("leased"))  # a successor took the name
    with pytest.raises(KubeError) as stale:
        client.merge_patch(SANDBOX, "leased", lease_patch(1_800_000_300.0, uid))
    # Not a 409 precondition (as a PUT's uid is): the patched object's uid differs, an immutable field.
    assert stale.value.status == 422 and 'metadata.uid: Invalid value: "' in str(stale.value), stale.value
    assert "field is immutable" in str(stale.value)
    assert "annotations" not in (client.get(SANDBOX, "leased") or {})["metadata"]  # the successor untouched
