"""A run's blob (ADR-0065: one per run, plain JSON): what `RunCore.snapshot()` saves, and the values (`KeptRun`)
`RunCore.restore()` adopts to continue from it. Pure. Next stage: the store (`store/`) writes it.

The blob holds the §5 document as submitted, the state, each Workspace's `Restored`, the Turn with its
mark and what its admissions carried, the ledger, the feed's last `FEED_KEEP` lines and its id
reservation (ids below it may have reached readers before the next save).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jr2_actors.run.feed.lines import FeedEvent, line_fields, line_from
from jr2_actors.run.messages import RunStatusName, WorkspaceRecord
from jr2_actors.run.notices import Ledger, entry_from, entry_json, mark_from
from jr2_actors.run.turn_record import TurnRecord
from jr2_actors.values.constants import FEED_IDS_RESERVED
from jr2_actors.values.workflow import Parse, Workflow, parse_workflow
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
        "turns": core.turns.count,
        "conversations": dict(core.turns.conversations),
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


@dataclass
class KeptRun:
    """What a blob keeps, read back: the values `RunCore.restore` adopts."""

    run_id: str
    document: dict[str, Any]
    workflow: Workflow
    status: RunStatusName
    state: str
    path: list[str]
    path_dropped: int
    fault: str | None
    started_wall: float | None
    ended_wall: float | None
    duration_seconds: float | None  # once ended: as timed by the process that ended it
    after_wall: float | None  # a running run's `after`, as a wall time
    turns: int
    conversations: dict[str, int]
    ledger: Ledger
    ended_workspaces: dict[str, str]
    feed: list[FeedEvent]
    feed_next: int  # the id its next line takes
    feed_dropped: int
    workspaces: dict[str, WorkspaceRecord]
    turn: TurnRecord | None  # a running run's Turn, restored (`resumed`)


def restore(blob: Mapping[str, Any], *, feed_after: int = 0, parse: Parse = parse_workflow) -> KeptRun:
    """The run as its blob left it. New feed lines are numbered from what the blob reserved
    (lines of steps that saved nothing reached readers; an older blob, which reserved nothing, skips
    `FEED_IDS_RESERVED`) and after `feed_after`, the newest id readers may already hold (a run revived in the
    same process), never reusing an id."""
    if blob.get("version") != BLOB_VERSION:
        raise ValueError(f"run blob version {blob.get('version')!r} is not {BLOB_VERSION}")
    document = blob["document"]
    status = blob["status"]
    state = blob["state"]
    path = blob.get("path")  # an older blob: only the state it is in is known
    feed_next = int(blob.get("feedNext", 1))
    reserved = blob.get("feedReserved")
    feed = [FeedEvent(int(e["id"]), float(e["at"]), line_from(str(e["kind"]), e["fields"]))
            for e in blob.get("feed") or []]
    dropped = blob.get("feedDropped")  # an older blob: a full window lost what came before its first line
    after_wall = blob.get("afterWall")
    workspaces: dict[str, WorkspaceRecord] = {}
    for name, w in dict(blob.get("workspaces") or {}).items():
        restored = _restored_from(w.get("restored") or {})
        workspaces[name] = WorkspaceRecord(name, "reconciling" if restored.placed else "placing",
                                           restored=restored, releasing=bool(w.get("releasing")),
                                           held_again=bool(w.get("heldAgain")), waiting=_wait_from(w.get("waiting")))
    turn = blob.get("turn")
    record = None
    if turn is not None and status == "running":
        mark = turn.get("mark")
        # ADR-0062: delivered is not yet heard. The newest admission's notices come back with the Turn when
        # the Harness never read its surface (the Submission said nothing before the process ended).
        unread = not turn.get("heard")
        record = TurnRecord(int(turn["id"]), str(turn["agent"]), str(turn["conversation"]),
                            str(turn["state"]), nudges=int(turn.get("nudges", 0)), resumed=True,
                            mark=mark_from(mark) if mark is not None else None,
                            started_wall=float(turn.get("startedWall") or 0.0),
                            carried=[entry_from(e) for e in turn.get("carried") or []] if unread else [],
                            took=[entry_from(e) for e in turn.get("took") or []])
    started_wall, ended_wall = (float(v) if isinstance(v, int | float) else None  # an older blob: None
                                for v in (blob.get("startedWall"), blob.get("endedWall")))
    return KeptRun(
        run_id=str(blob["runId"]), document=document, workflow=parse(document), status=status,
        state=state, path=[str(s) for s in path] if isinstance(path, list) and path else [state],
        path_dropped=int(blob.get("pathDropped") or 0), fault=blob.get("fault"),
        started_wall=started_wall, ended_wall=ended_wall,
        duration_seconds=seconds_from(blob.get("durationSeconds")),
        after_wall=float(after_wall) if after_wall is not None and status == "running" else None,
        turns=int(blob.get("turns", 0)),
        conversations={str(k): int(v) for k, v in dict(blob.get("conversations") or {}).items()},
        ledger=Ledger.restore(blob.get("ledger") or {}),
        ended_workspaces={str(k): str(v) for k, v in dict(blob.get("endedWorkspaces") or {}).items()},
        feed=feed,
        feed_next=max(int(reserved) if reserved is not None else feed_next + FEED_IDS_RESERVED, feed_next,
                      feed_after + 1),
        feed_dropped=int(dropped) if dropped is not None else (feed[0].id - 1 if len(feed) == FEED_KEEP else 0),
        workspaces=workspaces, turn=record)


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
