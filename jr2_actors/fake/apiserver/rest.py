"""The fake API server's REST routes: `serve(request, state, now) -> answer`. Pure.

Theory of operation: a request is a method, a path, a query, a content type and a body; the answer is
a code and a JSON document (a Status on failure, as a real server gives), or, for a watch, a `WatchSpec`
that the actor opens on the store. Authentication, injected faults, latency and the request log belong to
the actor (apiserver/actor.py); the bytes on the wire to fake/http.py. Nothing here reads a clock, a
socket or a thread: every route is a function call in a test.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import yaml

from jr2_actors.fake.apiserver import discovery, events
from jr2_actors.fake.apiserver.kinds import is_custom
from jr2_actors.fake.apiserver.objects import RETURNS_DELETED_OBJECT, WriteOptions
from jr2_actors.fake.apiserver.selectors import (
    META_FIELDS,
    FieldSelector,
    Selector,
    SelectorError,
    parse,
    parse_fields,
)
from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.apiserver.status import StatusError
from jr2_actors.kube.kinds import NAMESPACE, Kind

MAX_REQUEST_BODY = 3 * 1024 * 1024  # the API server's own request limit
DEFAULT_WATCH_TIMEOUT = 1800  # seconds, when the client names none (the server's min-request-timeout)
MAX_WATCH_TIMEOUT = 3600 * 24

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


@dataclass(frozen=True)
class ApiRequest:
    method: str
    path: str
    query: Mapping[str, str]
    content_type: str = ""
    accept: str = ""
    body: bytes = field(default=b"", repr=False)
    user_agent: str = ""

    @property
    def is_watch(self) -> bool:
        return bool(query_bool(self.query, "watch"))


def query_bool(query: Mapping[str, str], name: str) -> bool | None:
    """A boolean query parameter as the API server reads every one of them (`watch`, `allowWatchBookmarks`,
    `force`, `orphanDependents`, ...): absent is None; `0` and `false` in any case are false; any other
    value, the empty one included, is true (k8s.io/apimachinery pkg/runtime/conversion.go,
    Convert_Slice_string_To_bool and Convert_Slice_string_To_Pointer_bool, which the generated query
    conversions of ListOptions, PatchOptions and DeleteOptions call). So `watch=True`, as
    kubernetes_asyncio sends it, opens a watch."""
    value = query.get(name)
    if value is None:
        return None
    return not (value == "0" or value.lower() == "false")


@dataclass(frozen=True)
class WatchSpec:
    """What a watch asks for; the actor subscribes it to the store and streams what comes."""

    kind: Kind
    namespace: str | None
    labels: Selector
    fields: FieldSelector
    since: str | None
    table: bool
    bookmarks: bool
    timeout_seconds: int


@dataclass(frozen=True)
class ApiAnswer:
    code: int
    doc: Any
    headers: tuple[tuple[str, str], ...] = ()
    watch: WatchSpec | None = None


def status_answer(e: StatusError, headers: tuple[tuple[str, str], ...] = ()) -> ApiAnswer:
    return ApiAnswer(e.code, e.status(), headers)


def serve(req: ApiRequest, state: ClusterState, now: float) -> ApiAnswer:
    """Answer one request against `state` at wall time `now`."""
    try:
        return _route(req, state, now)
    except StatusError as e:
        return status_answer(e)


def _route(req: ApiRequest, state: ClusterState, now: float) -> ApiAnswer:
    path = req.path.rstrip("/") or "/"
    parts = [unquote(p) for p in path.strip("/").split("/")] if path != "/" else []
    if path in ("/healthz", "/readyz", "/livez"):
        return ApiAnswer(200, "ok")
    if path == "/version":
        return ApiAnswer(200, discovery.SERVER_VERSION)
    if path == "/api":
        return ApiAnswer(200, discovery.api_versions("127.0.0.1"))
    if path == "/apis":
        return ApiAnswer(200, discovery.api_groups())
    if path == "/openapi/v3":
        return ApiAnswer(200, discovery.openapi_v3_root())
    if path.startswith("/openapi/v3/"):
        return _found(discovery.openapi_v3(path.removeprefix("/openapi/v3/")))
    if len(parts) == 2 and parts[0] == "apis":
        return _found(discovery.api_group(parts[1]))
    if parts[:2] == ["api", "v1"]:
        api_version, rest = "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        raise _not_found()
    if not rest:
        return _found(discovery.resource_list(api_version))
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    kind = discovery.kind_for(api_version, rest[0])
    if kind is None or (kind.namespaced and namespace is None and len(rest) > 1) or len(rest) > 3:
        raise _not_found()
    if kind is NAMESPACE and namespace is not None:
        raise _not_found()
    name = rest[1] if len(rest) >= 2 else None
    sub = rest[2] if len(rest) >= 3 else None
    if sub not in (None, "status") or (sub == "status" and not is_custom(kind) and kind is not NAMESPACE):
        raise _not_found()
    if name is None:
        return _collection(req, state, kind, namespace, now)
    return _item(req, state, kind, namespace, name, sub, now)


def _collection(req: ApiRequest, state: ClusterState, kind: Kind, ns: str | None, now: float) -> ApiAnswer:
    labels = _labels(req.query.get("labelSelector"))
    fields = _fields(req.query.get("fieldSelector"), kind)
    if req.method == "GET" and req.is_watch:
        return ApiAnswer(200, None, watch=WatchSpec(
            kind, ns, labels, fields, req.query.get("resourceVersion"), discovery.wants_table(req.accept),
            bool(query_bool(req.query, "allowWatchBookmarks")), _timeout(req.query.get("timeoutSeconds"))))
    if req.method == "GET":
        doc = state.list_objects(kind, ns, labels, fields, limit=_limit(req.query.get("limit")),
                                 continue_token=req.query.get("continue") or None)
        if discovery.wants_table(req.accept):
            doc = discovery.table(kind, doc["items"], doc["metadata"]["resourceVersion"], now)
        return ApiAnswer(200, doc)
    if req.method == "POST":
        return ApiAnswer(201, state.create(kind, ns, _body(req), now=now, options=_options(req)))
    if req.method == "DELETE":
        body = _body(req, empty_ok=True)
        return ApiAnswer(200, state.delete_collection(kind, ns, labels, fields, propagation=_propagation(req, body),
                                                      options=_options(req), now=now))
    raise _not_allowed(req.method)


def _item(req: ApiRequest, state: ClusterState, kind: Kind, ns: str | None, name: str, sub: str | None,
          now: float) -> ApiAnswer:
    if req.method == "GET":
        obj = state.get(kind, ns, name)
        if discovery.wants_table(req.accept):
            return ApiAnswer(200, discovery.table(kind, [obj], obj["metadata"]["resourceVersion"], now))
        return ApiAnswer(200, obj)
    options = _options(req)
    if req.method == "PATCH":
        ctype = req.content_type.split(";")[0].strip()
        if ctype == APPLY:
            existed = state.exists(kind, ns, name)
            obj = state.apply(kind, ns, name, _body(req, yaml_ok=True), manager=req.query.get("fieldManager", ""),
                              now=now, force=bool(query_bool(req.query, "force")), subresource=sub, options=options)
            return ApiAnswer(200 if existed else 201, obj)
        patch_type = {MERGE: "merge", JSON_PATCH: "json"}.get(ctype)
        if ctype == STRATEGIC and not is_custom(kind):
            patch_type = "strategic"  # built-in kinds only: a custom resource has no patch strategy
        if patch_type is None:
            accepted = [JSON_PATCH, MERGE, APPLY] if is_custom(kind) else [JSON_PATCH, MERGE, APPLY, STRATEGIC]
            raise StatusError(415, "UnsupportedMediaType",
                              f"the body of the request was in an unknown format - accepted media types include: "
                              f"{', '.join(accepted)}")
        return ApiAnswer(200, state.patch(kind, ns, name, _body(req, any_json=True), patch_type=patch_type,
                                          subresource=sub, options=options, now=now))
    if req.method == "PUT":
        existed = state.exists(kind, ns, name)  # an Event's PUT may create it (201)
        return ApiAnswer(200 if existed else 201, state.replace(kind, ns, name, _body(req), subresource=sub,
                                                                options=options, now=now))
    if req.method == "DELETE" and sub is None:
        body = _body(req, empty_ok=True)
        obj = state.delete(kind, ns, name, preconditions=_preconditions(body), propagation=_propagation(req, body),
                           options=options, now=now)
        if kind.plural not in RETURNS_DELETED_OBJECT and not obj["metadata"].get("deletionTimestamp"):
            # Gone at once, from a store that does not return the deleted object: the generic store's
            # finalizeDelete answers a Status naming it (apiserver pkg/registry/generic/registry/store.go).
            # One a finalizer holds is answered with the object, as from every store.
            details = {"name": name, "group": kind.group, "kind": kind.plural, "uid": obj["metadata"].get("uid")}
            return ApiAnswer(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                   "details": {k: v for k, v in details.items() if v}})  # omitempty
        return ApiAnswer(200, obj)
    raise _not_allowed(req.method)


# -- reading a request -------------------------------------------------------------------------------

def _options(req: ApiRequest) -> WriteOptions:
    dry = req.query.get("dryRun")
    if dry not in (None, "", "All"):
        raise StatusError(400, "BadRequest", f'dryRun: Unsupported value: "{dry}": supported values: "All"')
    # The manager an update is recorded under: `fieldManager`, else the client's user agent up to its '/'.
    manager = req.query.get("fieldManager") or req.user_agent.partition("/")[0] or "unknown"
    return WriteOptions(dry_run=dry == "All", manager=manager)


def _propagation(req: ApiRequest, body: Mapping[str, Any]) -> str | None:
    policy = body.get("propagationPolicy", req.query.get("propagationPolicy"))
    if body.get("orphanDependents") is True or query_bool(req.query, "orphanDependents"):
        policy = policy or "Orphan"
    if policy is not None and not isinstance(policy, str):
        raise StatusError(400, "BadRequest", "propagationPolicy: must be a string")
    return policy or None


def _limit(text: str | None) -> int | None:
    if text in (None, "", "0"):
        return None
    try:
        limit = int(text)
    except ValueError:
        raise StatusError(400, "BadRequest", f"limit: Invalid value: {text!r}") from None
    return limit if limit > 0 else None


def _preconditions(body: Mapping[str, Any]) -> Mapping[str, str]:
    """DeleteOptions' `preconditions` (`uid`, `resourceVersion`), each a string when present."""
    pre = body.get("preconditions")
    if pre is None:
        return {}
    if not isinstance(pre, dict) or not all(isinstance(pre.get(k), str | None) for k in ("uid", "resourceVersion")):
        raise StatusError(400, "BadRequest", "preconditions: must be an object of uid and resourceVersion strings")
    return {k: v for k in ("uid", "resourceVersion") if isinstance(v := pre.get(k), str)}


