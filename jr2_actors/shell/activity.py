"""What is under way that no actor inbox shows, as each part reports it: the product's side of the report.

A part reports its jobs (a request served by the fake, one sent by a KubeClient, the watch's I/O thread) and
its probes (a pool's queue) to `activity(clock)`: a `Reporter`, which on the real clock is `QUIET` (no-ops)
and on a driven VirtualClock is its `Activity` (jr2_actors/testing/activity.py), from which that clock
judges "nothing under way". `QUIETING` is the one Condition a driven clock waits on while something is
busy, woken by each part that ends some work.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Protocol, runtime_checkable


class _Quieting:
    """One Condition every driven VirtualClock waits on: each part that goes quiet (an actor asks for its
    next message with none waiting, a timer's callbacks are over, a request or a pool job ends, a watch
    parks) bumps `generation` and wakes the waiting clocks, so a clock looks again only when something
    ended, never by spinning."""

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.generation = 0

    def went_quiet(self) -> None:
        with self.cond:
            self.generation += 1
            self.cond.notify_all()

    def wait(self, seen: int, seconds: float) -> bool:
        """Wait until something goes quiet after `seen` was read (at most `seconds`); True if it did."""
        with self.cond:
            if self.generation == seen:
                self.cond.wait(seconds)
            return self.generation != seen


QUIETING = _Quieting()


class Job:
    """One piece of work under way (a request served, a request sent, a pool job). While `waiting(ready)`,
    it counts as work only when `ready()` holds: a parked watch with a frame queued."""

    __slots__ = ("ready", "thread", "what")

    def __init__(self, what: str) -> None:
        self.what = what
        self.ready: Callable[[], bool] | None = None
        self.thread = threading.get_ident()  # the thread doing it: a pool's job on it is this job's to judge

    @contextlib.contextmanager
    def waiting(self, ready: Callable[[], bool]) -> Iterator[None]:
        self.ready = ready
        QUIETING.went_quiet()
        try:
            yield
        finally:
            self.ready = None

    def busy(self) -> bool:
        ready = self.ready
        return ready is None or bool(ready())


SERVED = "fake API "  # how the fake's API server names a request it serves (fake/apiserver/actor.py)
SENT = "KubeClient "  # how a KubeClient names one it sends (kube/client.py)
HARNESS_SERVED = "fake Harness "  # the fake Harness's (fake/harness/actor.py)
HARNESS_SENT = "HarnessClient "  # a HarnessClient's (harness/client.py)


@runtime_checkable
class Reporter(Protocol):
    """Where a part reports its work: a driven VirtualClock's `Activity` (jr2_actors.testing), or `QUIET`."""

    def busy(self, what: str) -> contextlib.AbstractContextManager[Job]:
        """A job under way for the span of the `with`."""

    def went_quiet(self) -> None:
        """A part whose work the probes see (a pool job) ended some."""

    def probe(self, fn: Callable[[], list[str]]) -> None:
        """Add a look at work of another kind (a pool's queue): `fn()` names what is under way, or `[]`."""

    def unprobe(self, fn: Callable[[], list[str]]) -> None:
        """Take a look `probe` added off again."""

    def judged(self, threads: set[int]) -> set[int]:
        """Those of `threads` doing a job of their own here, judged by that job (a pool does not count them)."""


class Quiet:
    """`activity(clock)` of a clock that reports nothing: every call is a no-op."""

    generation = 0

    @contextlib.contextmanager
    def busy(self, what: str) -> Iterator[Job]:
        yield Job(what)

    def went_quiet(self) -> None:
        pass

    def probe(self, fn: Callable[[], list[str]]) -> None:
        pass

    def unprobe(self, fn: Callable[[], list[str]]) -> None:
        pass

    def judged(self, threads: set[int]) -> set[int]:
        return set()


QUIET = Quiet()


def activity(clock: object) -> Reporter:
    """Where a part reports its work: its clock's (a driven VirtualClock's `Activity`), else a no-op."""
    found = getattr(clock, "activity", None)
    if found is None:  # the real clock: a Protocol's isinstance walks its attributes (~40 µs), made ~30 times a run
        return QUIET
    return found if isinstance(found, Reporter) else QUIET
