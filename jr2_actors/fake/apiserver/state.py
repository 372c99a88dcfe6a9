"""The fake API server's object store and watch history: pure, single-threaded, deterministic.

Theory of operation: the store holds objects of jr2's kinds by (plural, namespace, name) and one
increasing resourceVersion counter. Every change that alters an object bumps the counter, stamps the
object, appends an event to a bounded history, and hands the event to each matching watcher's sink. A
change that alters nothing (a no-op patch or apply) bumps nothing and notifies no one, as on a real
API server — which is what makes "the operator writes status only when it changes" observable.

Watch semantics follow the API server's watch cache: no version (or "0") replays the current objects
as ADDED; a version at or after the oldest retained event replays what came after it; an older one is
answered with the 410 `Expired` ERROR frame (inside an HTTP 200, written by the HTTP layer). The
history is bounded (the last 256 events by default) and can be compacted at once.

Errors are `StatusError`s carrying the code and reason a real API server answers with. The store
never reads a clock of its own: times are passed in.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jr2_actors.fake.apiserver.selectors import Selector
from jr2_actors.kube.kinds import JR2_KINDS, NAMESPACE, Kind
from jr2_actors.timefmt import rfc3339

DEFAULT_HISTORY = 256
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
STATUS_KINDS = frozenset({"sandboxes", "repos"})  # the CRDs with a status subresource

Obj = dict[str, Any]
Sink = Callable[[Obj], None]  # receives one watch event: {"type", "object"}


class StatusError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details or {})

    def status(self) -> Obj:
        doc: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            doc["details"] = self.details
        return doc


def not_found(kind: Kind, name: str) -> StatusError:
    group = f".{kind.group}" if kind.group else ""
    return StatusError(404, "NotFound", f'{kind.plural}{group} "{name}" not found',
                       {"name": name, "group": kind.group, "kind": kind.plural})


def expired_frame(requested: str, oldest: int) -> Obj:
    """The 410 frame exactly as CONTRACTS.md §2 records it."""
    return {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": f"too old resource version: {requested} ({oldest})",
                                        "reason": "Expired", "code": 410}}


@dataclass(frozen=True)
class Event:
    rv: int
    type: str
    plural: str
    namespace: str | None
    object: Obj = field(repr=False)


@dataclass
class Watcher:
    kind: Kind
    namespace: str | None
    selector: Selector
    sink: Sink

    def wants(self, event: Event) -> bool:
        if event.plural != self.kind.plural:
            return False
        if self.namespace is not None and event.namespace != self.namespace:
            return False
        return self.selector.matches(event.object.get("metadata", {}).get("labels"))


class ClusterState:
    def __init__(self, *, namespaces: tuple[str, ...] = ("default",), history: int = DEFAULT_HISTORY) -> None:
        if history < 1:
            raise ValueError("history must hold at least one event")
        self.rv = 0
        self.history_limit = history
        self._objects: dict[tuple[str, str | None, str], Obj] = {}
        self._history: deque[Event] = deque()
        self._compacted_through = 0
        self._watchers: dict[int, Watcher] = {}
        self._next_watcher = 1
        for ns in namespaces:
            self.create(NAMESPACE, None, {"metadata": {"name": ns}}, now=0.0)

    # -- reads ---------------------------------------------------------------------------------------

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self._objects.get((kind.plural, namespace, name))
        if obj is None:
            raise not_found(kind, name)
        return copy.deepcopy(obj)

    def list_objects(self, kind: Kind, namespace: str | None, selector: Selector) -> Obj:
        items = [copy.deepcopy(o) for (plural, ns, _), o in sorted(self._objects.items(), key=_sort_key)
                 if plural == kind.plural and (namespace is None or ns == namespace)
                 and selector.matches(o["metadata"].get("labels"))]
        return {"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(self.rv)}, "items": items}

    def objects(self, kind: Kind) -> list[Obj]:
        return [copy.deepcopy(o) for (plural, _, _), o in sorted(self._objects.items(), key=_sort_key)
                if plural == kind.plural]

    @property
    def oldest_retained(self) -> int:
        return self._history[0].rv if self._history else self.rv

    # -- writes --------------------------------------------------------------------------------------

    def create(self, kind: Kind, namespace: str | None, body: Obj, *, now: float) -> Obj:
        self._check_body(kind, body)
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise StatusError(422, "Invalid", f'{kind.kind} "" is invalid: metadata.name: Required value: '
                                              "name or generateName is required")
        self._check_name(kind, name)
        self._check_namespace(kind, namespace)
        if (kind.plural, namespace, name) in self._objects:
            group = f".{kind.group}" if kind.group else ""
            raise StatusError(409, "AlreadyExists", f'{kind.plural}{group} "{name}" already exists',
                              {"name": name, "group": kind.group, "kind": kind.plural})
        obj = copy.deepcopy(body)
        obj["apiVersion"] = kind.api_version
        obj["kind"] = kind.kind
        m = obj.setdefault("metadata", {})
        m.pop("resourceVersion", None)
        m["uid"] = str(uuid.uuid4())
        m["creationTimestamp"] = rfc3339(now)
        m["generation"] = 1
        if kind.namespaced:
            m["namespace"] = namespace
        if kind.plural in STATUS_KINDS:
            obj.pop("status", None)
        return self._commit("ADDED", kind, namespace, obj)

    def apply(self, kind: Kind, namespace: str | None, name: str, body: Obj, *, manager: str, now: float) -> Obj:
        """Server-side apply, approximated: create when absent, else merge the applied fields in."""
        if not manager:
            raise StatusError(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                              "Required value: is required for apply patch")
        self._check_body(kind, body)
        body_name = (body.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise StatusError(400, "BadRequest", "the name of the object "
                                                 f"({body_name}) does not match the name on the URL ({name})")
        existing = self._objects.get((kind.plural, namespace, name))
        applied = copy.deepcopy(body)
        applied.setdefault("metadata", {})["name"] = name
        if existing is None:
            return self.create(kind, namespace, applied, now=now)
        applied.pop("status", None)
        merged = _deep_merge(copy.deepcopy(existing), applied)
        return self._update(kind, namespace, existing, merged)

    def merge_patch(self, kind: Kind, namespace: str | None, name: str, patch: object, *,
                    subresource: str | None = None) -> Obj:
        if not isinstance(patch, dict):
            raise StatusError(400, "BadRequest", "a merge patch must be a JSON object")
        if subresource not in (None, "status"):
            raise StatusError(404, "NotFound", f"the server could not find the requested resource ({subresource})")
        if subresource == "status" and kind.plural not in STATUS_KINDS:
            raise StatusError(404, "NotFound", "the server could not find the requested resource")
        existing = self._objects.get((kind.plural, namespace, name))
        if existing is None:
            raise not_found(kind, name)
        patched = _merge_patch(copy.deepcopy(existing), patch)
        if not isinstance(patched.get("metadata"), dict):
            raise StatusError(422, "Invalid", f'{kind.kind} "{name}" is invalid: metadata: Invalid value')
        if subresource == "status":
            result = copy.deepcopy(existing)
            if "status" in patched:
                result["status"] = patched["status"]
            else:
                result.pop("status", None)
        else:
            result = patched
            if kind.plural in STATUS_KINDS:  # the main resource ignores status
                if "status" in existing:
                    result["status"] = copy.deepcopy(existing["status"])
                else:
                    result.pop("status", None)
        return self._update(kind, namespace, existing, result)

    def replace_status(self, kind: Kind, namespace: str | None, name: str, status: Obj) -> Obj:
        """Set the whole status (how a controller writes it); an unchanged status writes nothing."""
        existing = self._objects.get((kind.plural, namespace, name))
        if existing is None:
            raise not_found(kind, name)
        result = copy.deepcopy(existing)
        result["status"] = copy.deepcopy(status)
        return self._update(kind, namespace, existing, result)

    def delete(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self._objects.pop((kind.plural, namespace, name), None)
        if obj is None:
            raise not_found(kind, name)
        final = self._commit("DELETED", kind, namespace, obj, store=False)
        uid = obj["metadata"]["uid"]
        for (plural, ns, dep_name), dep in list(self._objects.items()):  # owner references: background GC
            owners = dep["metadata"].get("ownerReferences") or []
            if any(isinstance(o, dict) and o.get("uid") == uid for o in owners):
                dep_kind = next(k for k in JR2_KINDS if k.plural == plural)
                self.delete(dep_kind, ns, dep_name)
        if kind is NAMESPACE:
            for (plural, ns, dep_name) in [k for k in self._objects if k[1] == name]:
                dep_kind = next(k for k in JR2_KINDS if k.plural == plural)
                self.delete(dep_kind, ns, dep_name)
        return final

    # -- watches -------------------------------------------------------------------------------------

    def subscribe(self, kind: Kind, namespace: str | None, selector: Selector, since: str | None,
                  sink: Sink) -> tuple[list[Obj], int | None]:
        """Initial frames to send, and the watcher id (None when the answer is the 410 frame)."""
        watcher = Watcher(kind, namespace, selector, sink)
        if since in (None, "", "0"):
            initial = [{"type": "ADDED", "object": o} for o in self.list_objects(kind, namespace, selector)["items"]]
        else:
            assert since is not None
            try:
                wanted = int(since)
            except ValueError:
                raise StatusError(400, "BadRequest", f"resourceVersion: Invalid value: {since!r}") from None
            if wanted < self._compacted_through:
                return [expired_frame(since, self.oldest_retained)], None
            initial = [{"type": e.type, "object": copy.deepcopy(e.object)} for e in self._history
                       if e.rv > wanted and watcher.wants(e)]
        wid = self._next_watcher
        self._next_watcher += 1
        self._watchers[wid] = watcher
        return initial, wid

    def unsubscribe(self, wid: int) -> None:
        self._watchers.pop(wid, None)

    def compact(self) -> None:
        """Forget every retained event: any resume from before now gets the 410."""
        self._history.clear()
        self._compacted_through = self.rv

    # -- internals -----------------------------------------------------------------------------------

    def _update(self, kind: Kind, namespace: str | None, existing: Obj, result: Obj) -> Obj:
        result["metadata"]["resourceVersion"] = existing["metadata"].get("resourceVersion")
        for immutable in ("uid", "creationTimestamp", "name", "namespace"):
            if immutable in existing["metadata"]:
                result["metadata"][immutable] = existing["metadata"][immutable]
        if _spec_of(result) != _spec_of(existing):
            result["metadata"]["generation"] = existing["metadata"].get("generation", 1) + 1
        if result == existing:
            return copy.deepcopy(existing)  # a no-op writes nothing and tells no watcher
        return self._commit("MODIFIED", kind, namespace, result)

    def _commit(self, type_: str, kind: Kind, namespace: str | None, obj: Obj, *, store: bool = True) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if store:
            self._objects[(kind.plural, namespace, obj["metadata"]["name"])] = obj
        event = Event(self.rv, type_, kind.plural, namespace, copy.deepcopy(obj))
        self._history.append(event)
        while len(self._history) > self.history_limit:
            self._compacted_through = self._history.popleft().rv
        for watcher in list(self._watchers.values()):
            if watcher.wants(event):
                watcher.sink({"type": type_, "object": copy.deepcopy(obj)})
        return copy.deepcopy(obj)

    def _check_body(self, kind: Kind, body: object) -> None:
        if not isinstance(body, dict):
            raise StatusError(400, "BadRequest", "the body of the request is not a JSON object")
        if body.get("kind") not in (None, kind.kind) or body.get("apiVersion") not in (None, kind.api_version):
            raise StatusError(400, "BadRequest", f"the API version in the data ({body.get('apiVersion')}) "
                                                 f"and kind ({body.get('kind')}) do not match {kind.api_version} "
                                                 f"{kind.kind}")
        meta = body.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise StatusError(400, "BadRequest", "metadata is not an object")
        for key in ("labels", "annotations"):
            value = (meta or {}).get(key)
            if value is not None and not (isinstance(value, dict)
                                          and all(isinstance(v, str) for v in value.values())):
                raise StatusError(422, "Invalid", f"metadata.{key}: Invalid value: values must be strings")

    def _check_name(self, kind: Kind, name: object) -> None:
        if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            raise StatusError(422, "Invalid", f'{kind.kind} "{name}" is invalid: metadata.name: Invalid value: '
                                              f"{name!r}: a lowercase RFC 1123 subdomain must consist of lower "
                                              "case alphanumeric characters, '-' or '.'")

    def _check_namespace(self, kind: Kind, namespace: str | None) -> None:
        if kind.namespaced and (NAMESPACE.plural, None, namespace) not in self._objects:
            raise StatusError(404, "NotFound", f'namespaces "{namespace}" not found',
                              {"name": namespace, "kind": "namespaces"})


def _sort_key(item: tuple[tuple[str, str | None, str], Obj]) -> tuple[str, str, str]:
    (plural, ns, name), _ = item
    return plural, ns or "", name


def _spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _merge_patch(target: object, patch: object) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _deep_merge(base: Obj, applied: Obj) -> Obj:
    for key, value in applied.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base
