"""Server-side apply with field ownership, as structured-merge-diff does it for schemaless custom resources.

Theory of operation: each object carries `metadata.managedFields`, one entry per (manager, operation,
subresource) with the set of fields it owns (`fieldsV1`). A field is a path of map keys down to a leaf: a
scalar, a list (lists are atomic, as in a CRD that declares no list type) or an empty map.

- An apply by manager M sets the fields it sends. A field another manager owns with a different value is a
  conflict: 409 naming each field, unless `force`, which takes the field from the other manager.
- A field M applied before and applies no longer is removed, unless another manager owns it too.
- Any other write (create, update, patch) by a manager takes the fields it changed ("Update" entries).
- An entry that owns nothing is dropped; a write that changes no field set keeps the entries' times.

Only `metadata` labels, annotations, finalizers and ownerReferences and the object's own fields are
tracked; the server's own metadata (uid, resourceVersion, …) never is.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from jr2_actors.fake.apiserver.status import StatusError
from jr2_actors.kube.kinds import Kind
from jr2_actors.values.timefmt import rfc3339

Obj = dict[str, Any]
Path = tuple[str, ...]
_TRACKED_META = ("generateName", "labels", "annotations", "finalizers", "ownerReferences")


def leaves(obj: Obj, *, status: bool | None) -> set[Path]:
    """The fields `obj` sets; `status` True for the status only, False for all but status, None for all."""
    found: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if (status is True and key != "status") or (status is False and key == "status"):
            continue
        if key == "metadata":
            if isinstance(value, dict):
                for meta_key in _TRACKED_META:
                    if meta_key in value:
                        _walk(value[meta_key], ("metadata", meta_key), found)
            continue
        _walk(value, (key,), found)
    return found


def _walk(value: Any, path: Path, found: set[Path]) -> None:
    if value is None:
        return  # a null sets nothing (an Event's eventTime: null is no field of its writer's)
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _walk(v, (*path, str(k)), found)
    else:
        found.add(path)


def get_path(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


_MISSING = object()


def _remove_path(obj: Obj, path: Path) -> None:
    parent: Any = obj
    for key in path[:-1]:
        parent = parent.get(key) if isinstance(parent, dict) else None
    if isinstance(parent, dict):
        parent.pop(path[-1], None)


def _overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _covers(owned: Path, path: Path, obj: Obj) -> bool:
    """Whether owning `owned` is owning `path` too: the same field, one inside it, or an atomic value
    (not a map) that holds it. An owned empty map owns the map, not the keys others put in it later."""
    if owned[:len(path)] == path:
        return True
    return path[:len(owned)] == owned and not isinstance(get_path(obj, owned), dict)


SELF = "."  # a path ending so names the map itself, not a key in it ("." in fieldsV1)


def encode(paths: Iterable[Path]) -> Obj:
    tree: Obj = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(key if key == SELF else f"f:{key}", {})
    return tree


def decode(tree: object, prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    if not isinstance(tree, dict):
        return found
    children = {k: v for k, v in tree.items() if isinstance(k, str) and k.startswith("f:")}
    if not children and prefix and SELF not in tree:
        found.add(prefix)
    if SELF in tree and prefix:
        found.add((*prefix, SELF))
    for key, sub in children.items():
        found |= decode(sub, (*prefix, key[2:]))
    return found


def _maps(obj: Obj, *, custom: bool) -> set[Path]:
    """The non-empty maps `obj` sets where `leaves` looks (metadata itself aside): each a field of its own. In
    a custom resource every object is one; in a built-in kind only its true maps (labels, annotations, a
    Secret's data), not its structs (an Event's involvedObject), as the real server's typed schemas say."""
    found: set[Path] = set()
    if not custom:
        meta = obj.get("metadata") or {}
        found = {("metadata", k) for k in ("labels", "annotations") if isinstance(meta.get(k), dict) and meta[k]}
        return found | {(k,) for k in ("data", "stringData") if isinstance(obj.get(k), dict) and obj[k]}
    for key, value in obj.items():
        if key == "metadata" and isinstance(value, dict):
            for meta_key in _TRACKED_META:
                _nonempty_maps(value.get(meta_key), ("metadata", meta_key), found)
        elif key not in ("apiVersion", "kind"):
            _nonempty_maps(value, (key,), found)
    return found


