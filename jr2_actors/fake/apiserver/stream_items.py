"""What a fake watch's queue holds besides its frames, and the one timer that wakes its loop on a virtual clock.

The loop (`ApiApp._stream`) takes from one queue (`Frames`): the write's frames, `BookmarkAt` (a bookmark due,
behind the frames it follows), `WAKE` (its timer: look at the time again) and `END`. A driven clock's leap over a
span of keepalives only moves the loop's timer at once and leaves the span for the loop, which adds it to its next
bookmark and its timeout as it reads the time (`Wake.now`), so it never reads the clock past a leap it has not
counted.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Any

from jr2_actors.shell.clock import Clock
from jr2_actors.shell.timers import Timers


@dataclass(frozen=True, slots=True)
class BookmarkAt:
    """A bookmark due, queued behind the frames it follows: its version as the API server last published it."""

    rv: int


class Frames(queue.Queue[object]):
    """A watch's queue. `held()`: an item put that the loop has not finished with (`task_done`), what a driven
    VirtualClock reads of a parked loop: taken is not written (the loop may wait for the GIL in between)."""

    def held(self) -> bool:
        return self.unfinished_tasks > 0


END = object()  # what a watch's queue ends with
WAKE = object()  # put in a watch's queue by its timer on a virtual clock (or a stall): look again


class Wake:
    """A watch's one timer on a virtual clock (none on the real one): at its timeout or next bookmark."""

    def __init__(self, timers: Timers | None, frames: Frames, what: str) -> None:
        self._timers, self._frames, self._what = timers, frames, what
        self._lock = threading.Lock()  # the loop arms it; a leap, on the clock's thread, moves it
        self._handle: int | None = None
        self._at: float | None = None
        self._leapt = 0.0  # seconds leapt that the loop has not counted yet (`now`)
        self.on = timers is not None

    def arm(self, at: float | None, why: str) -> None:
        with self._lock:
            if self._timers is None or at == self._at:
                return
            self._timers.cancel(self._handle)
            self._handle, self._at = None, at
            if at is not None:
                put = self._frames.put
                # A watch's own upkeep (ADR-0063's bookmarks and its timeout): what a test waits on is never this.
                self._handle = self._timers.schedule(at, lambda: put(WAKE), f"{self._what}: its {why}",
                                                     keepalive=True)

    def leap(self, seconds: float) -> None:
        """On the clock's thread (`VirtualClock.on_leap`): move the timer `seconds` on now, and keep them for
        the loop's next `now`."""
        with self._lock:
            if self._timers is not None and self._at is not None and self._timers.move(self._handle,
                                                                                      self._at + seconds):
                self._at += seconds
            self._leapt += seconds

    def now(self, clock: Clock) -> tuple[float, float]:
        """The clock's time and the seconds leapt since the last call, read together: a leap is counted
        before (or after) both, never between (the clock moves on right after a leap)."""
        with self._lock:
            leapt, self._leapt = self._leapt, 0.0
            return clock.monotonic(), leapt

    def fired(self) -> None:
        """As `shell.timers.Deadline.fired`: a wake that was queued before the loop armed a new timer leaves
        that timer held (forgotten, it would fire beside the next one armed)."""
        with self._lock:
            if self._timers is None or not self._timers.is_set(self._handle):
                self._handle, self._at = None, None


def version_of(frame: dict[str, Any]) -> int:
    """A frame's object's resourceVersion (0 when it has none: a 410 ERROR's Status)."""
    obj = frame.get("object")
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return int(rv) if isinstance(rv, str) and rv.isdigit() else 0


def drain(frames: Frames) -> bool:
    """Drop every queued frame; True when the end of the stream was among them."""
    while True:
        try:
            item = frames.get_nowait()
        except queue.Empty:
            return False
        frames.task_done()
        if item is END:
            return True
