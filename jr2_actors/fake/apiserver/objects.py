"""The fake API server's stored objects: what a kind's store does to them (defaults, string data, the
immutable fields, the schema), the history's events and the watchers that read it, the continue token.
Pure: `state.ClusterState` holds the objects; this says what they are."""

from __future__ import annotations

import base64
import binascii
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from jr2_actors.fake.apiserver import events
from jr2_actors.fake.apiserver.kinds import EVENT, STORED_KINDS, is_custom
from jr2_actors.fake.apiserver.schema import schema_for
from jr2_actors.fake.apiserver.selectors import FieldSelector, Selector
from jr2_actors.fake.apiserver.status import StatusError, invalid
from jr2_actors.kube.kinds import NAMESPACE, SECRET, Kind

STATUS_KINDS = frozenset({"sandboxes", "repos"})  # the CRDs with a status subresource
# The kinds with `metadata.generation`: custom resources (the CRD strategy sets it to 1 and moves it with the
# spec). The Secret, Namespace and Event strategies never set it, so those objects have none.
GENERATION_KINDS = STATUS_KINDS
# What a delete that removes the object at once answers with: the object itself where the kind's store sets
# ReturnDeletedObject (custom resources, Namespaces), else a Status naming it (the generic store's
# finalizeDelete: Secrets, Events).
# A Namespace's delete answers the object; a custom resource's, like a Secret's, a Status (measured on a
# real v1.37 server, tests/real/test_fidelity.py; the fake answered a CR's delete with the object before).
RETURNS_DELETED_OBJECT = {"namespaces"}
OPAQUE = "Opaque"  # a Secret's type when it names none (SetDefaults_Secret)
SERVER_META = ("uid", "creationTimestamp", "resourceVersion", "generation", "managedFields", "deletionTimestamp",
               "deletionGracePeriodSeconds", "selfLink")
FOREGROUND = "foregroundDeletion"

Obj = dict[str, Any]
Sink = Callable[[Obj], None]  # receives one watch event: {"type", "object"}


@dataclass(frozen=True)
class WriteOptions:
    dry_run: bool = False
    manager: str = ""  # the field manager an update is recorded under (`fieldManager`, else the client's)


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
    previous: Obj | None = field(default=None, repr=False)  # a MODIFIED event's object before it


@dataclass
class Watcher:
    kind: Kind
    namespace: str | None
    labels: Selector
    sink: Sink
    fields: FieldSelector = field(default_factory=FieldSelector)

    def selects(self, obj: Obj | None) -> bool:
        return obj is not None and self.labels.matches(obj.get("metadata", {}).get("labels")) \
            and self.fields.matches(obj)

    def frame(self, event: Event) -> Obj | None:
        """What this watcher is sent for `event`, if anything (the watch cache's rules: an object that
        leaves the selection is DELETED with its last selected state, one that enters it is ADDED)."""
        if event.plural != self.kind.plural or (self.namespace is not None and event.namespace != self.namespace):
            return None
        now = self.selects(event.object)
        if event.type != "MODIFIED":
            return {"type": event.type, "object": events.view(self.kind, event.object)} if now else None
        before = self.selects(event.previous)
        if now:
            return {"type": "MODIFIED" if before else "ADDED", "object": events.view(self.kind, event.object)}
        if before:
            assert event.previous is not None
            gone = json_copy(event.previous)
            gone["metadata"]["resourceVersion"] = str(event.rv)
            return {"type": "DELETED", "object": events.view(self.kind, gone)}
        return None