def _nonempty_maps(value: Any, path: Path, found: set[Path]) -> None:
    """Every non-empty map at or under `path` into `found` (a module function: a nested recursive one is a
    reference cycle per call, left for the collector's full passes)."""
    if isinstance(value, dict) and value:
        if path:
            found.add(path)
        for k, v in value.items():
            _nonempty_maps(v, (*path, str(k)), found)


def _asserts_nothing(path: Path, applied: Obj, existing: Obj) -> bool:
    """An empty map applied where a map is: the applier owns the map's node, no key in it, and takes none of
    the keys others own there (`spec: {}` beside another manager's `spec.port`: no conflict on a real v1.37
    server, which records `"f:spec": {}` for the applier)."""
    return get_path(applied, path) == {} and isinstance(get_path(existing, path), dict)


def _bare(path: Path, paths: set[Path]) -> Path:
    if path[-1] != SELF:
        return path
    inside = any(q[:len(path) - 1] == path[:-1] and len(q) > len(path) - 1 and q[-1] != SELF for q in paths)
    return path if inside else path[:-1]


class _Entries:
    """An object's managedFields as (manager, operation, subresource) → owned fields, plus each entry's doc."""

    def __init__(self, obj: Obj | None) -> None:
        self.docs: dict[tuple[str, str, str], Obj] = {}
        self.owned: dict[tuple[str, str, str], set[Path]] = {}
        entries = (obj or {}).get("metadata", {}).get("managedFields") or []
        for e in entries if isinstance(entries, list) else []:
            if isinstance(e, dict) and isinstance(e.get("manager"), str):
                key = (e["manager"], str(e.get("operation", "Update")), str(e.get("subresource", "")))
                self.docs[key] = e
                self.owned[key] = decode(e.get("fieldsV1"))

    def write(self, obj: Obj, touched: set[tuple[str, str, str]], api_version: str, now: float) -> None:
        entries = []
        for key, paths in self.owned.items():
            # A map that is gone takes its "." with it. A manager left owning nothing inside a map it made (a
            # forced apply took the rest) keeps the map's bare node, `"f:status": {}`, as the real server does.
            paths = {_bare(p, paths) for p in paths if p[-1] != SELF or isinstance(get_path(obj, p[:-1]), dict)}
            if not paths:
                continue
            before = self.docs.get(key)
            fields_v1 = encode(paths)
            if before is not None and before.get("fieldsV1") == fields_v1:
                entries.append(before)  # nothing it owns changed: its time stays (a no-op changes nothing)
                continue
            manager, operation, subresource = key
            at = rfc3339(now) if key in touched or before is None else before.get("time", rfc3339(now))
            doc = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": at,
                   "fieldsType": "FieldsV1", "fieldsV1": fields_v1}
            if subresource:
                doc["subresource"] = subresource
            entries.append(doc)
        meta = obj.setdefault("metadata", {})
        if entries:
            meta["managedFields"] = entries
        else:
            meta.pop("managedFields", None)


