"""What makes two observations of a Sandbox the same transition, read straight from the decoded object.

The watch asks it of every frame, before anything is built: a frame whose signature the key already has
(a repeat across a reconnect or a re-list) is dropped here, and only a frame that is delivered gets its
typed view (`watch/sandbox.py`). It must equal `view(obj).signature` for any object (a test holds the two
together); dagr T107's fix: not the phase alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jr2_actors.values.metadata import text

Signature = tuple[str, str, str, str]  # (resourceVersion, phase, scheduling reason, waiting reason)


def signature(obj: Mapping[str, Any]) -> Signature:
    """`view(obj).signature`, read straight from the decoded object: the few fields it covers, nothing built."""
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    status = obj.get("status")
    if not isinstance(status, dict) or not status:
        return (rv if isinstance(rv, str) else "", "", "", "")
    phase = status.get("phase")
    scheduling = waiting = ""
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        for c in conditions:
            if isinstance(c, dict) and c.get("type") == "Scheduled":
                scheduling = text(c.get("reason"))
                break
    containers = status.get("waiting")
    if isinstance(containers, list):
        waiting = ",".join(r for w in containers if isinstance(w, dict) and (r := w.get("reason"))
                           and isinstance(r, str))
    return (rv if isinstance(rv, str) else "", phase if isinstance(phase, str) else "", scheduling, waiting)
