"""Discovery documents and server-side Table printing: enough for kubectl and the official client.

Discovery lists every served kind (apiserver/kinds.py): jr2's CRDs and Secrets and Namespaces, and Events in
`v1` and in `events.k8s.io/v1`."""

from __future__ import annotations

import copy
from typing import Any

from jr2_actors.fake.apiserver import events
from jr2_actors.fake.apiserver.kinds import CUSTOM_GROUP, SERVED_KINDS, is_custom
from jr2_actors.fake.apiserver.schema import CRD_FILES, Column, schema_for
from jr2_actors.kube.kinds import Kind
from jr2_actors.values.timefmt import parse_rfc3339

GROUP = CUSTOM_GROUP
VERSION = "v1alpha1"
SERVER_VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-jr2fake", "gitCommit": "jr2fake",
                  "gitTreeState": "clean", "buildDate": "2026-11-01T00:00:00Z", "goVersion": "go1.22",
                  "compiler": "gc", "platform": "linux/amd64"}

_SINGULAR = {"sandboxes": "sandbox", "repos": "repo", "secrets": "secret", "namespaces": "namespace",
             "events": "event"}
_SHORT = {"sandboxes": ["sbx"], "namespaces": ["ns"], "events": ["ev"]}
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_NAMESPACE_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]  # no deletecollection (real)


def kind_for(api_version: str, plural: str) -> Kind | None:
    return next((k for k in SERVED_KINDS if k.api_version == api_version and k.plural == plural), None)


def api_versions(address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}


def _groups() -> list[dict[str, Any]]:
    """Each named group with its one version (jr2's CRDs, events.k8s.io), in the order served."""
    versions = dict.fromkeys(k.api_version for k in SERVED_KINDS if k.group)
    groups = []
    for api_version in versions:
        group, _, version = api_version.partition("/")
        gv = {"groupVersion": api_version, "version": version}
        groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return groups


def api_groups() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": _groups()}


def api_group(name: str) -> dict[str, Any] | None:
    group = next((g for g in _groups() if g["name"] == name), None)
    return None if group is None else {"kind": "APIGroup", "apiVersion": "v1", **group}


def resource_list(api_version: str) -> dict[str, Any] | None:
    kinds = [k for k in SERVED_KINDS if k.api_version == api_version]
    if not kinds:
        return None
    resources: list[dict[str, Any]] = []
    for k in kinds:
        resources.append({"name": k.plural, "singularName": _SINGULAR[k.plural], "namespaced": k.namespaced,
                          "kind": k.kind, "verbs": _NAMESPACE_VERBS if k.plural == "namespaces" else _VERBS,
                          "shortNames": _SHORT.get(k.plural, [])})
        if is_custom(k):
            resources.append({"name": f"{k.plural}/status", "singularName": "", "namespaced": k.namespaced,
                              "kind": k.kind, "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version, "resources": resources}


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def table(kind: Kind, items: list[dict[str, Any]], resource_version: str, now_wall: float) -> dict[str, Any]:
    """`kubectl get` asks the server to print: a meta.k8s.io/v1 Table. A jr2 custom resource gets its CRD's
    `additionalPrinterColumns` after Name, as the CRD's table convertor builds them (a `date` column as an
    age; a path that finds nothing, an empty cell); Events the server's event columns; any other kind
    Name, Phase and Age."""
    if kind.plural == "events":
        columns = [{"name": name, "type": "string", "format": "", "description": name, "priority": 0}
                   for name in events.COLUMNS]
        event_rows = [{"cells": events.row(obj, now_wall, _age),
                       "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                  "metadata": obj.get("metadata", {})}} for obj in items]
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
                "columnDefinitions": columns, "rows": event_rows}
    crd_columns = schema_for(kind.plural).columns if kind.plural in CRD_FILES else (
        Column("Phase", "string", ".status.phase"), Column("Age", "date", ".metadata.creationTimestamp"))
    rows = []
    for obj in items:
        cells: list[Any] = [obj.get("metadata", {}).get("name", "")]
        for column in crd_columns:
            value = column.value(obj)
            if column.type == "date":
                created = parse_rfc3339(value) if isinstance(value, str) else None
                value = "<unknown>" if created is None else _age(max(int(now_wall - created), 0))
            cells.append(value)  # a column whose path the object lacks is null, as kube-apiserver sends it
        partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": obj.get("metadata", {})}
        rows.append({"cells": cells, "object": partial})
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}]
    definitions += [{"name": c.name, "type": c.type, "format": "", "description": c.json_path.lstrip("."),
                     "priority": c.priority} for c in crd_columns]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": definitions, "rows": rows}


def _age(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def openapi_v3_root() -> dict[str, Any]:
    paths = {}
    for api_version in sorted({k.api_version for k in SERVED_KINDS}):
        rel = "api/v1" if api_version == "v1" else f"apis/{api_version}"
        paths[rel] = {"serverRelativeURL": f"/openapi/v3/{rel}?hash=jr2fake"}
    return {"paths": paths}


def openapi_v3(rel: str) -> dict[str, Any] | None:
    """A minimal OpenAPI v3 document per group version: a jr2 CRD's own schema (other kinds': one that keeps
    unknown fields), and PATCH operations that declare `fieldValidation`, so kubectl validates on the
    server side."""
    api_version = "v1" if rel == "api/v1" else rel.removeprefix("apis/")
    kinds = [k for k in SERVED_KINDS if k.api_version == api_version]
    if not kinds:
        return None
    schemas: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for k in kinds:
        gvk = {"group": k.group, "kind": k.kind, "version": k.version}
        # As kube-apiserver names them: a CRD's by its group reversed (dev.jr2.core.v1alpha1.Sandbox), a
        # built-in kind's under io.k8s.api (io.k8s.api.core.v1.Secret).
        schema_name = (f"{'.'.join(reversed(k.group.split('.')))}.{k.version}.{k.kind}" if is_custom(k) else
                       f"io.k8s.api.{(k.group or 'core').split('.')[0]}.{k.version}.{k.kind}")
        schemas[schema_name] = {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-group-version-kind": [gvk],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }
        if k.plural in CRD_FILES:
            # A CRD's own schema, as the server publishes it (`kubectl explain sandboxes.spec.port` reads it).
            crd = copy.deepcopy(schema_for(k.plural).schema)
            crd.setdefault("properties", {})["metadata"] = schemas[schema_name]["properties"]["metadata"]
            schemas[schema_name] = {**crd, "x-kubernetes-group-version-kind": [gvk]}
        item = k.path("{namespace}" if k.namespaced else None, "{name}")
        params = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                  {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                  {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": True}}]
        op = {"x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk, "parameters": params,
              "responses": {"200": {"description": "OK", "content": {"application/json": {
                  "schema": {"$ref": f"#/components/schemas/{schema_name}"}}}}}}
        paths[item.replace("%7B", "{").replace("%7D", "}")] = {"patch": op}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.31.0-jr2fake"},
            "paths": paths, "components": {"schemas": schemas}}
