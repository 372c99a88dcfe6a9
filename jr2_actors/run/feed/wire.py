"""A feed line's wire shape (CONTRACTS.md §4), made here at the edge only: `{id, at, kind, …its fields}`.

Inside, times are seconds (wall clock) and Workspaces are `path`s; on the wire, times are RFC 3339 with
milliseconds and a Workspace's path is its `child`. Next stage: the API's event stream (`api/app.py`).
"""

from __future__ import annotations

from typing import Any

from jr2_actors.run.feed.lines import FeedEvent, line_fields
from jr2_actors.values.timefmt import rfc3339_ms

_TIMES = ("since", "at")


def feed_doc(event: FeedEvent) -> dict[str, Any]:
    """A feed line as the API serves it: `{id, at, kind, …its fields}`; absent values are left out."""
    out: dict[str, Any] = {"id": event.id, "at": rfc3339_ms(event.at), "kind": event.kind}
    for key, value in line_fields(event.line).items():
        if value is None:
            continue
        if key in _TIMES and isinstance(value, (int, float)):
            value = rfc3339_ms(value)
        out["child" if key == "path" else key] = value
    return out