def _timeout(text: str | None) -> int:
    if text in (None, ""):
        return DEFAULT_WATCH_TIMEOUT
    try:
        seconds = int(text)
    except ValueError:
        raise StatusError(400, "BadRequest", f"timeoutSeconds: Invalid value: {text!r}") from None
    return min(max(seconds, 1), MAX_WATCH_TIMEOUT)


def _labels(text: str | None) -> Selector:
    try:
        return parse(text)
    except SelectorError as e:
        raise StatusError(400, "BadRequest", str(e)) from e


def _fields(text: str | None, kind: Kind) -> FieldSelector:
    try:
        return parse_fields(text, events.field_labels(kind) if kind.plural == "events" else META_FIELDS)
    except SelectorError as e:
        raise StatusError(400, "BadRequest", str(e)) from e


def _body(req: ApiRequest, *, yaml_ok: bool = False, any_json: bool = False, empty_ok: bool = False) -> Any:
    if empty_ok and not req.body.strip():
        return {}
    try:
        doc = json.loads(req.body)
    except (ValueError, RecursionError):
        doc = None
        if yaml_ok:
            try:
                doc = yaml.safe_load(req.body)
            except (yaml.YAMLError, RecursionError, ValueError):
                doc = None
        if doc is None:
            raise StatusError(400, "BadRequest", "the body of the request could not be decoded as JSON") from None
    if not any_json and not isinstance(doc, dict):
        raise StatusError(400, "BadRequest", "the body of the request is not a JSON object")
    return doc


def _found(doc: dict[str, Any] | None) -> ApiAnswer:
    if doc is None:
        raise _not_found()
    return ApiAnswer(200, doc)


def _not_found() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource")


def _not_allowed(method: str) -> StatusError:
    return StatusError(405, "MethodNotAllowed", f"the server does not allow this method ({method}) here")
