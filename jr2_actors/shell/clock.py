"""The one Clock interface: production reads the real clocks, tests advance a virtual one.

`VirtualClock` moves only when told to. Driven (`settle=True`, what the pytest fixtures' `time="virtual"`
builds) it is the one clock of a fake cluster and an orchestrator together, and it jumps: `advance(s)`
fires each timer due within `s` in order and lets the system settle after each; `run_until(predicate)`
jumps to the next timer whenever nothing is under way, until the predicate holds — or fails at once with
what every actor and every parked request waits for (`Stalled`) when nothing is left that could make it
hold. "Nothing under way" (`busy()` is empty) is judged from what each part reports, never from a pause:

- every actor's inbox empty and no message being handled (`shell/mailbox.py` marks a handling thread);
- no timer due and not yet fired, none firing (every `Timers` on this clock attaches itself);
- no pool job queued or running (`shell/pools.py`);
- no HTTP request being served by the fake, nor sent by the KubeClient (`Activity.busy`); a request parked
  on the server (a watch with nothing to send, a Harness long poll) counts only once it has something to
  answer (`Job.waiting(ready)`): a watch frame queued and not yet written is work.

What no counter sees is a byte on a loopback socket between the server's write and the client's read;
`busy()` answers empty only when two looks `SETTLE_SECONDS` apart find the same quiet state and no
message was queued between them.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jr2_actors.shell.timers import Timers


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


# -- what is under way ------------------------------------------------------------------------------------

class Job:
    """One piece of work under way (a request served, a request sent, a pool job). While `waiting(ready)`,
    it counts as work only when `ready()` holds: a parked watch with a frame queued."""

    __slots__ = ("ready", "what")

    def __init__(self, what: str) -> None:
        self.what = what
        self.ready: Callable[[], bool] | None = None

    @contextlib.contextmanager
    def waiting(self, ready: Callable[[], bool]) -> Iterator[None]:
        self.ready = ready
        try:
            yield
        finally:
            self.ready = None

    def busy(self) -> bool:
        ready = self.ready
        return ready is None or bool(ready())


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

    def probe(self, fn: Callable[[], list[str]]) -> None:
        """Add a look at work of another kind (a pool's queue): `fn()` names what is under way, or `[]`."""
        with self._lock:
            self._probes.append(fn)

    def unprobe(self, fn: Callable[[], list[str]]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._probes.remove(fn)

    def under_way(self) -> list[str]:
        with self._lock:
            jobs = list(self._jobs.values())
            probes = list(self._probes)
        out = [job.what for job in jobs if job.busy()]
        for fn in probes:
            out += fn()
        return out

    def parked(self) -> list[str]:
        with self._lock:
            return [job.what for job in self._jobs.values() if job.ready is not None]


class Quiet:
    """`activity(clock)` of a clock that reports nothing: every call is a no-op."""

    generation = 0

    @contextlib.contextmanager
    def busy(self, what: str) -> Iterator[Job]:
        yield Job(what)

    def probe(self, fn: Callable[[], list[str]]) -> None:
        pass

    def unprobe(self, fn: Callable[[], list[str]]) -> None:
        pass


QUIET = Quiet()


def activity(clock: object) -> Activity | Quiet:
    """Where a part reports its work: the driven virtual clock's `Activity`, else a no-op."""
    found = getattr(clock, "activity", None)
    return found if isinstance(found, Activity) else QUIET


# -- the virtual clock ------------------------------------------------------------------------------------

SETTLE_SECONDS = 0.0001  # real seconds between the two looks that judge "nothing under way"
YIELDS_BEFORE_SLEEP = 50  # looks while busy that only yield the GIL before the clock sleeps between looks
IDLE_WAIT_SECONDS = 10.0  # real seconds `advance`/`run_until` wait for the system to settle, then fail
RUN_UNTIL_WITHIN = 24 * 3600.0  # virtual seconds `run_until` looks ahead by default (`within=` for longer)


@dataclass(frozen=True)
class Upcoming:
    at: float  # monotonic seconds on this clock
    what: str  # who set it: the timer thread's name and what it tells


class Stalled(AssertionError):
    """What a test waited for cannot come: nothing is under way and no timer is left (within the horizon)."""


class NeverIdle(AssertionError):
    """The system did not settle within `IDLE_WAIT_SECONDS` of real time (something is busy for good)."""


class VirtualClock:
    """A clock that moves only when told to; safe to read from several threads. See the module's text."""

    def __init__(self, monotonic: float = 0.0, wall: float = 1_790_000_000.0, *, settle: bool = False) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self._wall = wall
        self._timers: weakref.WeakSet[Timers] = weakref.WeakSet()
        self.settle = settle
        self.activity = Activity()

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def wall(self) -> float:
        with self._lock:
            return self._wall

    # -- the timers on this clock -------------------------------------------------------------------

    def attach(self, timers: Timers) -> None:
        with self._lock:
            self._timers.add(timers)

    def detach(self, timers: Timers) -> None:
        with self._lock:
            self._timers.discard(timers)

    def _all_timers(self) -> list[Timers]:
        with self._lock:
            return list(self._timers)

    def upcoming(self, limit: int = 20) -> list[Upcoming]:
        """The next timers on this clock, soonest first, each with who set it."""
        found = [Upcoming(at, what) for timers in self._all_timers() for at, what in timers.pending()]
        return sorted(found, key=lambda u: u.at)[:limit]

    # -- moving it ----------------------------------------------------------------------------------

    def _set(self, monotonic: float) -> None:
        with self._lock:
            step = max(monotonic - self._monotonic, 0.0)
            self._monotonic += step
            self._wall += step
        for timers in self._all_timers():
            timers.poke()

    def advance(self, seconds: float) -> None:
        """Move on by `seconds`. Driven, each timer due on the way fires at its own time and the system
        settles after it before the clock moves on; otherwise the clock jumps at once."""
        if seconds < 0:
            raise ValueError("a virtual clock does not go back")
        target = self.monotonic() + seconds
        if not self.settle:
            self._set(target)
            return
        self.wait_idle()
        while True:
            nxt = self.upcoming(1)
            if not nxt or nxt[0].at > target:
                break
            self._set(nxt[0].at)
            self.wait_idle()
        self._set(target)
        self.wait_idle()

    def run_until(self, predicate: Callable[[], object], *, within: float = RUN_UNTIL_WITHIN) -> None:
        """Jump from timer to timer, each time nothing is under way, until `predicate()` holds. Raises
        `Stalled` at once (with what every actor and parked request waits for) when nothing is under way
        and no timer is left within `within` virtual seconds of the start."""
        horizon = self.monotonic() + within
        while True:
            self.wait_idle()
            if predicate():
                return
            nxt = self.upcoming(1)
            if not nxt:
                raise Stalled("nothing is under way and no timer is set: what was awaited cannot come\n"
                              + self.describe())
            if nxt[0].at > horizon:
                raise Stalled(f"nothing is under way and the next timer is past the {within:g} s looked "
                              f"ahead\n" + self.describe())
            self._set(nxt[0].at)

    # -- judging "nothing under way" ------------------------------------------------------------------

    def busy(self) -> list[str]:
        """What is under way now (empty: nothing; the clock may jump)."""
        before = self._look()
        if before[1]:
            return before[1]
        time.sleep(SETTLE_SECONDS)
        after = self._look()
        if after[1]:
            return after[1]
        if after[0] != before[0]:
            return ["something moved while the clock looked"]
        return []

    def wait_idle(self, timeout: float = IDLE_WAIT_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        looks = 0
        while True:
            busy = self.busy()
            if not busy:
                return
            if time.monotonic() >= deadline:
                raise NeverIdle(f"still busy after {timeout:g} s of real time: {'; '.join(busy[:20])}\n"
                                + self.describe())
            looks += 1
            # A short piece of work (a tell, a loopback round trip) ends within a few yields of the GIL; a
            # sleep's least is ~0.1-0.5 ms of timer slack, which a jump would pay several times over.
            time.sleep(0 if looks <= YIELDS_BEFORE_SLEEP else SETTLE_SECONDS)

    def _look(self) -> tuple[tuple[int, int], list[str]]:
        from jr2_actors.shell import mailbox

        received, busy = mailbox.look_at_actors()
        now = self.monotonic()
        for timers in self._all_timers():
            busy += timers.under_way(now)
        busy += self.activity.under_way()
        return (received, self.activity.generation), busy

    def describe(self) -> str:
        """What every actor and every parked request waits for, and the next timers: a stalled test's text."""
        from jr2_actors.shell import mailbox

        lines = ["actors (each idle, waiting for a message):"]
        lines += [f"  {name}" for name in mailbox.actor_names()] or ["  (none)"]
        parked = self.activity.parked()
        lines.append("requests parked on the fake (each waiting for a change):")
        lines += [f"  {what}" for what in parked] or ["  (none)"]
        lines.append(f"next timers (now {self.monotonic():.3f}):")
        lines += [f"  at {u.at:.3f} (+{u.at - self.monotonic():.3f} s): {u.what}" for u in self.upcoming(10)] \
            or ["  (none)"]
        return "\n".join(lines)
