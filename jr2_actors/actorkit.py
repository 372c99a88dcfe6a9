"""Timers: one thread holds every timeout of its owner, on an injected clock (DESIGN.md: TimerActor).

A due timer runs its callback on the timer thread; callbacks only `tell` an actor, so they are quick.
With a `VirtualClock`, advance the clock and `poke()`: the thread re-reads the time at once.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
from collections.abc import Callable

from jr2_actors.clock import Clock, SystemClock

# How long the thread waits at most between reads of the clock (a virtual clock moves without notice).
MAX_WAIT = 0.25


class Timers:
    def __init__(self, clock: Clock | None = None, *, name: str = "jr2-timers") -> None:
        self.clock = clock or SystemClock()
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count(1)
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, when: float, callback: Callable[[], None]) -> int:
        with self._cond:
            handle = next(self._ids)
            self._callbacks[handle] = callback
            heapq.heappush(self._heap, (when, handle))
            self._cond.notify()
            return handle

    def cancel(self, handle: int | None) -> None:
        if handle is None:
            return
        with self._cond:
            self._callbacks.pop(handle, None)

    def poke(self) -> None:
        with self._cond:
            self._cond.notify()

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stopped = True
            self._callbacks.clear()
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                due: list[Callable[[], None]] = []
                now = self.clock.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    _, handle = heapq.heappop(self._heap)
                    callback = self._callbacks.pop(handle, None)
                    if callback is not None:
                        due.append(callback)
                if not due:
                    wait = MAX_WAIT if not self._heap else min(MAX_WAIT, max(self._heap[0][0] - now, 0.0))
                    self._cond.wait(wait)
                    continue
            for callback in due:
                callback()


def jitter_source(seed: int | None) -> random.Random:
    """The randomness a core is handed for its jitter: seeded in tests, from the OS otherwise."""
    return random.Random(seed)  # noqa: S311 - jitter, not a secret
