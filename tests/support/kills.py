"""Kill-list entries as a Harness lists them (ADR-0062), as `harness/memory_kills.py` reads them, for the
notice tests."""

from __future__ import annotations

from jr2_actors.harness.memory_kills import MemoryKill

WALL0 = 1_790_000_000.0


def kill(kill_id: str, at: str = "2026-11-29T10:00:00.000Z", *, peak: str | None = "1.9Gi",
         limit: str | None = "2Gi", told: tuple[str, ...] = (), agent: str = "coder") -> MemoryKill:
    return MemoryKill(kill_id, at, agent, "", peak, limit, told)


def at(minute: int) -> str:
    return f"2026-11-29T10:{minute:02d}:00.000Z"
