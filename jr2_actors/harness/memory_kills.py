"""The Harness's `/memory-kills` list, read as the untrusted input it is (ADR-0062, CONTRACTS.md §3).

The Agent's own uid can write the file behind this list, so every field is checked against the bounds
both sides hold: at most 256 KiB read, at most 16 kills (the newest), each `told` at most 32 entries;
`id` and `at` at most 64 characters, `agent` and `instanceId` at most 128, `at` a time. A kill outside
them is dropped and a `told` entry outside them is left out; a `peak` or `limit` not in the guard's size
form (`1.9Gi`, `512Mi`; a bare number is not one) is left out and the kill kept, so a real kill is never
lost. An `agent` that is empty or absent is a kill while no Turn ran: it is kept, with `agent` "".
Every drop is named in `problems` for the log. Pure: bytes in, kills and problems out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jr2_actors.values.errors import Jr2Error
from jr2_actors.values.quantity import is_size
from jr2_actors.values.timefmt import parse_rfc3339

MAX_LIST_BYTES = 256 * 1024
MAX_KILLS = 16
MAX_TOLD = 32
MAX_ID = 64
MAX_AT = 64
MAX_NAME = 128  # agent, instanceId, and a told conversation id


class MemoryKillListError(Jr2Error):
    """The Harness's answer is not a kill list at all: the read counts as none."""


@dataclass(frozen=True)
class MemoryKill:
    id: str
    at: str
    agent: str
    instance_id: str
    peak: str | None
    limit: str | None
    told: tuple[str, ...]


@dataclass(frozen=True)
class MemoryKillRead:
    kills: tuple[MemoryKill, ...]
    problems: tuple[str, ...]


def parse_memory_kills(raw: bytes) -> MemoryKillRead:
    if len(raw) > MAX_LIST_BYTES:
        raise MemoryKillListError(f"memory-kill list of {len(raw)} bytes is over the {MAX_LIST_BYTES}-byte bound")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise MemoryKillListError("memory-kill list is not JSON") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("kills"), list):
        raise MemoryKillListError("memory-kill list is not {\"kills\": [...]}")
    entries: list[Any] = doc["kills"]
    problems: list[str] = []
    if len(entries) > MAX_KILLS:
        problems.append(f"{len(entries) - MAX_KILLS} kills over the bound of {MAX_KILLS} dropped (the oldest)")
        entries = entries[-MAX_KILLS:]
    kills: list[MemoryKill] = []
    for i, entry in enumerate(entries):
        kill = _kill(entry, i, problems)
        if kill is not None:
            kills.append(kill)
    return MemoryKillRead(tuple(kills), tuple(problems))


def guard_sizes(peak: object, limit: object) -> tuple[str | None, str | None, list[str]]:
    """A guard kill's sizes as ADR-0062 lets them be said, from the list or a stream alike: a size not in
    the guard's form (or long) is left out and said in the problems, and then the notice says no sizes at
    all — a limit alone would read as the kernel's kill. A peak comes only with a limit (CONTRACTS.md §3)."""
    problems = [f"{name} left out ({str(value)[:40]!r} is not a size like 1.9Gi or 512Mi)"
                for name, value in (("peak", peak), ("limit", limit)) if value is not None and not is_size(value)]
    if problems:
        return None, None, problems
    if peak is not None and limit is None:
        return None, None, ["a peak without a limit left out"]
    return (peak if isinstance(peak, str) else None), (limit if isinstance(limit, str) else None), []


def _kill(entry: object, i: int, problems: list[str]) -> MemoryKill | None:
    if not isinstance(entry, dict):
        problems.append(f"kill {i} dropped: not an object")
        return None
    kill_id, at, instance = (entry.get(k) for k in ("id", "at", "instanceId"))
    agent = entry.get("agent")
    if agent is None:  # ADR-0062: a kill while no Turn ran names no agent; it is kept
        agent = ""
    if instance is None:  # ADR-0062: only a kill with no id or no time (or out of bounds) is dropped
        instance = ""
    for field, value, bound in (("id", kill_id, MAX_ID), ("at", at, MAX_AT)):
        if not isinstance(value, str) or not value or len(value) > bound:
            problems.append(f"kill {i} dropped: {field} missing, not a string, or over {bound} characters")
            return None
    for field, value in (("agent", agent), ("instanceId", instance)):
        if not isinstance(value, str) or len(value) > MAX_NAME:
            problems.append(f"kill {i} dropped: {field} not a string of at most {MAX_NAME} characters")
            return None
    assert isinstance(kill_id, str) and isinstance(at, str) and isinstance(agent, str) and isinstance(instance, str)
    if not _is_time(at):
        problems.append(f"kill {kill_id!r} dropped: at {at!r} is not a time")
        return None
    peak, limit, size_problems = guard_sizes(entry.get("peak"), entry.get("limit"))
    problems.extend(f"kill {kill_id!r}: {p}" for p in size_problems)
    told_raw = entry.get("told", [])
    told: list[str] = []
    if not isinstance(told_raw, list):
        problems.append(f"kill {kill_id!r}: told left out (not a list)")
        told_raw = []
    for conv in told_raw:
        if isinstance(conv, str) and conv and len(conv) <= MAX_NAME:
            told.append(conv)
        else:
            problems.append(f"kill {kill_id!r}: a told entry left out (not a conversation id)")
    if len(told) > MAX_TOLD:
        problems.append(f"kill {kill_id!r}: {len(told) - MAX_TOLD} told entries over {MAX_TOLD} left out")
        told = told[-MAX_TOLD:]
    return MemoryKill(kill_id, at, agent, instance, peak, limit, tuple(told))


def _is_time(text: str) -> bool:
    return parse_rfc3339(text) is not None
