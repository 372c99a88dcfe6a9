"""A run's blob (ADR-0065: one per run, plain JSON): what `RunCore.snapshot()` saves and what
`RunCore.restore()` continues from. Pure.

The blob holds the §5 document as submitted, the state, each Workspace's `Restored`, the Turn with its
mark and what its admissions carried, the ledger, the feed's last `FEED_KEEP` lines and its id
reservation (issue 16 item 5: ids below it may have reached readers before the next save).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jr2_actors.run.feedlines import FeedEvent, line_fields, line_from
from jr2_actors.run.messages import PlaceWorkspace, ReleaseWhy, ReleaseWorkspace, RunStep, WorkspaceRecord
from jr2_actors.run.notices import Ledger, entry_from, entry_json, mark_from
from jr2_actors.run.turn_record import TurnRecord
from jr2_actors.values.constants import FEED_IDS_RESERVED
from jr2_actors.values.step import Step
from jr2_actors.values.workflow import parse_workflow
from jr2_actors.workspace import messages as ws

if TYPE_CHECKING:
    from jr2_actors.run.core import RunCore

FEED_KEEP = 500  # feed lines kept in the run (and its blob) for a reader to resume from
BLOB_VERSION = 1


def snapshot(core: RunCore) -> dict[str, Any]:
    """The run's whole state as plain JSON (ADR-0065: one blob per run)."""
    turn = core.turn
    return {
        "version": BLOB_VERSION,
        "runId": core.run_id,
        "document": core.document,
        "status": core.status,
        "state": core.state,
        "path": list(core.path),
        "pathDropped": core.path_dropped,
        "fault": core.fault,
        "startedWall": core.started_wall,
        "endedWall": core.ended_wall,
        "durationSeconds": core.duration_seconds,
        "afterWall": core.after_wall,
        "turns": core.turns,
        "conversations": dict(core.conversations),
        "turn": None if turn is None else {"id": turn.id, "agent": turn.agent, "conversation": turn.conversation,
                                           "state": turn.state, "nudges": turn.nudges,
                                           "mark": None if turn.mark is None else turn.mark.json(),
                                           "startedWall": turn.started_wall,
                                           "carried": [entry_json(e) for e in turn.carried],
                                           "took": [entry_json(e) for e in turn.took],
                                           "heard": turn.heard},
        "endedWorkspaces": dict(core.ended_workspaces),
        "workspaces": {path: {"restored": _restored_json(r.restored), "releasing": r.releasing,
                              "heldAgain": r.held_again,
                              "waiting": _wait_json(r.waiting)} for path, r in core.workspaces.items()},
        "ledger": core.ledger.snapshot(),
        "feed": [{"id": e.id, "at": e.at, "kind": e.kind, "fields": line_fields(e.line)} for e in core.feed],
        "feedNext": core.feed_next,
        # Ids below this may have gone to readers by the next save; a restore numbers from it.
        "feedReserved": core.feed_next + FEED_IDS_RESERVED,
        "feedDropped": core.feed_dropped,
    }


