"""`VirtualClock`: a clock that moves only when a test tells it to (public, for any team's tests).

The product reads its time through the `Clock` protocol (shell/clock.py) and reports its work through
shell/activity.py; this clock is one more implementation of the protocol that listens to those reports.
It moves only when told to. Driven (`settle=True`, what the pytest fixtures' `time="virtual"`
builds) it is the one clock of a fake cluster and an orchestrator together, and it jumps: `advance(s)`
fires each timer due within `s` in order and lets the system settle after each; `run_until(predicate)`
jumps to the next timer whenever nothing is under way, until the predicate holds — or fails at once with
what every actor and every parked request waits for (`Stalled`) when nothing is left that could make it
hold. A span in which only keepalives would fire (the fake's bookmarks and watch timeouts, and the stall
bounds they push on) `run_until` crosses in one leap (`on_leap`: each part moves those timers on at once;
A virtual day was ~1,750 jumps, ~1,440 of them keepalives). "Nothing under way" (`busy()` is
empty) is judged from what each part reports, never from a pause:

- every actor's inbox empty and no message being handled (`shell/mailbox.py` marks a handling thread);
- no timer due and not yet fired, none firing (every `Timers` on this clock attaches itself);
- no pool job queued or running (`shell/pools.py`);
- no HTTP request being served by the fake, nor sent by the KubeClient (`Activity.busy`); a request parked
  on the server (a watch with nothing to send, a Harness long poll, a latency waited out by `pause`)
  counts only once it has something to answer (`Job.waiting(ready)`): a watch frame queued and not yet
  written is work, and each parked request excuses the KubeClient's job for the same request;
- the watch's I/O thread blocked on its next frame or command, none waiting (watch/actor.py).

Each part that ends some work wakes the clock (`QUIETING`, one Condition), so a busy clock waits instead of
polling. What no counter sees is a byte on a loopback socket between the server's write and the client's
read; `busy()` answers empty only when two looks `SETTLE_SECONDS` apart find the same quiet state and no
message was queued between them. `pause` is the wait of a thread that is no timer's, on the clock.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jr2_actors.shell.activity import QUIETING, Job
from jr2_actors.testing.activity import Activity

if TYPE_CHECKING:
    from jr2_actors.shell.timers import Timers

SETTLE_SECONDS = 0.0001  # real seconds between the two looks that judge "nothing under way"
LOOK_AGAIN_SECONDS = 0.002  # real seconds a busy clock waits for something to go quiet before it looks anyway
IDLE_WAIT_SECONDS = 10.0  # real seconds `advance`/`run_until` wait for the system to settle, then fail
KEPT_ALIVE_JUMPS = 4  # keepalive-only jumps in a row, each pushing the next other timer on, that prove a stall
RUN_UNTIL_WITHIN = 24 * 3600.0  # virtual seconds `run_until` looks ahead by default (`within=` for longer)
PAUSE_POLL_SECONDS = 0.01  # real seconds between looks at the other events while a pause waits on several


@dataclass(frozen=True)
class Upcoming:
    at: float  # monotonic seconds on this clock
    what: str  # who set it: the timer thread's name and what it tells


class Stalled(AssertionError):
    """What a test waited for cannot come: nothing is under way and no timer is left (within the horizon)
    but those that only keep streams alive."""


class NeverIdle(AssertionError):
    """The system did not settle within `IDLE_WAIT_SECONDS` of real time (something is busy for good)."""


class VirtualClock:
    """A clock that moves only when told to; safe to read from several threads. See the module's text."""

    def __init__(self, monotonic: float = 0.0, wall: float = 1_790_000_000.0, *, settle: bool = False) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self._wall = wall
        self._timers: dict[int, weakref.ref[Timers]] = {}
        self._snapshot: tuple[Timers, ...] | None = None  # the live timers, kept until one comes or goes
        self.settle = settle
        self.activity = Activity()
        self.jumps = 0  # how many times the clock moved: what a measurement of virtual time counts
        self.leaps = 0  # how many keepalive-only spans `run_until` crossed at once (`on_leap`)
        self._leapers: dict[object, Callable[[float], None]] = {}
        self._own: Timers | None = None  # made by `pause` on this clock
        if settle:
            from jr2_actors.shell import mailbox

            mailbox.went_idle = QUIETING.went_quiet  # an actor that asks for its next message wakes the clock

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def wall(self) -> float:
        with self._lock:
            return self._wall

    # -- the timers on this clock -------------------------------------------------------------------

    def attach(self, timers: Timers) -> None:
        key = id(timers)

        def gone(_: object) -> None:
            with self._lock:
                if self._timers.get(key) is ref:
                    del self._timers[key]
                self._snapshot = None

        ref = weakref.ref(timers, gone)
        with self._lock:
            self._timers[key] = ref
            self._snapshot = None

    def detach(self, timers: Timers) -> None:
        with self._lock:
            found = self._timers.get(id(timers))
            if found is not None and found() is timers:
                del self._timers[id(timers)]
            self._snapshot = None

    def went_quiet(self) -> None:
        """A part of the system ended some work: a driven clock waiting for quiet looks again."""
        QUIETING.went_quiet()

    def _sleeps(self) -> Timers:
        """The clock's own timer thread for `pause` (made at its first use; a racing second one is stopped)."""
        from jr2_actors.shell.timers import Timers

        with self._lock:
            own = self._own
        if own is not None:
            return own
        made = Timers(self, name="jr2-clock-pauses")
        with self._lock:
            if self._own is None:
                self._own = made
            own = self._own
        if own is not made:
            made.stop()
        return own

    def _all_timers(self) -> tuple[Timers, ...]:
        with self._lock:
            if self._snapshot is None:
                self._snapshot = tuple(t for t in (r() for r in self._timers.values()) if t is not None)
            return self._snapshot

    def upcoming(self, limit: int = 20) -> list[Upcoming]:
        """The next timers on this clock, soonest first, each with who set it."""
        found = [Upcoming(at, what) for timers in self._all_timers() for at, what in timers.pending()]
        return sorted(found, key=lambda u: u.at)[:limit]

    def _soonest(self) -> tuple[float | None, float | None]:
        """When the next timer is due, and the next worth a jump (None: none): not a keepalive, nor a `kept`
        timer while a keepalive comes before the first of those (a watch's stall bound that the fake's next
        bookmark will push on; a stalled stream sends none, so its stall bound is worth one)."""
        keepalive: float | None = None
        kept: float | None = None
        other: float | None = None
        for timers in self._all_timers():
            a, k, o = timers.soonest()
            keepalive = a if keepalive is None or (a is not None and a < keepalive) else keepalive
            kept = k if kept is None or (k is not None and k < kept) else kept
            other = o if other is None or (o is not None and o < other) else other
        soonest = min((t for t in (keepalive, kept, other) if t is not None), default=None)
        covered = kept is not None and keepalive is not None and keepalive < kept
        worth = other if covered or kept is None else kept if other is None else min(kept, other)
        return soonest, worth

    # -- leaps over what only keeps streams alive (`run_until`) ----------------------------------------

    def on_leap(self, leapt: Callable[[float], None]) -> Callable[[], None]:
        """`leapt(seconds)` is called, on the driving thread while nothing is under way, when `run_until`
        crosses `seconds` in which only keepalives would have fired: before it returns, the part moves its
        keepalives and what they push on (its `kept` timers) that much later, as if they had fired (what
        else it owes, it may queue for its own thread: the clock waits for that after its jump). Returns
        the call that takes it off again."""
        key = object()
        with self._lock:
            self._leapers[key] = leapt

        def off() -> None:
            with self._lock:
                self._leapers.pop(key, None)
        return off

    def _leap(self, seconds: float) -> bool:
        """Tell every part that the next `seconds` were kept alive; False when no part would hear it."""
        with self._lock:
            leapers = list(self._leapers.values())
            if leapers:
                self.leaps += 1
        for leapt in leapers:
            leapt(seconds)
        return bool(leapers)

    def _others(self, until: float) -> tuple[tuple[int, int], float] | None:
        """The one timer due by `until` that is not a keepalive, as ((timers, handle), when); None when
        there are none or several."""
        found = [((id(t), handle), when) for t in self._all_timers() for handle, when in t.others(until)]
        return found[0] if len(found) == 1 else None

    # -- moving it ----------------------------------------------------------------------------------

    def _set(self, monotonic: float) -> None:
        with self._lock:
            step = max(monotonic - self._monotonic, 0.0)
            self._monotonic += step
            self._wall += step
            now = self._monotonic
            self.jumps += 1
        for timers in self._all_timers():
            timers.poke(now)  # only a timer thread with something due by now is woken

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
            nxt, _ = self._soonest()
            if nxt is None or nxt > target:
                break
            self._set(nxt)
            self.wait_idle()
        self._set(target)
        self.wait_idle()

    def run_until(self, predicate: Callable[[], object], *, within: float = RUN_UNTIL_WITHIN) -> None:
        """Jump from timer to timer, each time nothing is under way, until `predicate()` holds.

        A span in which only keepalives would fire (the fake's bookmarks and watch timeouts, and the stall
        bounds they push on: `Timers.schedule(keepalive=True)`, `kept=True`) is crossed in one leap to the
        next timer worth a jump: each part that keeps a stream alive hears of it (`on_leap`) and moves those
        timers as if they had fired — the streams stay open and none of them goes silent. `advance` fires
        every one of them instead.

        Raises `Stalled` at once, with what every actor and parked request waits for, when nothing is under
        way and what is left cannot make it hold: no timer within `within` virtual seconds of the start but
        keepalives and what they push on, or only keepalives fire and each of `KEPT_ALIVE_JUMPS` of them in a
        row pushes the one other timer within the look ahead on (a stall bound no part marked `kept`).
        The predicate is asked at the start and after each jump that fired a timer other than a keepalive
        (a keepalive changes nothing it could see)."""
        horizon = self.monotonic() + within
        ask = True
        pushed = 0  # keepalive-only jumps in a row that each pushed the one other timer on
        before: tuple[tuple[int, int], float] | None = None
        while True:
            self.wait_idle()
            if ask and predicate():
                return
            nxt, worth = self._soonest()
            if nxt is None:
                raise Stalled("nothing is under way and no timer is set: what was awaited cannot come\n"
                              + self.describe())
            if nxt > horizon:
                raise Stalled(f"nothing is under way and the next timer is past the {within:g} s looked "
                              f"ahead\n" + self.describe())
            if worth is None or worth > horizon:
                raise Stalled("nothing is under way and no timer is left within the "
                              f"{within:g} s looked ahead but those that only keep streams alive: what was "
                              "awaited cannot come\n" + self.describe())
            if nxt < worth and self._leap(worth - self.monotonic()):
                nxt, worth = self._soonest()  # the keepalives and what they push on moved past the one worth it
                assert nxt is not None and worth is not None
            if ask:
                pushed, before = 0, None
            else:  # a keepalive-only jump: did it push on the one other timer within the horizon?
                alone = self._others(horizon)
                pushed = pushed + 1 if alone is not None and before is not None and alone[0] == before[0] \
                    and alone[1] > before[1] else 0
                before = alone
                if pushed >= KEPT_ALIVE_JUMPS:
                    raise Stalled(f"nothing is under way and only keepalives fire: each of the last {pushed} "
                                  "pushed the one other timer within the look ahead on, so it never comes due "
                                  "and what was awaited cannot come\n" + self.describe())
            ask = worth <= nxt
            self._set(nxt)

    # -- a wait of a thread that is no timer's (`shell.clock.pause`) ---------------------------------------

    def pause(self, seconds: float, *wake: threading.Event, what: str, job: Job | None = None) -> bool:
        """`shell.clock.pause` on this clock. Driven, the wait is a timer on it, named `what`, and the waiting
        thread counts as parked (`job`, the request it serves, or one of its own): the clock jumps to the end
        of the pause instead of standing still for its real seconds. Not driven, a wait of real seconds."""
        first, others = wake[0], wake[1:]
        if not self.settle:
            return first.wait(seconds) or any(e.is_set() for e in others)
        if seconds <= 0:
            return any(e.is_set() for e in wake)
        done = threading.Event()
        timers = self._sleeps()
        handle = timers.schedule(self.monotonic() + seconds, done.set, what)

        def over() -> bool:
            return done.is_set() or any(e.is_set() for e in wake)
        try:
            with contextlib.ExitStack() as stack:
                parked = job if job is not None else stack.enter_context(self.activity.busy(what))
                stack.enter_context(parked.waiting(over))
                # One Event can be blocked on: the timer's when `stop` is the only other (it is rare), else the
                # first of `wake` (a long poll's change), looking at the rest every PAUSE_POLL_SECONDS.
                blocking = done if not others else first
                while not over():
                    blocking.wait(PAUSE_POLL_SECONDS)
            return any(e.is_set() for e in wake)
        finally:
            timers.cancel(handle)

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
        """Return once nothing is under way: two looks `SETTLE_SECONDS` apart find the same quiet state.
        While something is, wait on `QUIETING` (woken when any part ends some work) rather than spin."""
        deadline = time.monotonic() + timeout
        while True:
            seen = QUIETING.generation
            state, busy = self._look(first=True)
            if not busy:
                # A byte on a loopback socket has no counter: this moment lets its reader take it.
                QUIETING.wait(seen, SETTLE_SECONDS)
                again, busy = self._look()
                if not busy and again == state:
                    return
                if not busy:
                    continue
            if time.monotonic() >= deadline:
                busy = self._look()[1]
                raise NeverIdle(f"still busy after {timeout:g} s of real time: {'; '.join(busy[:20])}\n"
                                + self.describe())
            QUIETING.wait(seen, LOOK_AGAIN_SECONDS)

    def _look(self, *, first: bool = False) -> tuple[tuple[int, int], list[str]]:
        """What is under way; with `first`, only as far as the first part found at work (the busy clock's
        looks while the system settles: each costs the GIL the parts at work need)."""
        from jr2_actors.shell import mailbox

        received, busy = mailbox.look_at_actors()
        if first and busy:
            return (received, self.activity.generation), busy
        now = self.monotonic()
        for timers in self._all_timers():
            busy += timers.under_way(now)
            if first and busy:
                return (received, self.activity.generation), busy
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
