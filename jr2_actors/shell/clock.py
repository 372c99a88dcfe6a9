"""The one Clock interface: production reads the real clocks, tests advance a virtual one."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: for durations and deadlines."""

    def wall(self) -> float:
        """Seconds since the epoch: for timestamps written to the cluster or the store."""


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


class VirtualClock:
    """A clock that moves only when told to; safe to read from several threads."""

    def __init__(self, monotonic: float = 0.0, wall: float = 1_790_000_000.0) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self._wall = wall

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def wall(self) -> float:
        with self._lock:
            return self._wall

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a virtual clock does not go back")
        with self._lock:
            self._monotonic += seconds
            self._wall += seconds
