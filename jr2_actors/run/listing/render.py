"""How a run reads to a person: RunStatus as a few lines, durations and times as people say them. Pure.

The demo and `jr2-actors status`/`runs` print with these, from the wire documents (`listing/wire.py`), so
what a person reads is what the API serves. Next stage: the commands that print them.
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


def local_time(wall: float) -> str:
    """A wall time as a person reads it: local, with its zone (never a bare UTC HH:MM:SS)."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(wall))


def cluster_line(problem: Mapping[str, Any], now_wall: float) -> str:
    """The cluster cannot be reached — said where a person looks, not left as `placing`."""
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
