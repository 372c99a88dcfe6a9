"""Issue 30 items 1 and 4: the real control plane is what it says — kube-apiserver at its release on etcd,
TLS from a generated CA, token-file authentication, RBAC only — and the orchestrator's identity has exactly
the rights manifests/orchestrator/rbac.yaml gives it: all it needs, and 403 for everything else."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import REPO, SANDBOX, SECRET
from jr2_actors.values.errors import KubeError
from realcluster.build import release
from realcluster.cluster import RealCluster


def test_it_is_the_release_go_mod_names(real_cluster: RealCluster) -> None:
    version = real_cluster.session().get(f"{real_cluster.url}/version", timeout=10).json()
    assert version["gitVersion"] == release() == "v1.37.2", version


def test_tls_is_the_generated_ca_and_no_token_is_no_entry(real_cluster: RealCluster) -> None:
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{real_cluster.url}/version", timeout=10)  # the system's CAs do not know it
    anonymous = requests.get(f"{real_cluster.url}/api/v1/namespaces", verify=real_cluster.ca_file, timeout=10)
    assert anonymous.status_code == 401  # --anonymous-auth=false: a request without a token is nobody


def test_the_orchestrator_is_its_service_account(real_cluster: RealCluster) -> None:
    s = real_cluster.session(real_cluster.orchestrator)
    review = s.post(f"{real_cluster.url}/apis/authentication.k8s.io/v1/selfsubjectreviews",
                    json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, timeout=10)
    assert review.status_code == 201, review.text
    user = review.json()["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:jr2-system:jr2-orchestrator"  # in its own namespace
    assert "system:serviceaccounts:jr2-system" in user["groups"]


def test_the_crds_and_the_namespace_are_served(real_cluster: RealCluster) -> None:
    s = real_cluster.session()
    group = s.get(f"{real_cluster.url}/apis/core.jr2.dev/v1alpha1", timeout=10).json()
    assert {r["name"] for r in group["resources"]} >= {"sandboxes", "sandboxes/status", "repos"}
    assert s.get(f"{real_cluster.url}/api/v1/namespaces/jr2", timeout=10).json()["status"]["phase"] == "Active"


def _orchestrator(cluster: RealCluster) -> KubeClient:
    return KubeClient(cluster.access())


def _sandbox(name: str) -> dict[str, Any]:
    return {"apiVersion": SANDBOX.api_version, "kind": "Sandbox", "metadata": {"name": name},
            "spec": {"image": "ghcr.io/jr2/sandbox:1", "idleTimeout": "30m"}}


def test_the_shipped_role_grants_what_the_orchestrator_does(real_cluster: RealCluster) -> None:
    """Every verb rbac.yaml grants, used once as the orchestrator does (ADR-0063: apply with our field
    manager and force, merge patches, deletes with preconditions)."""
    client = _orchestrator(real_cluster)
    try:
        sb = client.apply(SANDBOX, "rbac-probe", _sandbox("rbac-probe"))
        assert sb["metadata"]["managedFields"][0]["manager"] == "jr2"
        assert client.get(SANDBOX, "rbac-probe") is not None
        assert any(i["metadata"]["name"] == "rbac-probe" for i in client.list(SANDBOX).items)
        client.merge_patch(SANDBOX, "rbac-probe", {"metadata": {"annotations": {"jr2.dev/keepalive": "x"}}})
        secret = client.apply(SECRET, "rbac-probe-token", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rbac-probe-token"},
            "stringData": {"token": "t"}})
        assert client.get(SECRET, "rbac-probe-token") is not None
        client.merge_patch(SECRET, "rbac-probe-token", {"metadata": {"labels": {"a": "b"}}})
        assert client.delete(SECRET, "rbac-probe-token", uid=secret["metadata"]["uid"])
        repo = client.create(REPO, {"apiVersion": REPO.api_version, "kind": "Repo", "metadata": {"name": "rbac-probe"},
                                    "spec": {"url": "https://example.invalid/r.git"}})
        client.merge_patch(REPO, "rbac-probe", {"metadata": {"labels": {"a": "b"}}})
        assert [i["metadata"]["uid"] for i in client.list(REPO).items] == [repo["metadata"]["uid"]]
        with pytest.raises(KubeError) as invalid:  # a schema error is the server's 422, not a 403
            client.create(SANDBOX, {**_sandbox("rbac-bad"), "spec": {"port": "eighty"}})
        assert invalid.value.status == 422
        with pytest.raises(KubeError) as denied:  # the Role grants no delete of Repos
            client.delete(REPO, "rbac-probe")
        assert denied.value.status == 403
        with client.watch(SANDBOX, timeout_seconds=1) as stream:
            assert stream is not None
        assert client.delete(SANDBOX, "rbac-probe", uid=sb["metadata"]["uid"])
    finally:
        client.close()
        real_cluster.session().delete(f"{real_cluster.url}{REPO.path('jr2', 'rbac-probe')}", timeout=10)


@pytest.mark.parametrize(("what", "method", "path"), [
    ("pods", "GET", "/api/v1/namespaces/jr2/pods"),
    ("a pod", "GET", "/api/v1/namespaces/jr2/pods/p"),
    ("pods/exec", "POST", "/api/v1/namespaces/jr2/pods/p/exec?command=sh"),
    ("pods/log", "GET", "/api/v1/namespaces/jr2/pods/p/log"),
    ("another namespace's sandboxes", "GET", "/apis/core.jr2.dev/v1alpha1/namespaces/default/sandboxes"),
    ("another namespace's secrets", "GET", "/api/v1/namespaces/default/secrets"),
    ("sandboxes cluster-wide", "GET", "/apis/core.jr2.dev/v1alpha1/sandboxes"),
    ("namespaces", "GET", "/api/v1/namespaces"),
    ("nodes", "GET", "/api/v1/nodes"),
    ("CRDs", "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
    ("a list of secrets", "GET", "/api/v1/namespaces/jr2/secrets"),
    ("roles in the Sandboxes' namespace", "GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/jr2/roles"),
    ("its own namespace's secrets", "GET", "/api/v1/namespaces/jr2-system/secrets"),
    ("the Instance Secret", "GET", "/api/v1/namespaces/jr2-system/secrets/jr2-orchestrator"),
    ("a patch of the Instance Secret", "PATCH", "/api/v1/namespaces/jr2-system/secrets/jr2-orchestrator"),
    ("a Sandbox's status", "PATCH", "/apis/core.jr2.dev/v1alpha1/namespaces/jr2/sandboxes/x/status"),
])
def test_the_api_server_refuses_the_orchestrator(real_cluster: RealCluster, what: str, method: str,
                                                  path: str) -> None:
    s = real_cluster.session(real_cluster.orchestrator)
    r = s.request(method, f"{real_cluster.url}{path}", data="{}",
                  headers={"Content-Type": "application/merge-patch+json"}, timeout=10)
    assert r.status_code == 403, (what, r.status_code, r.text[:300])
    body = r.json()
    assert body["reason"] == "Forbidden"
    assert 'User "system:serviceaccount:jr2-system:jr2-orchestrator" cannot' in body["message"], body["message"]


def _can(cluster: RealCluster, verb: str, namespace: str, name: str = "") -> bool:
    """The API server's own answer (a SelfSubjectAccessReview as the orchestrator): may it `verb` that Secret?"""
    s = cluster.session(cluster.orchestrator)
    attributes = {"verb": verb, "resource": "secrets", "namespace": namespace, **({"name": name} if name else {})}
    review = s.post(f"{cluster.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                    json={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                          "spec": {"resourceAttributes": attributes}}, timeout=10)
    assert review.status_code == 201, review.text
    return bool(review.json()["status"]["allowed"])


def test_the_orchestrator_cannot_read_the_signing_key(real_cluster: RealCluster) -> None:
    """The signing key is in the Instance Secret, in the orchestrator's own namespace, which the kubelet
    mounts as a volume: its ServiceAccount may do nothing with a Secret there, while it keeps the Secrets verbs
    it needs in the Sandboxes' namespace (their token Secrets)."""
    home, admin = real_cluster.home_namespace, real_cluster.session()
    created = admin.post(f"{real_cluster.url}/api/v1/namespaces/{home}/secrets", timeout=10, json={
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "jr2-orchestrator"},
        "stringData": {"signing-key": "k" * 32, "instance-token": "t" * 32}})
    assert created.status_code in (201, 409), created.text
    try:
        for verb in ("get", "list", "watch", "patch", "update", "delete", "create"):
            assert not _can(real_cluster, verb, home, "jr2-orchestrator"), verb
        read = real_cluster.session(real_cluster.orchestrator).get(
            f"{real_cluster.url}/api/v1/namespaces/{home}/secrets/jr2-orchestrator", timeout=10)
        assert read.status_code == 403 and "k" * 32 not in read.text
        assert all(_can(real_cluster, verb, real_cluster.namespace, "ws-x-token")
                   for verb in ("get", "patch", "delete"))  # what it needs, where the Sandboxes are
    finally:
        admin.delete(f"{real_cluster.url}/api/v1/namespaces/{home}/secrets/jr2-orchestrator", timeout=10)
