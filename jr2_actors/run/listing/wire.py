"""The wire shapes of a run (CONTRACTS.md §4): RunStatus and its listing line, made here at the edge only.

Inside, times are seconds (wall clock) and Workspaces are `path`s; on the wire, times are RFC 3339 with
milliseconds and a Workspace's path is its `child`. Next stage: the run table (`table.py`) and the API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jr2_actors.run.blob import seconds_from
from jr2_actors.run.core import RunCore
from jr2_actors.values.timefmt import rfc3339_ms

WAIT_REASONS = ("capacity", "taint", "selector", "quota", "other")
NO_NODE_FITS = frozenset({"taint", "selector"})  # no current node can take it: capacity freeing will not help


def wait_reason(on: str, message: str) -> str:
    """A token beside the scheduler's words (ADR-0064 keeps those whole) that a machine can
    count. Capacity wins over the rest: a node that only lacks room may free it; a taint or a selector alone
    means no node that exists now can take the Sandbox."""
    text = message.lower()
    if on == "quota" or "exceeded quota" in text:
        return "quota"
    if "insufficient " in text:
        return "capacity"
    if "taint" in text:
        return "taint"
    if "affinity" in text or "selector" in text:
        return "selector"
    return "other"


def _times(started: float | None, ended: float | None, took: float | None) -> dict[str, Any]:
    """`startedAt` and `endedAt` (RFC 3339), and `durationSeconds` once it has ended; absent when
    unknown (a run saved before they were kept). The duration is the run's own (`RunCore.duration_seconds`,
    monotonic where this process timed it); a run saved before it was kept falls back on the two wall
    times, clamped at 0."""
    out: dict[str, Any] = {}
    if started is not None:
        out["startedAt"] = rfc3339_ms(started)
    if ended is not None:
        out["endedAt"] = rfc3339_ms(ended)
        if took is not None:
            out["durationSeconds"] = took
        elif started is not None:
            out["durationSeconds"] = round(max(0.0, ended - started), 3)
    return out


def status_doc(core: RunCore) -> dict[str, Any]:
    """RunStatus: `{runId, workflow, status, state, children, fault?, startedAt?, endedAt?, durationSeconds?,
    path, pathDropped?, waiting}`."""
    doc: dict[str, Any] = {
        "runId": core.run_id,
        "workflow": core.workflow.name,
        "status": core.status,
        "state": core.state,
        "children": [{"child": path, "phase": "releasing" if r.releasing else r.phase}
                     for path, r in sorted(core.workspaces.items())]
        + [{"child": path, "phase": left} for path, left in sorted(core.ended_workspaces.items())
           if path not in core.workspaces],
        "waiting": [{"child": path, "on": w.on, "reason": wait_reason(w.on, w.message), "message": w.message,
                     "since": rfc3339_ms(w.since)} for path, w in core.waiting()],
    }
    if core.fault:
        doc["fault"] = core.fault
    doc.update(_times(core.started_wall, core.ended_wall, core.duration_seconds))
    doc["path"] = list(core.path)  # The states entered, in order (`status -o wide`)
    if core.path_dropped:
        doc["pathDropped"] = core.path_dropped
    if core.turn is not None:
        doc["turn"] = {"agent": core.turn.agent, "id": core.turn.id, "phase": core.turn.phase}
    return doc


def listing_doc(core: RunCore) -> dict[str, Any]:
    """One line of `GET /runs`: a run with a Workspace in `placing` carries `placing` right after runId."""
    doc: dict[str, Any] = {"runId": core.run_id}
    placing = [path for path, r in sorted(core.workspaces.items()) if r.phase == "placing" and not r.releasing]
    if placing:
        doc["placing"] = placing
    doc.update({"workflow": core.workflow.name, "status": core.status, "state": core.state})
    doc.update(_times(core.started_wall, core.ended_wall, core.duration_seconds))
    return doc


def stored_listing_doc(run_id: str, blob: Mapping[str, Any]) -> dict[str, Any]:
    """A line of `GET /runs?all=true` for a finished run, read from its row's blob without restoring it."""
    document = blob.get("document")
    name = document.get("name") if isinstance(document, Mapping) else None
    doc: dict[str, Any] = {"runId": run_id, "workflow": str(name) if name is not None else "",
                           "status": str(blob.get("status", "")), "state": str(blob.get("state", ""))}
    started, ended = (float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
                      for v in (blob.get("startedWall"), blob.get("endedWall")))
    doc.update(_times(started, ended, seconds_from(blob.get("durationSeconds"))))
    return doc