class History:
    """The retained events (the last `limit`) and the watchers that read them as they are committed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.events: deque[Event] = deque()
        self.compacted_through = 0  # a resume from before this version is 410
        self._watchers: dict[int, Watcher] = {}
        self._next_watcher = 1

    def oldest(self, rv: int) -> int:
        return self.events[0].rv if self.events else rv

    def record(self, event: Event) -> None:
        """Keep `event` (forgetting the oldest past the limit) and send it to every watcher it selects."""
        self.events.append(event)
        while len(self.events) > self.limit:
            self.compacted_through = self.events.popleft().rv
        for watcher in list(self._watchers.values()):
            frame = watcher.frame(event)
            if frame is not None:
                watcher.sink(frame)

    def undo_after(self, rv: int, plural: str, objects: dict[tuple[str, str | None, str], Obj]) -> None:
        """Turn `objects` (of `plural`, as they are now) back into what they were at `rv`."""
        for e in reversed(self.events):
            if e.rv <= rv:
                break
            if e.plural != plural:
                continue
            key = (e.plural, e.namespace, e.object["metadata"]["name"])
            if e.type == "ADDED":
                objects.pop(key, None)
            elif e.previous is not None:  # MODIFIED and DELETED carry the object as it was before
                objects[key] = e.previous

    def since(self, rv: int, watcher: Watcher) -> list[Obj]:
        """The frames `watcher` is owed for every retained event after `rv`."""
        return [f for e in self.events if e.rv > rv and (f := watcher.frame(e)) is not None]

    def add(self, watcher: Watcher) -> int:
        wid = self._next_watcher
        self._next_watcher += 1
        self._watchers[wid] = watcher
        return wid

    def remove(self, wid: int) -> None:
        self._watchers.pop(wid, None)

    def compact(self, rv: int) -> None:
        self.events.clear()
        self.compacted_through = rv


_J = TypeVar("_J")


def json_copy(value: _J) -> _J:
    """A deep copy of JSON data (dicts, lists, and immutable leaves), several times faster than
    `copy.deepcopy` (17 against 6 µs a Sandbox), which a list of 10,000 objects spent most of its time in
    (bench/fake_scale.py) and each write a third of its own (a virtual day's renewals, docs/bench/history.md)."""
    if isinstance(value, dict):
        return cast(_J, {k: json_copy(v) for k, v in value.items()})
    if isinstance(value, list):
        return cast(_J, [json_copy(v) for v in value])
    return value


def kind_named(plural: str) -> Kind:
    return STORED_KINDS[plural]


def key_of(kind: Kind, obj: Obj) -> tuple[str, str | None, str]:
    return kind.plural, obj["metadata"].get("namespace"), obj["metadata"]["name"]


def key_text(key: tuple[str, str | None, str]) -> str:
    return f"{key[1] or ''}/{key[2]}"


def sort_key(item: tuple[tuple[str, str | None, str], Obj]) -> tuple[str, str, str]:
    (plural, ns, name), _ = item
    return plural, ns or "", name


def encode_continue(start: str, rv: int) -> str:
    doc = {"v": "meta.k8s.io/v1", "rv": rv, "start": start}
    return base64.urlsafe_b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[str, int]:
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if (not isinstance(doc, dict) or doc.get("v") != "meta.k8s.io/v1" or not isinstance(doc.get("start"), str)
                or not isinstance(doc.get("rv"), int) or isinstance(doc.get("rv"), bool)):
            raise ValueError("not a continue token of this server")
    except (ValueError, binascii.Error, RecursionError, UnicodeDecodeError) as e:
        # The etcd store's words for a token it cannot read (storage/etcd3 decodeContinue).
        raise StatusError(400, "BadRequest", f"continue key is not valid: {e}") from None
    return doc["start"], doc["rv"]


def uid_text(n: int) -> str:
    """128 bits written as a UUID is (8-4-4-4-12 hex digits)."""
    h = f"{n & ((1 << 128) - 1):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def name_suffix(n: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphanums
    return "".join(alphabet[(n >> (5 * i)) % len(alphabet)] for i in range(5))


def spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def fold_string_data(kind: Kind, obj: Obj) -> Obj:
    """A Secret's `stringData` is write-only: each entry is folded into `data`, base64, and wins."""
    if kind is not SECRET or "stringData" not in obj:
        return obj
    string_data = obj.pop("stringData")
    if string_data is None:
        return obj
    if not isinstance(string_data, dict) or not all(isinstance(v, str) for v in string_data.values()):
        raise invalid(kind, obj.get("metadata", {}).get("name", ""),
                      [("stringData", "Invalid value", "must be a map of strings")])
    data = obj.get("data")
    folded = {k: base64.b64encode(v.encode()).decode() for k, v in string_data.items()}
    obj["data"] = {**(data if isinstance(data, dict) else {}), **folded}
    return obj


def set_defaults(kind: Kind, obj: Obj) -> None:
    """What the API server's defaulting fills in on every write (it decodes each body through it)."""
    if kind is SECRET and not obj.get("type"):
        obj["type"] = OPAQUE


def check_immutable(kind: Kind, existing: Obj, result: Obj) -> None:
    """ValidateSecretUpdate: a Secret's `type` never changes (422, `field is immutable`)."""
    if kind is SECRET and result.get("type") != existing.get("type", OPAQUE):
        raise invalid(kind, existing["metadata"]["name"],
                      [("type", "Invalid value", f'"{result.get("type")}": field is immutable')])


def validate_object(kind: Kind, obj: Obj) -> None:
    """A jr2 custom resource is checked against its CRD's schema — the very file in manifests/crds/
    (one source of truth): what it refuses is a 422 Invalid naming each field, as from a real API server."""
    if kind is EVENT:
        events.check(obj)
    if kind.plural not in STATUS_KINDS:
        return
    crd = schema_for(kind.plural)
    errors = crd.validate(obj)
    if errors:
        doc = crd.invalid_status(str(obj.get("metadata", {}).get("name", "")), errors)
        raise StatusError(422, "Invalid", doc["message"], doc["details"])


def check_subresource(kind: Kind, subresource: str | None) -> None:
    """Only `status`, and only on the kinds that have it: anything else is the server's 404."""
    if subresource not in (None, "status") or (subresource == "status" and kind.plural not in STATUS_KINDS
                                               and kind is not NAMESPACE):
        raise StatusError(404, "NotFound", "the server could not find the requested resource")

def check_body(kind: Kind, namespace: str | None, body: object) -> None:
    """A write's body names the kind and namespace of its request, or none (a real server's 400s)."""
    if not isinstance(body, dict):
        raise StatusError(400, "BadRequest", "the body of the request is not a JSON object")
    if body.get("kind") not in (None, kind.kind) or body.get("apiVersion") not in (None, kind.api_version):
        raise StatusError(400, "BadRequest", f"the API version in the data ({body.get('apiVersion')}) "
                                             f"and kind ({body.get('kind')}) do not match {kind.api_version} "
                                             f"{kind.kind}")
    meta = body.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise StatusError(400, "BadRequest", "metadata is not an object")
    body_ns = (meta or {}).get("namespace")
    if kind.namespaced and body_ns not in (None, "", namespace):
        # The API server's own words (apiserver handlers/rest.go).
        raise StatusError(400, "BadRequest", "the namespace of the provided object does not match the "
                                             "namespace sent on the request")


def check_namespace(objects: Mapping[tuple[str, str | None, str], Obj], kind: Kind, namespace: str | None) -> None:
    """A namespaced write needs its namespace, and one not being terminated (NamespaceLifecycle)."""
    if not kind.namespaced:
        return
    home = objects.get((NAMESPACE.plural, None, namespace or ""))
    if home is None:
        raise StatusError(404, "NotFound", f'namespaces "{namespace}" not found',
                          {"name": namespace, "kind": "namespaces"})
    if home["metadata"].get("deletionTimestamp"):
        # The NamespaceLifecycle admission plugin's words.
        raise StatusError(403, "Forbidden", f'{kind.plural} "" is forbidden: unable to create new content in '
                                            f"namespace {namespace} because it is being terminated",
                          {"kind": kind.plural, "causes": [{"reason": "NamespaceTerminating",
                                                            "message": f"namespace {namespace} is being "
                                                                       "terminated",
                                                            "field": "metadata.namespace"}]})


def dependents(objects: Mapping[tuple[str, str | None, str], Obj], uid: str) -> list[tuple[str, str | None, str]]:
    """The keys of the objects whose `ownerReferences` name `uid` (what a cascading delete reaches)."""
    return [key for key, dep in objects.items()
            if any(isinstance(o, dict) and o.get("uid") == uid for o in dep["metadata"].get("ownerReferences")
                   or [])]


def list_answer(kind: Kind, meta: Obj, items: list[Obj], remaining: int) -> Obj:
    """A list as the real server answers it (v1.37, tests/real/test_fidelity.py): a built-in kind's items carry
    no apiVersion or kind (a typed list); `remainingItemCount` when a page leaves some (counted only with no
    selector); a custom resource's list (unstructured) always carries `continue`, "" when there is none."""
    if not is_custom(kind):
        for item in items:
            item.pop("apiVersion", None)
            item.pop("kind", None)
    if remaining:
        meta["remainingItemCount"] = remaining
    if is_custom(kind):
        meta.setdefault("continue", "")
    return {"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta, "items": items}
