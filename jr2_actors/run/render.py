"""How a run reads to a person: one line per feed event, RunStatus as a few lines. Pure.

The demo and `jr2-actors events`/`status`/`runs` print with these, from the wire documents
(`run/wire.py`), so what a person reads is what the API serves.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from jr2_actors.values.timefmt import parse_rfc3339


def duration(seconds: float) -> str:
    """`45s`, `3m12s`, `2h05m`: a wait as people say it."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


def feed_line(doc: Mapping[str, Any]) -> str:
    """One readable line for one feed event (CONTRACTS.md §4: `placed F-1 after 192s`)."""
    kind = str(doc.get("kind", ""))
    f = doc
    if kind == "started":
        return f"started {f.get('workflow')} in state {f.get('state')}"
    if kind == "state":
        return f"state {f.get('state')} (from {f.get('previous')})"
    if kind == "placing":
        return f"placing {f.get('child')}: waiting for a {f.get('on')} — {f.get('message')}"
    if kind == "placed":
        return f"placed {f.get('child')} after {duration(float(f.get('after_ms', 0)) / 1000)}"
    if kind == "wait-ended":
        return (f"{f.get('child')} stopped waiting after {duration(float(f.get('after_ms', 0)) / 1000)} "
                f"({f.get('why')})")
    if kind == "running":
        return f"{f.get('child')} is running"
    if kind == "turn":
        return f"turn {f.get('turn')} started: {f.get('agent')} in {f.get('state')}"
    if kind == "admitted":
        notices = f.get("notices") or []
        told = f"; told: {'; '.join(notice_text(n) for n in notices)}" if notices else ""
        return f"{f.get('agent')} admitted{' (kept)' if f.get('kept') else ''}{told}"
    if kind == "said":
        return f"{f.get('agent')}: {f.get('text')}"
    if kind == "pick":
        return f"{f.get('agent')} picked {f.get('pick')} → {f.get('to')}"
    if kind == "memory-kill":
        sizes = f" (peak {f.get('peak')} of {f.get('limit')})" if f.get("peak") and f.get("limit") else ""
        return f"memory kill during {f.get('agent')}'s Turn{sizes}"
    if kind == "turn-fault":
        return f"{f.get('agent')}'s Turn faulted: {f.get('reason')}"
    if kind == "event":
        to = f" → {f.get('to')}" if f.get("to") else " (not handled)"
        return f"{f.get('event')}: {f.get('reason')}{to}"
    if kind == "after":
        return f"after {duration(float(f.get('seconds') or 0))} in {f.get('state')} → {f.get('to')}"
    if kind == "workspace-fault":
        return f"{f.get('child')} faulted: {f.get('reason')}"
    if kind == "unknown":
        return f"{f.get('child')}: the watch cannot tell ({f.get('message')})"
    if kind == "gap":
        return f"the feed's lines after {doc.get('after')} and before {doc.get('first')} are no longer kept"
    if kind == "ended":
        return f"ended {f.get('status')}" + (f": {f.get('fault')}" if f.get("fault") else "")
    rest = " ".join(f"{k}={v}" for k, v in doc.items() if k not in ("id", "at", "kind"))
    return f"{kind} {rest}".strip()


def notice_text(notice: Mapping[str, Any]) -> str:
    kind = notice.get("kind")
    if kind == "memory-limit":
        sizes = f"peak {notice['peak']} of {notice['limit']}" if notice.get("peak") else (
            f"limit {notice['limit']}" if notice.get("limit") else "no sizes")
        who = f" in {notice['agent']}'s Turn" if notice.get("agent") else ""
        return f"memory limit{who} ({sizes})"
    if kind == "conversation-new":
        return f"new conversation ({notice.get('reason')})"
    if kind == "pick-answer":
        return f"answer to {notice.get('pick')}"
    return str(kind)


def local_time(wall: float) -> str:
    """A wall time as a person reads it: local, with its zone (issue 19: never a bare UTC HH:MM:SS)."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(wall))


def cluster_line(problem: Mapping[str, Any], now_wall: float) -> str:
    """Issue 19 item 5: the cluster cannot be reached — said where a person looks, not left as `placing`."""
    since = parse_rfc3339(problem.get("since"))
    when = f" (for {duration(now_wall - since)})" if since is not None else ""
    what = "has not answered a list yet" if not problem.get("listed") else "fails"
    error = f": {problem['error']}" if problem.get("error") else ""
    return f"the cluster cannot be reached: the Sandbox watch {what}{when}, {problem.get('failures')} failure(s)" \
           f"{error}"


def local_clock(at: object) -> str:
    """A feed line's RFC 3339 time as `HH:MM:SS ZONE`, local: a person's clock, never a bare UTC time."""
    wall = parse_rfc3339(at)
    return time.strftime("%H:%M:%S %Z", time.localtime(wall)) if wall is not None else "--:--:--"


def waiting_line(entry: Mapping[str, Any], now_wall: float) -> str:
    """`F-1 waiting for a node: 0/3 nodes are available… (capacity, since 2m)`; a wait no current node can
    end (a taint, a selector) says so."""
    since = parse_rfc3339(entry.get("since"))
    reason = entry.get("reason")
    tags = [str(reason)] if reason else []
    if since is not None:
        tags.append(f"since {duration(now_wall - since)}")
    shown = f" ({', '.join(tags)})" if tags else ""
    none_fits = "; no current node can take it" if reason in ("taint", "selector") else ""
    return f"{entry.get('child')} waiting for a {entry.get('on')}: {entry.get('message')}{shown}{none_fits}"


def ran(doc: Mapping[str, Any], started: float, ended: float | None, now_wall: float) -> float:
    """How long a run ran: the server's `durationSeconds` once it ended (timed on its monotonic clock), else
    this machine's wall clock since its start."""
    took = doc.get("durationSeconds")
    if ended is not None and isinstance(took, int | float) and not isinstance(took, bool):
        return float(took)
    return (ended if ended is not None else now_wall) - started


def status_lines(doc: Mapping[str, Any], now_wall: float) -> list[str]:
    lines = [f"run {doc.get('runId')} ({doc.get('workflow')}): {doc.get('status')}, state {doc.get('state')}"]
    if doc.get("fault"):
        lines.append(f"  fault: {doc['fault']}")
    if isinstance(doc.get("cluster"), Mapping):
        lines.append(f"  {cluster_line(doc['cluster'], now_wall)}")
    started, ended = parse_rfc3339(doc.get("startedAt")), parse_rfc3339(doc.get("endedAt"))
    if started is not None:
        took = duration(ran(doc, started, ended, now_wall))
        lines.append(f"  started {local_time(started)} ({duration(now_wall - started)} ago)"
                     + (f", ended {local_time(ended)}, took {took}" if ended is not None else f", running {took}"))
    for child in doc.get("children") or []:
        lines.append(f"  {child.get('child') or '(root)'}: {child.get('phase')}")
    for entry in doc.get("waiting") or []:
        lines.append(f"  {waiting_line(entry, now_wall)}")
    turn = doc.get("turn")
    if isinstance(turn, Mapping):
        lines.append(f"  turn {turn.get('id')}: {turn.get('agent')} ({turn.get('phase')})")
    return lines
