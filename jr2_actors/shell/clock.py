"""The one Clock interface: production reads the real clocks; a test injects its own.

Every timeout, timestamp and wait of the product reads a `Clock` handed to it. A test's clock may do more
than tell the time (jr2_actors.testing's `VirtualClock` moves only when told to, and judges when nothing is
under way from what the parts report through shell/activity.py): the product asks for those powers only
by name (`getattr`), never by importing a test's clock, so the product runs without the testing package.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from jr2_actors.shell.activity import Job


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


def pause(clock: Clock, seconds: float, *wake: threading.Event, what: str, job: Job | None = None) -> bool:
    """Wait `seconds` on `clock`, or until the first of `wake` is set: True then, False when the time ran
    out (the others are looked at when the wait ends). For a wait of a thread that is no timer's (an
    injected latency, a long poll's window, a revival's backoff). A clock with a `pause` of its own waits
    there instead (a driven VirtualClock's is a timer on it, named `what`, while `job` counts as parked)."""
    own = getattr(clock, "pause", None)
    if callable(own):
        return bool(own(seconds, *wake, what=what, job=job))
    first, others = wake[0], wake[1:]
    return first.wait(seconds) or any(e.is_set() for e in others)