def restore(cls: type[RunCore], blob: Mapping[str, Any], now: float, wall: float, *,
            instance_harness: str = "", feed_after: int = 0) -> tuple[RunCore, RunStep]:
    """The run as its blob left it, and the step that re-creates its children (the watch's first list
    reconciles each: lost, still placing, or running again). New feed lines are numbered from what the
    blob reserved (issue 16 item 5: lines of steps that saved nothing reached readers; an older blob, which
    reserved nothing, skips `FEED_IDS_RESERVED`) and after `feed_after`, the newest id readers may
    already hold (a run revived in the same process), never reusing an id."""
    if blob.get("version") != BLOB_VERSION:
        raise ValueError(f"run blob version {blob.get('version')!r} is not {BLOB_VERSION}")
    document = blob["document"]
    core = cls(str(blob["runId"]), parse_workflow(document), document, instance_harness=instance_harness)
    core.status = blob["status"]
    core.state = blob["state"]
    path = blob.get("path")  # an older blob: only the state it is in is known
    core.path = [str(s) for s in path] if isinstance(path, list) and path else [core.state]
    core.path_dropped = int(blob.get("pathDropped") or 0)
    core.fault = blob.get("fault")
    core.turns = int(blob.get("turns", 0))
    core.conversations = {str(k): int(v) for k, v in dict(blob.get("conversations") or {}).items()}
    core.started_wall, core.ended_wall = (float(v) if isinstance(v, int | float) else None  # an older blob: None
                                          for v in (blob.get("startedWall"), blob.get("endedWall")))
    core.duration_seconds = seconds_from(blob.get("durationSeconds"))
    if core.started_wall is not None and core.status == "running":
        # Opened by an earlier process, whose monotonic clock is gone: the time before this restore is the
        # wall clock's difference (clamped at 0), the time after it is this process's monotonic clock.
        core._started_mono = now - max(0.0, wall - core.started_wall)
    core.ledger = Ledger.restore(blob.get("ledger") or {})
    core._abort_before = set(core.workflow.agents)  # what their conversations hold is not known here
    core.ended_workspaces = {str(k): str(v) for k, v in dict(blob.get("endedWorkspaces") or {}).items()}
    feed_next = int(blob.get("feedNext", 1))
    reserved = blob.get("feedReserved")
    core.feed_next = max(int(reserved) if reserved is not None else feed_next + FEED_IDS_RESERVED,
                         feed_next, feed_after + 1)
    core._feed_saved = core.feed_next  # the first new line saves a new reservation before it leaves
    for e in blob.get("feed") or []:
        core.feed.append(FeedEvent(int(e["id"]), float(e["at"]), line_from(str(e["kind"]), e["fields"])))
    dropped = blob.get("feedDropped")  # an older blob: a full window lost what came before its first line
    core.feed_dropped = int(dropped) if dropped is not None else \
        (core.feed[0].id - 1 if len(core.feed) == FEED_KEEP else 0)
    core._now, core._wall = now, wall
    core._out, core._persist = [], False
    after_wall = blob.get("afterWall")
    if after_wall is not None and core.status == "running":
        core.after_wall = float(after_wall)
        core._after_mono = now + max(core.after_wall - wall, 0.0)
    for path, w in dict(blob.get("workspaces") or {}).items():
        restored = _restored_from(w.get("restored") or {})
        record = WorkspaceRecord(path, "reconciling" if restored.placed else "placing", restored=restored,
                                 releasing=bool(w.get("releasing")),
                                 held_again=bool(w.get("heldAgain")), waiting=_wait_from(w.get("waiting")))
        core.workspaces[path] = record
        if record.releasing:  # ADR-0064: a teardown under way writes nothing but its delete
            restored = replace(restored, releasing=True)
        core._out.append(PlaceWorkspace(path, restored))
        if record.releasing:  # its teardown was under way: finish it
            why: ReleaseWhy = "teardown" if core.status in ("running", "done") else "run-faulted"
            core._out.append(ReleaseWorkspace(path, why))
    turn = blob.get("turn")
    if turn is not None and core.status == "running":
        mark = turn.get("mark")
        # ADR-0062: delivered is not yet heard. The newest admission's notices come back with the Turn when
        # the Harness never read its surface (the Submission said nothing before the process ended).
        unread = not turn.get("heard")
        core.turn = TurnRecord(int(turn["id"]), str(turn["agent"]), str(turn["conversation"]),
                               str(turn["state"]), nudges=int(turn.get("nudges", 0)), resumed=True,
                               mark=mark_from(mark) if mark is not None else None,
                               started_wall=float(turn.get("startedWall") or 0.0),
                               carried=[entry_from(e) for e in turn.get("carried") or []] if unread else [],
                               took=[entry_from(e) for e in turn.get("took") or []])
        core._start_waiting_turn()
    core._maybe_finished()
    out, core._out = core._out, []
    return core, Step(tuple(x for x in out if not isinstance(x, FeedEvent)),
                      tuple(x for x in out if isinstance(x, FeedEvent)), core.deadline)


def seconds_from(value: object) -> float | None:
    """A stored duration: a finite number of seconds, not below 0; anything else is not known (None)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _restored_json(r: ws.Restored) -> dict[str, Any]:
    return {"placed": r.placed, "uid": r.uid, "wait": None if r.wait is None else
            {"on": r.wait.on, "message": r.wait.message, "since": r.wait.since_wall}}


def _restored_from(doc: Mapping[str, Any]) -> ws.Restored:
    wait = doc.get("wait")
    return ws.Restored(bool(doc.get("placed")), str(doc.get("uid") or ""),
                       ws.RestoredWait(wait["on"], str(wait["message"]), float(wait["since"])) if wait else None)


def _wait_json(w: ws.WaitEntry | None) -> dict[str, Any] | None:
    return None if w is None else {"on": w.on, "message": w.message, "since": w.since}


def _wait_from(doc: Any) -> ws.WaitEntry | None:
    return None if not doc else ws.WaitEntry(doc["on"], str(doc["message"]), float(doc["since"]))
