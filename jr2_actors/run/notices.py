"""The notice ledger (ADR-0062): what the next admission in a scope must be told, exactly once. Pure.

Theory of operation. The Orchestrator is the only keeper of notices; the ledger is plain data in the
run's blob. A memory kill reaches it on up to three paths, each raising under one *source*:
- a guard kill on a Turn's stream and the same kill in the Harness's `/memory-kills` list share the source
  (Workspace, kill id) — so a kill read on both paths, or on two streams, is one notice; a stream kill from
  an older Harness has no id and its place on the stream is its id;
- a kernel kill, read from the Sandbox's last end (the operator publishes `OOMKilled`), has the source
  (Workspace, "kernel", the time the container ended) — the fault of the Turn it ended and the watch's
  report of it are one notice.
`seen` keeps every source raised, so an Orchestrator restart raises no kill twice; a read removes nothing
from the Harness's list, so a crash between a read and the save that keeps it loses none.

Each read of the list raises one notice at most: the newest kill not raised yet; the older kills of that
read are marked seen (a burst tells the Agent one thing). Kills on a stream are not folded: each raises its
own. A notice is pending in its scope — a Workspace (every Agent in it) or a conversation — until the next
admission in that scope takes it; it counts delivered when that admission is ledgered (the run saves the
blob before it admits). Two pending notices with the same words keep two entries; an admission that takes
both says them once. A raise reports whether it changed the ledger: the run saves only then.

Delivered is not yet heard: the run keeps, in memory alone, what each admission of a Turn carried; when
the Turn ends before the Harness read that admission's surface, `raise_again` puts those entries back,
each with its source (a notice with no source merges only into a pending one with no source).

A nudge takes only guard kills: those after the Turn's mark (the newest kill its first read saw, or its
start less a second when that read failed) and after the newest kill whose `told` names its conversation
(that answer told the Agent that all its processes died) — never a kernel kill, and none at all when its
own read could not tell. What it does not take stays pending for the next Turn. The mark keeps its kind
(a kill, none, a time) apart from its value: a kill id is the Agent's text and is only ever an id, and a mark
a blob cannot give back is "could not tell".
Next stage: `turn.py`, whose admissions carry them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jr2_actors.harness.admission import Notice
from jr2_actors.harness.memory_kills import MemoryKill
from jr2_actors.values.quantity import QuantityError, format_size, is_size, memory_bytes
from jr2_actors.values.timefmt import parse_rfc3339

SEEN_KEEP = 4096  # sources remembered (the list holds 16 kills; a run sees few more)
MARK_SLACK_SECONDS = 1.0  # ADR-0062: a pod clock that runs behind, when the Turn's start is its mark
NO_KILL = "none"  # the mark of a Turn whose first read saw an empty list


NoticeKind = Literal["memory-limit", "conversation-new", "pick-answer"]


@dataclass(frozen=True)
class Entry:
    notice: Notice
    source: str  # "" for a notice with no source (a fresh conversation's)
    scope: str  # "workspace:<path>" | "conversation:<id>"

    @property
    def guard_kill(self) -> str | None:
        """The kill id of a guard kill (stream or list), else None (a kernel kill, any other notice)."""
        if self.notice.kind != "memory-limit" or "|kernel|" in self.source:
            return None
        return self.source.split("|", 1)[1] if "|" in self.source else None


def memory_notice(*, agent: str | None = None, peak: str | None = None, limit: str | None = None) -> Notice:
    """ADR-0062: sizes only in the guard's form, and `peak` only with `limit`; one that is not a size leaves
    out both (a limit alone is the kernel kill's form)."""
    if (peak is not None and not is_size(peak)) or not is_size(limit):
        peak = limit = None
    return Notice("memory-limit", {"scope": "workspace", "agent": agent, "peak": peak, "limit": limit})


# Why a conversation is new after the Harness refused one the run took it to keep (404, `kept: false`). Not "no
# longer holds": `kept` is also said after an admission of unknown fate (ADR-0062), maybe never held.
NOT_HELD = "the Harness does not hold the conversation"


def conversation_new(reason: str) -> Notice:
    return Notice("conversation-new", {"reason": reason})


def workspace_scope(path: str) -> str:
    return f"workspace:{path}"


def conversation_scope(conversation: str) -> str:
    return f"conversation:{conversation}"


class Ledger:
    def __init__(self) -> None:
        self.pending: list[Entry] = []
        self.seen: list[str] = []
        self._seen: set[str] = set()

    # -- raising ---------------------------------------------------------------------------------------

    def stream_kill(self, path: str, kill_id: str, agent: str, peak: str | None, limit: str | None) -> bool:
        """A guard kill on the stream of a Turn in `path` (its agent is named: the Turn it ran in)."""
        return self._raise(f"{path}|{kill_id}", workspace_scope(path), memory_notice(agent=agent, peak=peak,
                                                                                      limit=limit))

    def list_read(self, path: str, kills: Iterable[MemoryKill] | None) -> bool:
        """One read of the list before an admission into `path`; None: the read could not tell."""
        listed = _ordered(kills)
        if not listed:
            return False
        newest, older = listed[-1], listed[:-1]
        changed = False
        for kill in older:  # a burst tells one thing: the older kills of this read give no notice
            changed |= self._see(f"{path}|{kill.id}")
        notice = memory_notice(peak=newest.peak, limit=newest.limit)
        changed |= self._raise(f"{path}|{newest.id}", workspace_scope(path), notice)
        return changed

    def kernel_kill(self, path: str, moment: str, reason: str, limit: str, agent: str | None = None) -> bool:
        """A kernel kill read from the Sandbox's last end (`moment`: which end): the limit, no peak
        (ADR-0062)."""
        if reason != "OOMKilled":
            return False
        return self._raise(f"{path}|kernel|{moment}", workspace_scope(path),
                           memory_notice(agent=agent, limit=_size(limit)))

    def name_kernel_kill(self, path: str, moment: str, agent: str) -> bool:
        """ADR-0062: the Turn a kernel kill ended faults on it, and its notice names the Turn's Agent — if the
        notice is still pending (raised naming no one when the watch reported the end)."""
        source = f"{path}|kernel|{moment}"
        for i, e in enumerate(self.pending):
            if e.source == source and e.notice.fields.get("agent") != agent:
                self.pending[i] = Entry(Notice(e.notice.kind, {**e.notice.fields, "agent": agent}), source, e.scope)
                return True
        return False

    def conversation(self, conversation: str, notice: Notice, source: str = "") -> bool:
        return self._raise(source, conversation_scope(conversation), notice)

    def raise_again(self, entries: Sequence[Entry]) -> bool:
        """Entries an admission carried whose surface the Harness never read: pending again, first, with
        their sources; one with no source merges into an equal pending one with no source."""
        back: list[Entry] = []
        for entry in entries:
            if not entry.source and any(not p.source and p.notice == entry.notice and p.scope == entry.scope
                                        for p in [*back, *self.pending]):
                continue
            back.append(entry)
        self.pending[:0] = back
        return bool(back)

    # -- taking ----------------------------------------------------------------------------------------

    def take(self, path: str | None, conversation: str) -> list[Entry]:
        """A Turn's admission takes every pending notice of its scopes."""
        scopes = {conversation_scope(conversation)} | ({workspace_scope(path)} if path else set())
        taken = [e for e in self.pending if e.scope in scopes]
        self.pending = [e for e in self.pending if e.scope not in scopes]
        return taken

    def take_guard_kills(self, path: str | None, eligible: set[str]) -> list[Entry]:
        """A nudge takes only the pending guard kills of its Workspace whose ids are `eligible`."""
        if path is None:
            return []
        scope = workspace_scope(path)
        taken = [e for e in self.pending if e.scope == scope and e.guard_kill in eligible]
        self.pending = [e for e in self.pending if e not in taken]
        return taken

    # -- internals -------------------------------------------------------------------------------------

    def _raise(self, source: str, scope: str, notice: Notice) -> bool:
        if source and source in self._seen:
            return False
        if source:
            self._see(source)
        self.pending.append(Entry(notice, source, scope))
        return True

    def _see(self, source: str) -> bool:
        if source in self._seen:
            return False
        self._seen.add(source)
        self.seen.append(source)
        if len(self.seen) > SEEN_KEEP:
            self._seen.discard(self.seen.pop(0))
        return True

    # -- the blob --------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {"pending": [entry_json(e) for e in self.pending], "seen": list(self.seen)}

    @classmethod
    def restore(cls, doc: Mapping[str, Any]) -> Ledger:
        ledger = cls()
        for source in doc.get("seen") or []:
            ledger._see(str(source))
        ledger.pending = [entry_from(e) for e in doc.get("pending") or []]
        return ledger


def entry_json(e: Entry) -> dict[str, Any]:
    return {"notice": e.notice.wire(), "source": e.source, "scope": e.scope}


def entry_from(doc: Mapping[str, Any]) -> Entry:
    wire = dict(doc["notice"])
    kind = str(wire.pop("kind"))
    return Entry(Notice(kind, wire), str(doc.get("source") or ""), str(doc["scope"]))


# -- a Turn's mark (ADR-0062) ----------------------------------------------------------------------------

MarkKind = Literal["kill", "none", "at", "unreadable"]


@dataclass(frozen=True)
class Mark:
    """A Turn's mark, its kind kept apart from its value: a kill id is text the Agent's uid can write, so
    it is only ever compared as an id, never read as a time or a word."""

    kind: MarkKind
    kill: str = ""  # kind "kill": the newest kill the first read saw
    wall: float = 0.0  # kind "at": the Turn's start less a second (the first read could not tell)

    def json(self) -> dict[str, Any]:
        if self.kind == "kill":
            return {"kind": "kill", "id": self.kill}
        if self.kind == "at":
            return {"kind": "at", "wall": self.wall}
        return {"kind": self.kind}


UNREADABLE = Mark("unreadable")


def mark_from(doc: object) -> Mark:
    """A mark as a blob keeps it. One that cannot be read is `unreadable` ("could not tell"), never an
    exception; an older blob's string (`none`, `at:<seconds>` as it wrote them, else a kill id) still reads."""
    if isinstance(doc, str):
        if doc == NO_KILL:
            return Mark("none")
        if doc.startswith("at:") and (wall := _finite(doc[3:])) is not None:
            return Mark("at", wall=wall)
        return Mark("kill", kill=doc) if doc else UNREADABLE
    if not isinstance(doc, Mapping):
        return UNREADABLE
    kind, kill_id, wall = doc.get("kind"), doc.get("id"), doc.get("wall")
    if kind == "none":
        return Mark("none")
    if kind == "kill" and isinstance(kill_id, str) and kill_id:
        return Mark("kill", kill=kill_id)
    if kind == "at" and isinstance(wall, (int, float)) and not isinstance(wall, bool) \
            and (finite := _finite(wall)) is not None:
        return Mark("at", wall=finite)
    return UNREADABLE


def mark_of(kills: Iterable[MemoryKill] | None, turn_started_wall: float) -> Mark:
    """The Turn's mark from its first read: the newest kill it saw, "none" for an empty list, or — when the
    read could not tell — the Turn's start less a second (a time, for a pod clock that runs behind)."""
    if kills is None:
        return Mark("at", wall=turn_started_wall - MARK_SLACK_SECONDS)
    listed = _ordered(kills)
    return Mark("kill", kill=listed[-1].id) if listed else Mark("none")


def nudge_eligible(kills: Iterable[MemoryKill] | None, mark: Mark, conversation: str) -> set[str]:
    """The kill ids a nudge (or a wake) of the Turn with `mark` may take, from its own read: after the mark,
    and after the newest kill whose `told` names the conversation. A read that could not tell, or a mark
    that cannot be read: none."""
    if kills is None or mark.kind == "unreadable":
        return set()
    listed = _ordered(kills)
    ids = [k.id for k in listed]
    if mark.kind == "at":
        start = next((i for i, k in enumerate(listed) if (parse_rfc3339(k.at) or 0.0) > mark.wall),
                     len(listed))
    elif mark.kind == "kill" and mark.kill in ids:
        start = ids.index(mark.kill) + 1
    else:
        start = 0  # "none", or more than 16 came and the mark left the list: every kill counts as after it
    told = [i for i, k in enumerate(listed) if conversation in k.told]
    if told:
        start = max(start, told[-1] + 1)
    return set(ids[start:])


def _ordered(kills: Iterable[MemoryKill] | None) -> list[MemoryKill]:
    """The list's kills (each has an id and a time: `harness/memory_kills.py` drops the rest), oldest first
    (by `at`; the list's own order breaks ties)."""
    return [] if kills is None else sorted(kills, key=lambda k: parse_rfc3339(k.at) or 0.0)


def _finite(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _size(limit: str) -> str | None:
    """A Workspace's memory as the guard writes sizes (`2Gi`, `1920Mi`), or None when it cannot be one."""
    if is_size(limit):
        return limit
    try:
        return format_size(memory_bytes(limit))
    except QuantityError:
        return None


def said_once(notices: list[Notice]) -> tuple[Notice, ...]:
    """ADR-0062: two notices with the same words are said once."""
    seen: list[Notice] = []
    for n in notices:
        if n not in seen:
            seen.append(n)
    return tuple(seen)
