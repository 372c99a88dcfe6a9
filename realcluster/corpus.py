"""The fidelity corpus: requests a client of jr2's kinds sends, each replayed on the fake and the real server.

Each `Step` is one request, sent the same way to both servers in the same order (so each starts from the same
state): raw HTTPS unless `via` names the official client or kubectl. `{ns}` in a path is the run's own
namespace (the first step creates it). `project` picks what is compared when the whole answer cannot be: a
real server serves hundreds of kinds the fake does not, so discovery and OpenAPI are compared on jr2's part.
`rv_from` takes a resourceVersion from an earlier step's answer on the same server (each has its own).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SB = "/apis/core.jr2.dev/v1alpha1/namespaces/{ns}/sandboxes"
SEC = "/api/v1/namespaces/{ns}/secrets"
EV = "/api/v1/namespaces/{ns}/events"
JSON = "application/json"
MERGE = "application/merge-patch+json"
JSONPATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@dataclass(frozen=True)
class Step:
    name: str
    method: str
    path: str
    body: Any = None
    content_type: str = JSON
    params: dict[str, str] = field(default_factory=dict)
    accept: str = JSON
    project: Callable[[Any], Any] | None = None
    rv_from: str = ""  # the step whose answer's resourceVersion becomes `resourceVersion` here
    via: str = "https"  # or "client" (the official Python client) or "kubectl"
    argv: tuple[str, ...] = ()  # kubectl's arguments (`-n {ns}` is added)


def sandbox(name: str, *, labels: dict[str, str] | None = None, port: int = 8080, **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta} if name else dict(meta)
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", "metadata": metadata, "spec": {"port": port}}


def _resources(doc: Any) -> Any:
    return sorted((r["name"], r["namespaced"], r["kind"], sorted(r.get("verbs", [])), sorted(r.get("shortNames", [])),
                   sorted(r.get("categories", []))) for r in doc.get("resources", []))


def _sandbox_schema(doc: Any) -> Any:
    schemas = doc.get("components", {}).get("schemas", {})
    keys = [k for k in schemas if k.endswith(".Sandbox")]
    if len(keys) != 1:
        return {"Sandbox schemas": sorted(keys)}
    key = keys[0]
    spec = schemas[key]["properties"]["spec"]
    return {"name": key, "spec": sorted(spec["properties"]),
            "gvk": schemas[key].get("x-kubernetes-group-version-kind")}


def _table(doc: Any) -> Any:
    columns = [(c["name"], c["type"]) for c in doc.get("columnDefinitions", [])]
    rows = sorted([cell for i, cell in enumerate(r["cells"]) if columns[i][0] != "Age"] for r in doc.get("rows", []))
    return {"kind": doc.get("kind"), "columns": columns, "rows": rows}


def _frames(doc: Any) -> Any:
    """A watch's frames: each event's type and object name (bookmarks are best effort on both: left out)."""
    return [(f["type"], f["object"].get("metadata", {}).get("name")) if f["type"] != "ERROR" else
            ("ERROR", f["object"].get("code"), f["object"].get("reason")) for f in doc if f["type"] != "BOOKMARK"]


CORPUS: list[Step] = [
    Step("namespace create", "POST", "/api/v1/namespaces",
         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "{ns}"}}),
    Step("create", "POST", SB, sandbox("a", labels={"app": "x", "tier": "1"})),
    Step("create again: 409 AlreadyExists", "POST", SB, sandbox("a")),
    Step("get", "GET", SB + "/a"),
    Step("get missing: 404", "GET", SB + "/nope"),
    Step("create, invalid name: 422", "POST", SB, sandbox("A_b")),
    Step("create, schema error: 422", "POST", SB, {**sandbox("bad"), "spec": {"port": "eighty"}}),
    Step("create, namespace differs: 400", "POST", SB, sandbox("c", namespace="other")),
    Step("create b", "POST", SB, sandbox("b", labels={"app": "y"})),
    Step("create, generateName", "POST", SB, sandbox("", generateName="gen-")),
    Step("create, dryRun=All", "POST", SB, sandbox("dry"), params={"dryRun": "All"}),
    Step("get the dry run's: 404", "GET", SB + "/dry"),
    Step("list", "GET", SB),
    Step("list, label app=x", "GET", SB, params={"labelSelector": "app=x"}),
    Step("list, label set-based", "GET", SB, params={"labelSelector": "app in (x,y),!tier"}),
    Step("list, bad label selector: 400", "GET", SB, params={"labelSelector": "app in x"}),
    Step("list, field metadata.name", "GET", SB, params={"fieldSelector": "metadata.name=b"}),
    Step("list, unsupported field: 400", "GET", SB, params={"fieldSelector": "spec.port=8080"}),
    Step("list, limit 1", "GET", SB, params={"limit": "1"}),
    Step("list as a Table", "GET", SB, accept=TABLE, project=_table),
    Step("merge patch", "PATCH", SB + "/a", {"metadata": {"annotations": {"k": "v"}}}, MERGE),
    Step("JSON patch", "PATCH", SB + "/a", [{"op": "add", "path": "/metadata/labels/added", "value": "yes"}],
         JSONPATCH),
    Step("JSON patch, failed test: 422", "PATCH", SB + "/a", [{"op": "test", "path": "/spec/port", "value": 1}],
         JSONPATCH),
    Step("strategic merge patch on a CR: 415", "PATCH", SB + "/a", {"metadata": {"labels": {"s": "1"}}}, STRATEGIC),
    Step("patch, another uid: 422", "PATCH", SB + "/a", {"metadata": {"uid": "7e1f0000-0000-4000-8000-000000000001"}},
         MERGE),
    Step("apply as alice", "PATCH", SB + "/ssa", sandbox("ssa", port=1111), APPLY, {"fieldManager": "alice"}),
    Step("apply as bob: conflict 409", "PATCH", SB + "/ssa", sandbox("ssa", port=2222), APPLY,
         {"fieldManager": "bob"}),
    Step("apply as bob, force", "PATCH", SB + "/ssa", sandbox("ssa", port=2222), APPLY,
         {"fieldManager": "bob", "force": "true"}),
    Step("status: merge patch", "PATCH", SB + "/a/status", {"status": {"phase": "Ready"}}, MERGE),
    Step("status: schema error 422", "PATCH", SB + "/a/status", {"status": {"phase": "Sleepy"}}, MERGE),
    Step("status through the main resource: ignored", "PATCH", SB + "/a", {"status": {"phase": "Lost"}}, MERGE),
    Step("status: apply", "PATCH", SB + "/a/status",
         {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", "metadata": {"name": "a"},
          "status": {"phase": "Pending"}}, APPLY, {"fieldManager": "op", "force": "true"}),
    Step("PUT without resourceVersion: 422", "PUT", SB + "/b", sandbox("b", labels={"app": "y"})),
    Step("PUT, stale resourceVersion: 409", "PUT", SB + "/b",
         {**sandbox("b"), "metadata": {"name": "b", "resourceVersion": "1"}}),
    Step("delete, wrong uid precondition: 409", "DELETE", SB + "/b",
         {"kind": "DeleteOptions", "apiVersion": "v1",
          "preconditions": {"uid": "7e1f0000-0000-4000-8000-00000000000b"}}),
    Step("add a finalizer", "PATCH", SB + "/b", {"metadata": {"finalizers": ["jr2.dev/hold"]}}, MERGE),
    Step("delete, held by a finalizer", "DELETE", SB + "/b"),
    Step("get, terminating", "GET", SB + "/b"),
    Step("add a finalizer while terminating: 422", "PATCH", SB + "/b",
         {"metadata": {"finalizers": ["jr2.dev/hold", "jr2.dev/more"]}}, MERGE),
    Step("remove the finalizer", "PATCH", SB + "/b", {"metadata": {"finalizers": None}}, MERGE),
    Step("get, gone: 404", "GET", SB + "/b"),
    Step("delete, dryRun=All", "DELETE", SB + "/a", params={"dryRun": "All"}),
    Step("delete missing: 404", "DELETE", SB + "/nope"),
    Step("watch from the list's version", "GET", SB, params={"watch": "true", "timeoutSeconds": "1"},
         rv_from="list", project=_frames),
    Step("deletecollection, label app=x", "DELETE", SB, params={"labelSelector": "app=x"}),
    Step("list after deletecollection", "GET", SB),
    Step("secret create, stringData", "POST", SEC,
         {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"token": "t"}}),
    Step("secret type is immutable: 422", "PATCH", SEC + "/s", {"type": "kubernetes.io/tls"}, MERGE),
    Step("secret strategic merge patch", "PATCH", SEC + "/s", {"metadata": {"labels": {"a": "b"}}}, STRATEGIC),
    Step("secret delete: a Status", "DELETE", SEC + "/s"),
    Step("event create", "POST", EV,
         {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"}, "reason": "Started", "message": "m",
          "type": "Normal", "involvedObject": {"kind": "Sandbox", "name": "ssa", "namespace": "{ns}"}}),
    Step("event list by field", "GET", EV, params={"fieldSelector": "involvedObject.name=ssa"}),
    Step("unknown kind: 404", "GET", "/apis/core.jr2.dev/v1alpha1/namespaces/{ns}/widgets"),
    Step("body not JSON: 400", "POST", SB, "{not json"),
    Step("discovery: the group version", "GET", "/apis/core.jr2.dev/v1alpha1", project=_resources),
    Step("discovery: the group", "GET", "/apis/core.jr2.dev"),
    Step("OpenAPI v3: the Sandbox schema", "GET", "/openapi/v3/apis/core.jr2.dev/v1alpha1", project=_sandbox_schema),
    Step("official client: list", "GET", SB, via="client"),
    Step("kubectl get -o json", "GET", "", via="kubectl", argv=("get", "sandboxes.core.jr2.dev", "-o", "json")),
    Step("kubectl apply --server-side", "PATCH", "", via="kubectl",
         argv=("apply", "--server-side", "-o", "json", "-f", "-")),
    Step("POST to a name: 405", "POST", SB + "/a", sandbox("a")),
    Step("apply as alice, field dropped", "PATCH", SB + "/ssa",
         {**sandbox("ssa"), "spec": {}, "metadata": {"name": "ssa", "labels": {"by": "alice"}}}, APPLY,
         {"fieldManager": "alice"}),
    Step("watch from a compacted version: 410", "GET", SB, params={"watch": "true", "timeoutSeconds": "2"},
         rv_from="list", project=_frames),
]
COMPACT_BEFORE = "watch from a compacted version: 410"  # the runner compacts both servers' history first
