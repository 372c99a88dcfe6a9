"""How a run's feed reads to a person: one line per feed event, from its wire document (`feed/wire.py`),
so what a person reads is what the API serves. Pure. Next stage: the commands that print it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jr2_actors.run.listing.render import duration


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
