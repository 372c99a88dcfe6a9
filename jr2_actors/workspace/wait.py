"""One Workspace's `placing` wait for capacity (ADR-0064): its `waiting` entry, its two feed lines and
its duration. Pure; `WorkspaceCore` holds one and tells what it answers.

A wait that starts gives one `placing` line; its end one `placed` line with the duration, or — when it
ends without a node (release, loss, fault) — one `wait-ended` line; a changed reason only updates
`waiting`. A wait this process opened is timed on the monotonic clock (never negative); one opened
before a restart has only its stored wall-clock start: two wall reads, clamped at 0.
"""

from __future__ import annotations

from typing import Literal

from jr2_actors.workspace.messages import (
    PlacedLine,
    PlacingLine,
    Report,
    RestoredWait,
    WaitEndedLine,
    WaitEntry,
    Waiting,
    WaitOn,
)


class PlacingWait:
    def __init__(self, path: str) -> None:
        self.path = path
        self.entry: WaitEntry | None = None
        self._since_mono: float | None = None

    def restore(self, wait: RestoredWait) -> None:
        self.entry = WaitEntry(wait.on, wait.message, wait.since_wall)

    def saved(self) -> RestoredWait | None:
        """What the run's blob keeps of the wait."""
        entry = self.entry
        return None if entry is None else RestoredWait(entry.on, entry.message, entry.since)

    def waits(self, on: WaitOn, message: str, now: float, wall: float) -> list[Report]:
        """The scheduler or the quota says why the Workspace waits: a new wait, or a changed reason (no feed
        line). Empty: nothing changed."""
        if self.entry is None:
            self.entry = WaitEntry(on, message, wall)
            self._since_mono = now
            return [PlacingLine(self.path, on, message, wall), Waiting(self.path, self.entry)]
        if (on, message) != (self.entry.on, self.entry.message):
            self.entry = WaitEntry(on, message, self.entry.since)
            return [Waiting(self.path, self.entry)]
        return []

    def placed(self, now: float, wall: float) -> list[Report]:
        if self.entry is None:
            return []
        line = PlacedLine(self.path, self.entry.since, self._after(now, wall))
        return [line, self._close()]

    def ended(self, why: Literal["released", "lost", "faulted"], now: float, wall: float) -> list[Report]:
        """A wait that ends without a node still gets its end line (ADR-0064: two lines per wait)."""
        if self.entry is None:
            return []
        line = WaitEndedLine(self.path, self.entry.since, self._after(now, wall), why)
        return [line, self._close()]

    def _after(self, now: float, wall: float) -> int:
        assert self.entry is not None
        after = now - self._since_mono if self._since_mono is not None else max(wall - self.entry.since, 0.0)
        return int(after * 1000)

    def _close(self) -> Waiting:
        self.entry = None
        self._since_mono = None
        return Waiting(self.path, None)
