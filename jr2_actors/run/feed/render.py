"""How a run's feed reads to a person: one line per feed event, from its wire document (`feed/wire.py`),
so what a person reads is what the API serves. Pure. Next stage: the commands that print it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from jr2_actors.run.listing.render import duration


class LineText:
    """One kind of feed line as a person reads it, from its wire document `f`: each kind is its own class."""

    kind: ClassVar[str] = ""

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        raise NotImplementedError


class StartedText(LineText):
    kind = "started"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"started {f.get('workflow')} in state {f.get('state')}"


class StateText(LineText):
    kind = "state"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"state {f.get('state')} (from {f.get('previous')})"


class PlacingText(LineText):
    kind = "placing"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"placing {f.get('child')}: waiting for a {f.get('on')} — {f.get('message')}"


class PlacedText(LineText):
    kind = "placed"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"placed {f.get('child')} after {duration(float(f.get('after_ms', 0)) / 1000)}"


class WaitEndedText(LineText):
    kind = "wait-ended"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return (f"{f.get('child')} stopped waiting after {duration(float(f.get('after_ms', 0)) / 1000)} "
                f"({f.get('why')})")


class RunningText(LineText):
    kind = "running"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"{f.get('child')} is running"


class TurnText(LineText):
    kind = "turn"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"turn {f.get('turn')} started: {f.get('agent')} in {f.get('state')}"


class AdmittedText(LineText):
    kind = "admitted"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        notices = f.get("notices") or []
        told = f"; told: {'; '.join(notice_text(n) for n in notices)}" if notices else ""
        return f"{f.get('agent')} admitted{' (kept)' if f.get('kept') else ''}{told}"


class SaidText(LineText):
    kind = "said"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"{f.get('agent')}: {f.get('text')}"


class PickText(LineText):
    kind = "pick"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"{f.get('agent')} picked {f.get('pick')} → {f.get('to')}"


class MemoryKillText(LineText):
    kind = "memory-kill"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        sizes = f" (peak {f.get('peak')} of {f.get('limit')})" if f.get("peak") and f.get("limit") else ""
        return f"memory kill during {f.get('agent')}'s Turn{sizes}"


class TurnFaultText(LineText):
    kind = "turn-fault"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"{f.get('agent')}'s Turn faulted: {f.get('reason')}"


class EventText(LineText):
    kind = "event"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        to = f" → {f.get('to')}" if f.get("to") else " (not handled)"
        return f"{f.get('event')}: {f.get('reason')}{to}"


class AfterText(LineText):
    kind = "after"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"after {duration(float(f.get('seconds') or 0))} in {f.get('state')} → {f.get('to')}"


class WorkspaceFaultText(LineText):
    kind = "workspace-fault"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"{f.get('child')} faulted: {f.get('reason')}"


class UnknownText(LineText):
    kind = "unknown"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"{f.get('child')}: the watch cannot tell ({f.get('message')})"


class GapText(LineText):
    kind = "gap"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"the feed's lines after {f.get('after')} and before {f.get('first')} are no longer kept"


class EndedText(LineText):
    kind = "ended"

    @staticmethod
    def text(f: Mapping[str, Any]) -> str:
        return f"ended {f.get('status')}" + (f": {f.get('fault')}" if f.get("fault") else "")


TEXTS: dict[str, type[LineText]] = {c.kind: c for c in LineText.__subclasses__()}


def feed_line(doc: Mapping[str, Any]) -> str:
    """One readable line for one feed event (CONTRACTS.md §4: `placed F-1 after 192s`); a kind this client
    does not know is shown with its fields."""
    kind = str(doc.get("kind", ""))
    known = TEXTS.get(kind)
    if known is not None:
        return known.text(doc)
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
