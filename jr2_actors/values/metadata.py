"""One lenient reader of a Kubernetes object's fields: a wrong shape reads as absent, never raises.

What the API server sends is outside input: `metadata` may be missing, a list, or hold a number where a
string belongs. Every reader of an object's metadata (the frame decoder, the watch's identity, view and
cache, the Workspace's shell) asks here, so "absent" means one thing everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mapping(value: object) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def text(value: object) -> str:
    """`value` when it is a string, else ""."""
    return value if isinstance(value, str) else ""


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's `metadata`, or an empty mapping when it has none (or not an object)."""
    return mapping(obj.get("metadata"))


def meta_text(obj: Mapping[str, Any], key: str) -> str:
    """`metadata[key]` when it is a string (`name`, `uid`, `resourceVersion`), else ""."""
    return text(metadata(obj).get(key))
