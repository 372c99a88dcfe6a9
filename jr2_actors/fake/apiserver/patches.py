"""The three patch formats a real server takes: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and,
for built-in kinds only, strategic merge patch (what `kubectl patch`, `apply` and `edit` send for them).

jr2's built-in kinds (Secret, Namespace) have no list with a merge key that a client patches, so a
strategic merge patch is a merge patch that also understands the `$patch` and `$`-prefixed directives
kubectl writes (`$patch: delete|replace`, `$setElementOrder/…`, `$retainKeys`, `$deleteFromPrimitiveList/…`).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer


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
    """RFC 6902 (the `jsonpatch` library): add, remove, replace, move, copy, test, on a copy of `target`.
    A patch that cannot be read is 400; a failed `test`, a missing path or a bad index is 422."""
    if not isinstance(patch, list):
        raise PatchError("a JSON patch must be a JSON array of operations", 400)
    for op in patch:
        if not isinstance(op, dict) or not isinstance(op.get("op"), str) or not isinstance(op.get("path"), str):
            raise PatchError(f"invalid JSON patch operation: {op!r}", 400)
    try:
        return jsonpatch.JsonPatch(patch).apply(target)
    except jsonpatch.InvalidJsonPatch as e:  # an unknown op, no `value` or `from`
        raise PatchError(str(e), 400) from e
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
        raise PatchError(str(e)) from e
