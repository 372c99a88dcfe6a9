"""`Activity`: what a driven VirtualClock hears of the work under way that no actor inbox shows.

Each part reports its jobs and probes to `activity(clock)` (shell/activity.py): on a driven VirtualClock,
this. The clock judges "nothing under way" from `under_way()` (testing/clock.py).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator

from jr2_actors.shell.activity import HARNESS_SENT, HARNESS_SERVED, QUIETING, SENT, SERVED, Job

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
