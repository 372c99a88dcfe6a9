"""The three patch formats a real server takes: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and,
for built-in kinds only, strategic merge patch (what `kubectl patch`, `apply` and `edit` send for them).

jr2's built-in kinds (Secret, Namespace) have no list with a merge key that a client patches, so a
strategic merge patch is a merge patch that also understands the `$patch` and `$`-prefixed directives
kubectl writes (`$patch: delete|replace`, `$setElementOrder/…`, `$retainKeys`, `$deleteFromPrimitiveList/…`).
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(Exception):
    """A patch the server refuses: 400 when it cannot be read, 422 when it cannot be applied."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


def apply_patch(patch_type: str, target: Any, patch: object) -> Any:
    if patch_type == "merge":
        if not isinstance(patch, dict):
            raise PatchError("a merge patch must be a JSON object", 400)
        return merge(target, patch)
    if patch_type == "json":
        return json_patch(target, patch)
    if patch_type == "strategic":
        if not isinstance(patch, dict):
            raise PatchError("a strategic merge patch must be a JSON object", 400)
        return strategic(target, patch)
    raise PatchError(f"unknown patch type {patch_type}", 400)


def merge(target: object, patch: object) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


def strategic(target: object, patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$") and v is not None}
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.partition("/")[2]
            if isinstance(result.get(name), list) and isinstance(value, list):
                result[name] = [v for v in result[name] if v not in value]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def json_patch(target: Any, patch: object) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test; a failed `test` or a missing path is 422."""
    if not isinstance(patch, list):
        raise PatchError("a JSON patch must be a JSON array of operations", 400)
    doc = copy.deepcopy(target)
    for op in patch:
        if not isinstance(op, dict) or not isinstance(op.get("op"), str) or not isinstance(op.get("path"), str):
            raise PatchError(f"invalid JSON patch operation: {op!r}", 400)
        kind, path = op["op"], _pointer(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f'{kind} operation does not have a value: "{op["path"]}"', 400)
        if kind == "add":
            doc = _put(doc, path, copy.deepcopy(op["value"]), insert=True)
        elif kind == "remove":
            doc, _ = _take(doc, path)
        elif kind == "replace":
            _get(doc, path)
            doc = _put(doc, path, copy.deepcopy(op["value"]), insert=False)
        elif kind in ("move", "copy"):
            if not isinstance(op.get("from"), str):
                raise PatchError(f'{kind} operation does not have a from: "{op["path"]}"', 400)
            source = _pointer(op["from"])
            if kind == "move":
                doc, value = _take(doc, source)
            else:
                value = copy.deepcopy(_get(doc, source))
            doc = _put(doc, path, value, insert=True)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f'testing value {op["path"]} failed')
        else:
            raise PatchError(f"Unexpected kind: {kind}", 400)
    return doc


def _pointer(text: str) -> list[str]:
    if text == "":
        return []
    if not text.startswith("/"):
        raise PatchError(f"JSON pointer {text!r} does not start with /", 400)
    return [p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/")]


def _index(container: list[Any], segment: str, *, insert: bool) -> int:
    if insert and segment == "-":
        return len(container)
    if not segment.isdigit() or (len(segment) > 1 and segment.startswith("0")):
        raise PatchError(f"invalid array index {segment!r}")
    i = int(segment)
    if i > len(container) or (i == len(container) and not insert):
        raise PatchError(f"array index {i} out of bounds")
    return i


def _get(doc: Any, path: list[str]) -> Any:
    for token in path:
        if isinstance(doc, dict):
            if token not in doc:
                raise PatchError(f"missing path: /{'/'.join(path)}")
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, insert=False)]
        else:
            raise PatchError(f"missing path: /{'/'.join(path)}")
    return doc


def _put(doc: Any, path: list[str], value: Any, *, insert: bool) -> Any:
    if not path:
        return value
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        i = _index(parent, last, insert=insert)
        if insert:
            parent.insert(i, value)
        else:
            parent[i] = value
    else:
        raise PatchError(f"missing path: /{'/'.join(path)}")
    return doc


def _take(doc: Any, path: list[str]) -> tuple[Any, Any]:
    if not path:
        raise PatchError("cannot remove the whole document")
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, insert=False))
    raise PatchError(f"missing path: /{'/'.join(path)}")
