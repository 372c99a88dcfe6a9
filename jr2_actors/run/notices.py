"""The notice ledger (ADR-0062): what the next admission in a scope must be told, exactly once. Pure.

Theory of operation. The Orchestrator is the only keeper of notices; the ledger is plain data in the
run's blob. A memory kill reaches it on up to three paths, each raising under one *source*:
- a guard kill on a Turn's stream and the same kill in the Harness's `/memory-kills` list share the source
  (Workspace, kill id) — so a kill read on both paths, or on two streams, is one notice;
- a kernel kill, read from the Sandbox's last end (the operator publishes `OOMKilled`), has the source
  (Workspace, "kernel", the time the container ended) — the fault of the Turn it ended and the watch's
  report of it are one notice.
`seen` keeps every source raised, so an Orchestrator restart raises no kill twice; a read removes nothing
from the Harness's list, so a crash between a read and the save that keeps it loses none.

Each read of the list raises one notice at most: the newest kill not raised yet; the older kills of that
read are marked seen (a burst tells the Agent one thing). Kills on a stream are not folded: each raises its
own. A notice is pending in its scope — a Workspace (every Agent in it) or a conversation — until the next
admission in that scope takes it; it counts delivered when that admission is ledgered (the run saves the
blob before it admits). Two pending notices with the same words keep two entries and are said once.
A raise reports whether it changed the ledger: the run saves only then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jr2_actors.quantity import QuantityError, format_size, is_size, memory_bytes
from jr2_actors.timefmt import parse_rfc3339

SEEN_KEEP = 4096  # sources remembered (the list holds 16 kills; a run sees few more)


@dataclass(frozen=True)
class Notice:
    """A typed notice as the admission body carries it (CONTRACTS.md §3); the Harness words it."""

    kind: str  # memory-limit | conversation-new | pick-answer
    fields: Mapping[str, Any] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        return {"kind": self.kind, **{k: v for k, v in self.fields.items() if v is not None}}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Notice) and self.wire() == other.wire()

    def __hash__(self) -> int:
        return hash(repr(sorted(self.wire().items())))


@dataclass
class Entry:
    notice: Notice
    source: str  # "" for a notice with no source
    scope: str  # "workspace:<path>" | "conversation:<id>"


def memory_notice(*, agent: str | None = None, peak: str | None = None, limit: str | None = None) -> Notice:
    """ADR-0062: sizes only in the guard's form, and `peak` only with `limit`."""
    limit = limit if is_size(limit) else None
    peak = peak if is_size(peak) and limit else None
    return Notice("memory-limit", {"scope": "workspace", "agent": agent, "peak": peak, "limit": limit})


class Ledger:
    def __init__(self) -> None:
        self.pending: list[Entry] = []
        self.seen: list[str] = []
        self._seen: set[str] = set()

    # -- raising ---------------------------------------------------------------------------------------

    def stream_kill(self, path: str, kill_id: str, agent: str, peak: str | None, limit: str | None) -> bool:
        """A guard kill on the stream of a Turn in `path` (its agent is named: the Turn it ran in)."""
        return self._raise(f"{path}|{kill_id}", f"workspace:{path}", memory_notice(agent=agent, peak=peak,
                                                                                     limit=limit))

    def list_read(self, path: str, kills: Iterable[Mapping[str, Any]] | None) -> bool:
        """One read of the list before an admission into `path`; None: the read could not tell."""
        if kills is None:
            return False
        listed = [k for k in kills if isinstance(k.get("id"), str)]
        if not listed:
            return False
        listed.sort(key=lambda k: parse_rfc3339(k.get("at")) or 0.0)
        newest, older = listed[-1], listed[:-1]
        changed = False
        for kill in older:  # a burst tells one thing: the older kills of this read give no notice
            changed |= self._see(f"{path}|{kill['id']}")
        notice = memory_notice(peak=_str(newest.get("peak")), limit=_str(newest.get("limit")))
        changed |= self._raise(f"{path}|{newest['id']}", f"workspace:{path}", notice)
        return changed

    def kernel_kill(self, path: str, finished_at: str, reason: str, limit: str, agent: str | None = None) -> bool:
        """A kernel kill read from the Sandbox's last end: the limit, no peak (ADR-0062)."""
        if reason != "OOMKilled":
            return False
        return self._raise(f"{path}|kernel|{finished_at}", f"workspace:{path}",
                           memory_notice(agent=agent, limit=_size(limit)))

    def conversation(self, conversation: str, notice: Notice, source: str = "") -> bool:
        return self._raise(source, f"conversation:{conversation}", notice)

    # -- taking ----------------------------------------------------------------------------------------

    def take(self, path: str | None, conversation: str) -> list[Notice]:
        """The next admission in these scopes takes every pending notice of them."""
        scopes = {f"conversation:{conversation}"} | ({f"workspace:{path}"} if path else set())
        taken = [e for e in self.pending if e.scope in scopes]
        self.pending = [e for e in self.pending if e.scope not in scopes]
        return [e.notice for e in taken]

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
        return {"pending": [{"notice": e.notice.wire(), "source": e.source, "scope": e.scope} for e in self.pending],
                "seen": list(self.seen)}

    @classmethod
    def restore(cls, doc: Mapping[str, Any]) -> Ledger:
        ledger = cls()
        for source in doc.get("seen") or []:
            ledger._see(str(source))
        for e in doc.get("pending") or []:
            wire = dict(e["notice"])
            kind = str(wire.pop("kind"))
            ledger.pending.append(Entry(Notice(kind, wire), str(e.get("source") or ""), str(e["scope"])))
        return ledger


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _size(limit: str) -> str | None:
    """A Workspace's memory as the guard writes sizes (`2Gi`, `1920Mi`), or None when it cannot be one."""
    if is_size(limit):
        return limit
    try:
        return format_size(memory_bytes(limit))
    except QuantityError:
        return None
