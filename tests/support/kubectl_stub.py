"""A loopback API server that answers what `kubectl apply --dry-run=client` asks, and nothing more.

Client dry-run still needs a server: discovery (to map each kind to its resource and scope), the OpenAPI
v3 index (to learn that the server validates fields itself, as every 1.27+ server does, so kubectl
skips client-side validation exactly as it would against a real cluster) and a GET of each object (404:
it does not exist yet, so kubectl reports it "created (dry run)"). Discovery lists the kinds a 1.32
server serves for the groups the manifests use, at the versions it serves them: an apiVersion a real
server no longer serves fails here as it would there. Writes are refused: a dry run never sends one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Served:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group_version}" if self.group else "/api/v1"


SERVED = (
    Served("", "v1", "Namespace", "namespaces", False),
    Served("", "v1", "ServiceAccount", "serviceaccounts", True),
    Served("", "v1", "Service", "services", True),
    Served("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True),
    Served("", "v1", "Secret", "secrets", True),
    Served("", "v1", "ConfigMap", "configmaps", True),
    Served("apps", "v1", "Deployment", "deployments", True),
    Served("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    Served("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    Served("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    Served("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    Served("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True),
    Served("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False),
    Served("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
)
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _resource_list(group_version: str) -> dict[str, Any] | None:
    served = [s for s in SERVED if s.group_version == group_version]
    if not served:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": s.plural, "singularName": s.kind.lower(), "namespaced": s.namespaced,
                           "kind": s.kind, "verbs": _VERBS} for s in served]}


def _groups() -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for s in SERVED:
        if s.group:
            groups.setdefault(s.group, []).append(s.version)
    out = []
    for name, versions in groups.items():
        gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in dict.fromkeys(versions)]
        out.append({"name": name, "versions": gvs, "preferredVersion": gvs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}


def _openapi_root() -> dict[str, Any]:
    rels = {("api/v1" if not s.group else f"apis/{s.group_version}") for s in SERVED}
    return {"paths": {rel: {"serverRelativeURL": f"/openapi/v3/{rel}?hash=stub"} for rel in sorted(rels)}}


def _openapi(rel: str) -> dict[str, Any] | None:
    """PATCH operations that declare `fieldValidation`: the server validates, as a real one does."""
    served = [s for s in SERVED if ("api/v1" if not s.group else f"apis/{s.group_version}") == rel]
    if not served:
        return None
    paths: dict[str, Any] = {}
    for s in served:
        gvk = {"group": s.group, "version": s.version, "kind": s.kind}
        item = f"{s.prefix}/namespaces/{{namespace}}/{s.plural}/{{name}}" if s.namespaced \
            else f"{s.prefix}/{s.plural}/{{name}}"
        params = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
        paths[item] = {"patch": {"x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
                                 "parameters": params, "responses": {"200": {"description": "OK"}}}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0-stub"}, "paths": paths}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        self.server.seen.append(f"GET {path}")
        doc: Any = None
        if path == "/api":
            doc = {"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        elif path == "/apis":
            doc = _groups()
        elif path == "/version":
            doc = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-stub"}
        elif path == "/openapi/v3":
            doc = _openapi_root()
        elif path.startswith("/openapi/v3/"):
            doc = _openapi(path.removeprefix("/openapi/v3/"))
        elif path == "/api/v1":
            doc = _resource_list("v1")
        elif path.startswith("/apis/") and path.count("/") == 3:
            doc = _resource_list(path.removeprefix("/apis/"))
        if doc is None:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "message": f"{path} not found", "reason": "NotFound", "code": 404})
        else:
            self._send(200, doc)

    def _refuse(self) -> None:
        self.server.seen.append(f"{self.command} {self.path}")
        self._send(405, {"kind": "Status", "status": "Failure", "message": "a dry run sends no write", "code": 405})

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

    def _send(self, code: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[str]


@contextmanager
def kubectl_stub(tmp: Path) -> Iterator[tuple[Path, list[str]]]:
    """The stub on 127.0.0.1, a kubeconfig for it under `tmp`, and the list of requests it answered."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "stub",
        "clusters": [{"name": "stub", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "stub", "user": {}}],
        "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub", "namespace": "default"}}],
    }))
    try:
        yield kubeconfig, server.seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
