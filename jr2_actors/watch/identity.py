"""Which Workspace a Sandbox belongs to: labels are lossy selectors, annotations are authoritative.

dagr T107: a label value is a sanitized truncation, visibly lossy, so nothing trusts it as an identity;
every route goes through the annotations. A Sandbox whose label disagrees with its annotation, or that
lacks either, is foreign: reported, never routed.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from jr2_actors.values.metadata import text

RUN_LABEL = "jr2.dev/run"
WORKFLOW_LABEL = "jr2.dev/workflow"
RUN_ID_ANNOTATION = "jr2.dev/run-id"
WORKSPACE_ANNOTATION = "jr2.dev/workspace"
KEEPALIVE_ANNOTATION = "jr2.dev/keepalive"
LABEL_MAX = 63
NAME_MAX = 63

_DISALLOWED = re.compile(r"[^A-Za-z0-9._-]")
_DASH_RUN = re.compile(r"-{2,}")
_EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
_SLUG_DISALLOWED = re.compile(r"[^a-z0-9-]")
_PLAIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")  # a label value that label_value keeps as is


class SandboxKey(NamedTuple):
    """The authoritative identity of a Workspace's Sandbox: its run and its Workspace path.

    A tuple, not a frozen dataclass: the watch hashes a key about ten times a frame (its maps of signatures,
    waiters, latest deliveries), and a dataclass's generated `__hash__` builds a tuple in Python each time
    (3 of a frame's 16 µs in a warm loop); a tuple's hash and equality are C's."""

    run_id: str
    path: str  # the Workspace's path in its run (RunStatus's `child`)

    def __str__(self) -> str:
        return f"{self.run_id}/{self.path or '(root)'}"


@dataclass(frozen=True)
class Foreign:
    name: str
    uid: str
    why: str


def label_value(text: str) -> str:
    """A valid label value from any text: disallowed characters become '-', runs collapse, the ends are
    trimmed to alphanumerics, at most 63 characters, and an empty result becomes 'x'."""
    if len(text) <= LABEL_MAX and "--" not in text and _PLAIN.fullmatch(text):
        return text  # already one (`identify` asks on every event; a run id usually is one)
    return _label_value(text)


@functools.lru_cache(maxsize=4096)
def _label_value(text: str) -> str:
    value = _DASH_RUN.sub("-", _DISALLOWED.sub("-", text))
    value = _EDGE.sub("", value)[:LABEL_MAX]
    value = _EDGE.sub("", value)
    return value or "x"


def labels_for(run_id: str, workflow: str) -> dict[str, str]:
    return {RUN_LABEL: label_value(run_id), WORKFLOW_LABEL: label_value(workflow)}


def annotations_for(run_id: str, path: str) -> dict[str, str]:
    return {RUN_ID_ANNOTATION: run_id, WORKSPACE_ANNOTATION: path}


NAME_HASH_HEX = 12  # 48 bits: two live Workspaces' names collide with odds about n²/2⁴⁹ (1e-9 at 1,000 runs)


def sandbox_name(run_id: str, path: str) -> str:
    """`ws-<8 of the run slug>-<path slug>-<hash>`, ≤ 63 characters, DNS-1123 (CONTRACTS.md §1).
    The slugs are for people and are lossy; the hash covers the whole run id and Workspace path (48
    bits), so runs that share a prefix never share a name."""
    run = _slug(run_id)[:8].strip("-") or "x"
    digest = hashlib.sha256(f"{run_id}\x00{path}".encode()).hexdigest()[:NAME_HASH_HEX]
    room = NAME_MAX - len("ws-") - len(run) - 2 - len(digest)
    ws = _slug(path)[:room].strip("-") or "root"
    return f"ws-{run}-{ws}-{digest}"


def identify(obj: Mapping[str, Any]) -> SandboxKey | Foreign:
    # Read on every event, so the routed case reads each field once and builds nothing else.
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    labels = meta.get("labels")
    annotations = meta.get("annotations")
    run_id = path = label = None
    if isinstance(annotations, dict):
        run_id = annotations.get(RUN_ID_ANNOTATION)
        path = annotations.get(WORKSPACE_ANNOTATION)
    if isinstance(labels, dict):
        label = labels.get(RUN_LABEL)
    if isinstance(run_id, str) and run_id and isinstance(path, str) and isinstance(label, str) \
            and label == label_value(run_id):
        return SandboxKey(run_id, path)
    return _foreign(meta, run_id, path, label)


def _foreign(meta: Mapping[str, Any], run_id: object, path: object, label: object) -> Foreign:
    """Why a Sandbox cannot be routed: the first of its identity's faults, in the order they are checked."""
    name, uid = str(text(meta.get("name"))), str(text(meta.get("uid")))
    if not isinstance(run_id, str) or not run_id:
        return Foreign(name, uid, f"no {RUN_ID_ANNOTATION} annotation")
    if not isinstance(path, str):
        return Foreign(name, uid, f"no {WORKSPACE_ANNOTATION} annotation")
    if not isinstance(label, str):
        return Foreign(name, uid, f"no {RUN_LABEL} label")
    return Foreign(name, uid, f"label {RUN_LABEL}={label!r} disagrees with annotation {RUN_ID_ANNOTATION}={run_id!r}")


def _slug(text: str) -> str:
    return _DASH_RUN.sub("-", _SLUG_DISALLOWED.sub("-", text.lower())).strip("-")
