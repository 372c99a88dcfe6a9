"""The timer thread and a deadline on it: every timeout of an owner, on an injected clock.

- `Timers`: one thread holds every timeout of its owner (DESIGN.md: TimerActor). A due timer runs its
  callback on the timer thread; callbacks only `tell`, so they are quick, and one that raises is logged and
  never ends the thread. On a `VirtualClock` it attaches itself to the clock, which pokes it when it moves
  and reads its pending timers (`pending`: when, and who set them) and whether one is due or firing.
- `Deadline`: one timer kept at a core's deadline (`arm(at)` / `cancel()`), which delivers a message; a
  re-arm moves it (`Timers.move`), later without waking the timer thread.
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
        self._heap: list[tuple[float, int]] = []  # (when, handle); a moved or cancelled timer leaves stale entries
        self._callbacks: dict[int, Callable[[], object]] = {}
        self._due: dict[int, float] = {}  # each live timer's own time (a `move` later leaves its heap entry early)
        self._labels: dict[int, str] = {}
        self._keepalive: set[int] = set()  # timers that only keep a stream alive (`schedule(keepalive=True)`)
        self._kept: set[int] = set()  # timers the keepalives push on (`kept=True`: a watch's stall bound)
        self._ids = itertools.count(1)
        self._stopped = False
        self._firing = 0  # callbacks taken off the heap and not yet run
        self._quiet: Callable[[], None] | None = None  # a driven VirtualClock's: told when the firing is over
        self.name = name
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        attach = getattr(self.clock, "attach", None)
        if callable(attach):
            attach(self)
            self._quiet = getattr(self.clock, "went_quiet", None)

    def schedule(self, when: float, callback: Callable[[], object], label: str = "", *,
                 keepalive: bool = False, kept: bool = False) -> int:
        """`label` says what the timer is for (a driven VirtualClock's `upcoming()` shows it); by default,
        the callback's name. `keepalive`: the timer only keeps a stream alive (the fake's bookmarks and watch
        timeouts) and changes nothing a test waits on; a driven VirtualClock's `run_until` fails at once
        when nothing else is left. `kept`: the timer is one the keepalives push on while the stream lives
        (a watch's stall bound), so `run_until` may leap over it with them (testing/clock.py)."""
        with self._cond:
            handle = next(self._ids)
            self._callbacks[handle] = callback
            if keepalive:
                self._keepalive.add(handle)
            if kept:
                self._kept.add(handle)
            self._due[handle] = when
            self._labels[handle] = label or getattr(callback, "__qualname__", "a callback")
            heapq.heappush(self._heap, (when, handle))
            self._cond.notify()
            return handle

    def move(self, handle: int | None, when: float, *, kept: bool | None = None) -> bool:
        """Move a pending timer to `when` (and say again whether it is `kept`, when given). Later costs a dict
        write and no wake of the timer thread: the thread finds the new time when the old one comes and waits
        again (a stall bound pushed on by every frame never fires while frames come, and a driven
        VirtualClock never jumps to it). False when the timer is gone (fired or cancelled)."""
        if handle is None:
            return False
        with self._cond:
            if handle not in self._callbacks:
                return False
            if kept is not None:
                (self._kept.add if kept else self._kept.discard)(handle)
            earlier = when < self._due[handle]
            self._due[handle] = when
            if earlier:
                heapq.heappush(self._heap, (when, handle))
                self._cond.notify()
            return True

    def is_set(self, handle: int | None) -> bool:
        """Whether the timer is still to fire (neither fired nor cancelled)."""
        if handle is None:
            return False
        with self._cond:
            return handle in self._callbacks

    def cancel(self, handle: int | None) -> None:
        if handle is None:
            return
        with self._cond:
            self._callbacks.pop(handle, None)
            self._due.pop(handle, None)
            self._labels.pop(handle, None)
            self._keepalive.discard(handle)
            self._kept.discard(handle)

    def pending(self) -> list[tuple[float, str]]:
        """Every timer not yet fired nor cancelled: when it is due, and what it is for."""
        with self._cond:
            return [(when, f"{self.name}: {self._labels.get(handle, '?')}") for handle, when in self._due.items()]

    def soonest(self) -> tuple[float | None, float | None, float | None]:
        """When the next keepalive is due, the next `kept` timer, and the next of the others (None: none)."""
        with self._cond:
            due = self._due
            if not due:
                return None, None, None
            keepalive, kept = self._keepalive, self._kept
            if not keepalive and not kept:
                return None, None, min(due.values())
            first: list[float | None] = [None, None, None]
            for handle, when in due.items():
                i = 0 if handle in keepalive else 1 if handle in kept else 2
                at = first[i]
                if at is None or when < at:
                    first[i] = when
            return first[0], first[1], first[2]

    def others(self, until: float) -> list[tuple[int, float]]:
        """The timers due by `until` that are not keepalives: (handle, when)."""
        with self._cond:
            keepalive = self._keepalive
            return [(handle, when) for handle, when in self._due.items() if when <= until and handle not in keepalive]

    def under_way(self, now: float) -> list[str]:
        """A timer due and not yet fired, or a callback running: work a driven VirtualClock waits for."""
        with self._cond:
            if self._firing:
                return [f"{self.name}: a timer firing"]
            if any(when <= now for when in self._due.values()):
                return [f"{self.name}: a timer due"]
            return []

    def poke(self, now: float | None = None) -> None:
        """Wake the timer thread to read the clock again (a virtual clock moved); with `now`, only when a
        timer is due by then: a jump wakes only the threads it has work for."""
        with self._cond:
            if now is None or any(when <= now for when in self._due.values()):
                self._cond.notify()

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stopped = True
            self._callbacks.clear()
            self._due.clear()
            self._labels.clear()
            self._keepalive.clear()
            self._kept.clear()
            self._cond.notify()
        detach = getattr(self.clock, "detach", None)
        if callable(detach):
            detach(self)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _take_due(self, now: float) -> list[Callable[[], object]]:
        """Pop what is due by `now` (the caller holds `_cond`); an entry left early by a `move` goes back
        in at the timer's own time."""
        due: list[Callable[[], object]] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, handle = heapq.heappop(heap)
            at = self._due.get(handle)
            if at is None or at < when:  # gone, or an entry left late by a move earlier (that one fired)
                continue
            if at > when:  # moved later: wait for its own time
                heapq.heappush(heap, (at, handle))
                continue
            callback = self._callbacks.pop(handle)
            del self._due[handle]
            self._labels.pop(handle, None)
            self._keepalive.discard(handle)
            self._kept.discard(handle)
            due.append(callback)
        return due

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                now = self.clock.monotonic()
                due = self._take_due(now)
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
            if self._quiet is not None:
                self._quiet()


class Deadline:
    """One timer held at a core's deadline; when it fires, `message` is told to `ref`.

    Re-arming moves the one timer (`Timers.move`): later is a dict write that wakes no thread, so a deadline
    pushed on by every step (a stall bound measured from the last progress) fires only once no progress came
    for the whole bound, and a driven VirtualClock never jumps to it meanwhile. `keep_earlier` is accepted
    for the callers that said a deadline only moves later; every deadline moves this way now.
    """

    def __init__(self, timers: Timers, ref: Recipient, message: object, *, keep_earlier: bool = False) -> None:
        self._timers = timers
        self._ref = ref
        self._message = message
        self._handle: int | None = None
        self.armed_for: float | None = None
        self._kept = False

    def arm(self, at: float | None, *, kept: bool = False) -> None:
        """`kept`: the deadline is one keepalives push on (a watching stream's stall bound, `Timers`)."""
        if at is None:
            self.cancel()
            return
        if at == self.armed_for and kept == self._kept:
            return
        self.armed_for, self._kept = at, kept
        if self._timers.move(self._handle, at, kept=kept):
            return
        ref, message = self._ref, self._message
        self._handle = self._timers.schedule(at, lambda: tell_quietly(ref, message), type(message).__name__,
                                             kept=kept)

    def fired(self) -> None:
        """The message arrived: whatever the next step answers is armed afresh. A message whose timer fired
        before a step armed a new one (the step found the old one gone) leaves that new one held: forgotten,
        it would fire on its own later, and its message would forget the next one in turn."""
        if not self._timers.is_set(self._handle):
            self._handle, self.armed_for = None, None

    def cancel(self) -> None:
        self._timers.cancel(self._handle)
        self._handle, self.armed_for = None, None