def record_update(obj: Obj, before: Obj | None, manager: str, api_version: str, now: float, *,
                  operation: str = "Update", subresource: str = "") -> None:
    """A write by `manager` that is not an apply: it owns what it changed, and nobody owns what went."""
    entries = _Entries(before)
    new = leaves(obj, status=None)
    old = leaves(before, status=None) if before is not None else set()
    changed = {p for p in new if before is None or get_path(before, p) != get_path(obj, p)}
    gone = old - new
    # A map the write brought into being is a field too: the real server records it as "." (measured on
    # v1.37, tests/real/test_fidelity.py); a key added to a map that was there is the key alone.
    custom = api_version.partition("/")[0] == "core.jr2.dev"
    created = {(*m, SELF) for m in _maps(obj, custom=custom) if before is None or get_path(before, m) is _MISSING}
    for key, paths in entries.owned.items():
        entries.owned[key] = {p for p in paths if not any(_overlaps(p, c) for c in changed | gone)}
    mine = (manager, operation, subresource)
    entries.owned[mine] = entries.owned.get(mine, set()) | changed | created
    entries.write(obj, {mine} if changed else set(), api_version, now)


def record_apply(obj: Obj, before: Obj | None, applied: Obj, manager: str, api_version: str, now: float, *,
                 subresource: str | None) -> None:
    entries = _Entries(before)
    mine = (manager, "Apply", subresource or "")
    entries.owned[mine] = {p for p in leaves(applied, status=True if subresource == "status" else None)
                           if get_path(obj, p) is not _MISSING}
    entries.write(obj, {mine}, api_version, now)


def apply(kind: Kind, existing: Obj, applied: Obj, manager: str, *, force: bool, subresource: str | None,
          status_kind: bool, api_version: str, now: float) -> Obj:
    """The object after `manager` applies `applied` to `existing` (server-managed metadata is the caller's)."""
    scope = True if subresource == "status" else (False if status_kind else None)
    sent = leaves(applied, status=scope)
    entries = _Entries(existing)
    mine = (manager, "Apply", subresource or "")
    conflicts: list[tuple[str, Path]] = []
    for key, owned in entries.owned.items():
        if key == mine or key[2] != (subresource or ""):
            continue
        hit = {p for p in sent for q in owned
               if _covers(q, p, existing) and get_path(existing, p) != get_path(applied, p)
               and not _asserts_nothing(p, applied, existing)}
        if hit and not force:
            conflicts += [(_manager_text(entries.docs[key]), p) for p in sorted(hit)]
        elif hit:
            entries.owned[key] = {q for q in owned if not any(_covers(q, p, existing) for p in hit)}
    if conflicts:
        raise _conflict_error(kind, existing["metadata"]["name"], conflicts)
    result = copy.deepcopy(existing)
    for path in entries.owned.get(mine, set()) - sent:
        others = [q for key, owned in entries.owned.items() if key != mine for q in owned]
        if not any(_covers(q, path, existing) for q in others):
            _remove_path(result, path)
    for path in sorted(sent):
        node = result
        for step in path[:-1]:
            if not isinstance(node.get(step), dict):
                node[step] = {}
            node = node[step]
        if _asserts_nothing(path, applied, existing):
            continue  # an empty map applied over a map: the map stays as it is, others' keys in it too
        node[path[-1]] = copy.deepcopy(get_path(applied, path))
    entries.owned[mine] = sent
    entries.write(result, {mine}, api_version, now)
    return result


def _manager_text(doc: Obj) -> str:
    """apiserver fieldmanager's printManager: an Update manager names its API version and time."""
    name = f'"{doc.get("manager", "")}"'
    if doc.get("operation") == "Update":
        at = f" at {doc['time']}" if doc.get("time") else ""
        return f"{name} using {doc.get('apiVersion', '')}{at}"
    return name


def _conflict_error(kind: Kind, name: str, conflicts: list[tuple[str, Path]]) -> StatusError:
    lines = [f"conflict with {who}: .{'.'.join(path)}" for who, path in conflicts]
    message = (f"Apply failed with 1 conflict: {lines[0]}" if len(lines) == 1
               else f"Apply failed with {len(lines)} conflicts: " + "\n".join(lines))
    return StatusError(409, "Conflict", message, {  # its details hold the causes alone (a real v1.37 server's)
        "causes": [{"reason": "FieldManagerConflict", "message": f"conflict with {who}",
                    "field": f".{'.'.join(path)}"} for who, path in conflicts]})
