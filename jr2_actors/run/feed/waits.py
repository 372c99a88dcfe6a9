"""The feed's readers, each waiting on its own run: a line of one run wakes that run's readers, not every follower
of every run (each would look again and sleep: a wake costs ~40 µs of CPU, twice that among 10,000 threads).
One lock for every run, the hub's; a condition only for a run someone waits on now."""

from __future__ import annotations

import threading
from collections.abc import Callable


class RunWaits:
    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._waits: dict[str, tuple[threading.Condition, int]] = {}  # a run waited on: its condition, its readers

    def wait(self, run_id: str, ready: Callable[[], bool], timeout: float) -> None:
        """Until `ready()` or `timeout` (the caller holds the lock)."""
        cond, readers = self._waits.get(run_id) or (threading.Condition(self._lock), 0)
        self._waits[run_id] = (cond, readers + 1)
        try:
            cond.wait_for(ready, timeout=timeout)
        finally:
            cond, readers = self._waits[run_id]
            if readers == 1:
                del self._waits[run_id]  # no condition kept for a run nobody reads
            else:
                self._waits[run_id] = (cond, readers - 1)

    def wake(self, run_id: str) -> None:
        """The run's readers look again (the caller holds the lock)."""
        waiting = self._waits.get(run_id)
        if waiting is not None:
            waiting[0].notify_all()

    def wake_all(self) -> None:
        """Every reader looks again (the caller holds the lock): a stop."""
        for cond, _ in self._waits.values():
            cond.notify_all()
