"""The timer thread and a deadline on it: every timeout of an owner, on an injected clock.

- `Timers`: one thread holds every timeout of its owner (DESIGN.md: TimerActor). A due timer runs its
  callback on the timer thread; callbacks only `tell`, so they are quick, and one that raises is logged and
  never ends the thread. On a `VirtualClock` it attaches itself to the clock, which pokes it when it moves
  and reads its pending timers (`pending`: when, and who set them) and whether one is due or firing.
- `Deadline`: one timer kept at a core's deadline (`arm(at)` / `cancel()`), which delivers a message.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.shell.recipient import Recipient, tell_quietly

log = logging.getLogger(__name__)

# How long the timer thread waits at most between reads of the clock (a virtual clock moves without notice).
MAX_WAIT = 0.25


class Timers:
    def __init__(self, clock: Clock | None = None, *, name: str = "jr2-timers") -> None:
        self.clock = clock or SystemClock()
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[[], object]] = {}
        self._labels: dict[int, str] = {}
        self._ids = itertools.count(1)
        self._stopped = False
        self._firing = 0  # callbacks taken off the heap and not yet run
        self.name = name
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        attach = getattr(self.clock, "attach", None)
        if callable(attach):
            attach(self)

    def schedule(self, when: float, callback: Callable[[], object], label: str = "") -> int:
        """`label` says what the timer is for (a driven VirtualClock's `upcoming()` shows it); by default,
        the callback's name."""
        with self._cond:
            handle = next(self._ids)
            self._callbacks[handle] = callback
            self._labels[handle] = label or getattr(callback, "__qualname__", "a callback")
            heapq.heappush(self._heap, (when, handle))
            self._cond.notify()
            return handle

    def cancel(self, handle: int | None) -> None:
        if handle is None:
            return
        with self._cond:
            self._callbacks.pop(handle, None)
            self._labels.pop(handle, None)

    def pending(self) -> list[tuple[float, str]]:
        """Every timer not yet fired nor cancelled: when it is due, and what it is for."""
        with self._cond:
            return [(when, f"{self.name}: {self._labels.get(handle, '?')}") for when, handle in self._heap
                    if handle in self._callbacks]

    def under_way(self, now: float) -> list[str]:
        """A timer due and not yet fired, or a callback running: work a driven VirtualClock waits for."""
        with self._cond:
            if self._firing:
                return [f"{self.name}: a timer firing"]
            if any(when <= now and handle in self._callbacks for when, handle in self._heap):
                return [f"{self.name}: a timer due"]
            return []

    def poke(self) -> None:
        with self._cond:
            self._cond.notify()

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stopped = True
            self._callbacks.clear()
            self._labels.clear()
            self._cond.notify()
        detach = getattr(self.clock, "detach", None)
        if callable(detach):
            detach(self)
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
                due: list[Callable[[], object]] = []
                now = self.clock.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    _, handle = heapq.heappop(self._heap)
                    callback = self._callbacks.pop(handle, None)
                    self._labels.pop(handle, None)
                    if callback is not None:
                        due.append(callback)
                self._firing = len(due)
                if not due:
                    wait = MAX_WAIT if not self._heap else min(MAX_WAIT, max(self._heap[0][0] - now, 0.0))
                    self._cond.wait(wait)
                    continue
            for callback in due:
                try:
                    callback()
                except Exception:  # one bad callback must not end every other timeout of the owner
                    log.exception("a timer callback raised")
            with self._cond:
                self._firing = 0


class Deadline:
    """One timer held at a core's deadline; when it fires, `message` is told to `ref`.

    `keep_earlier`: a deadline that only moves later (a stall bound measured from the last progress) keeps
    a timer already armed earlier; when it fires, the core finds the deadline not yet due and the step
    re-arms it. That keeps the timer thread out of a per-frame path.
    """

    def __init__(self, timers: Timers, ref: Recipient, message: object, *, keep_earlier: bool = False) -> None:
        self._timers = timers
        self._ref = ref
        self._message = message
        self._keep_earlier = keep_earlier
        self._handle: int | None = None
        self.armed_for: float | None = None

    def arm(self, at: float | None) -> None:
        if at is None:
            self.cancel()
            return
        if at == self.armed_for or (self._keep_earlier and self.armed_for is not None and self.armed_for <= at):
            return
        self._timers.cancel(self._handle)
        self.armed_for = at
        ref, message = self._ref, self._message
        self._handle = self._timers.schedule(at, lambda: tell_quietly(ref, message), type(message).__name__)

    def fired(self) -> None:
        """The message arrived: whatever the next step answers is armed afresh."""
        self._handle, self.armed_for = None, None

    def cancel(self) -> None:
        self._timers.cancel(self._handle)
        self._handle, self.armed_for = None, None
