"""What is under way that no actor inbox shows, as each part reports it to a driven VirtualClock.

`Activity` holds the jobs (a request served by the fake, one sent by a KubeClient, the watch's I/O thread)
and the probes (a pool's queue); `QUIETING` is the one Condition a driven clock waits on while something is
busy, woken by each part that ends some work. On the real clock `activity(clock)` is `QUIET`: no-ops.
shell/clock.py judges "nothing under way" from these.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator


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
_PAIRS = ((SENT, SERVED), (HARNESS_SENT, HARNESS_SERVED))  # a request sent, excused by the same one parked


class Activity:
    """The work under way that no actor inbox shows: what each part reports as it starts and ends it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self.generation = 0  # bumped on every start and end: a settle sees that something moved
        self._probes: list[Callable[[], list[str]]] = []

    @contextlib.contextmanager
    def busy(self, what: str) -> Iterator[Job]:
        job = Job(what)
        with self._lock:
            key = next(self._ids)
            self._jobs[key] = job
            self.generation += 1
        try:
            yield job
        finally:
            with self._lock:
                self._jobs.pop(key, None)
                self.generation += 1
            QUIETING.went_quiet()

    def went_quiet(self) -> None:
        """A part whose work the probes see (a pool job) ended some: the clock looks again."""
        with self._lock:
            self.generation += 1
        QUIETING.went_quiet()

    def probe(self, fn: Callable[[], list[str]]) -> None:
        """Add a look at work of another kind (a pool's queue): `fn()` names what is under way, or `[]`."""
        with self._lock:
            self._probes.append(fn)

    def unprobe(self, fn: Callable[[], list[str]]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._probes.remove(fn)

    def under_way(self) -> list[str]:
        """What is at work. A KubeClient's request that the fake has parked (a latency it waits out on the
        clock, a long poll) is parked too: each parked "fake API GET /p" excuses one "KubeClient GET /p"."""
        with self._lock:
            if not self._jobs and not self._probes:
                return []
            jobs = list(self._jobs.values())
            probes = list(self._probes)
        busy: list[str] = []
        excused: dict[str, int] = {}  # "KubeClient GET /p" for each parked "fake API GET /p"
        for job in jobs:
            if job.busy():
                busy.append(job.what)
                continue
            for sent, served in _PAIRS:
                if job.what.startswith(served):
                    request = sent + job.what[len(served):]
                    excused[request] = excused.get(request, 0) + 1
        out: list[str] = []
        for what in busy:
            if excused.get(what, 0) > 0:
                excused[what] -= 1
                continue
            out.append(what)
        for fn in probes:
            out += fn()
        return out

    def judged(self, threads: set[int]) -> set[int]:
        """Those of `threads` doing a job of their own here (a KubeClient request, a pause): a pool counts a
        running job on one of them as that job judges it — a request the fake parks on the clock is parked,
        so a pool's job waiting on it does not hold the clock still."""
        with self._lock:
            return {job.thread for job in self._jobs.values()} & threads

    def parked(self) -> list[str]:
        with self._lock:
            return [job.what for job in self._jobs.values() if job.ready is not None]


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


QUIET = Quiet()


def activity(clock: object) -> Activity | Quiet:
    """Where a part reports its work: the driven virtual clock's `Activity`, else a no-op."""
    found = getattr(clock, "activity", None)
    return found if isinstance(found, Activity) else QUIET
