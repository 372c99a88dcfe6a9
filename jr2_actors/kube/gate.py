"""The write gate: at most a cap of Kubernetes writes in flight, served in arrival order."""

from __future__ import annotations

import threading
from collections import deque


class FifoGate:
    """A counting gate served strictly in arrival order (a `Semaphore` lets late comers barge in)."""

    def __init__(self, capacity: int) -> None:
        self._lock = threading.Lock()
        self._free = capacity
        self._queue: deque[threading.Event] = deque()
        self.capacity = capacity

    def acquire(self) -> None:
        with self._lock:
            if self._free > 0 and not self._queue:
                self._free -= 1
                return
            turn = threading.Event()
            self._queue.append(turn)
        turn.wait()  # the releaser hands its slot straight to us

    def release(self) -> None:
        with self._lock:
            if self._queue:
                self._queue.popleft().set()
            else:
                self._free += 1

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self.capacity - self._free

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._queue)

    def __enter__(self) -> FifoGate:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
