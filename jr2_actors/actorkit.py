"""What every actor shell shares: quiet tells, the shell base, the timer thread and a deadline on it.

- `tell_quietly`: a tell to an actor that may be gone (a stop races every message) is dropped, never raised.
- `Shell`: the base of every actor here. An actor that dies of an unexpected exception — in a tell, or in
  `on_start` — cleans up exactly as a stop does (`cleanup()`), logs why, and tells its parent an
  `ActorFault`: no actor dies silently, and no thread of its outlives it (DESIGN.md "Messages"). It is
  also where every actor is measured, once: its inbox is a `metrics.Mailbox` (depth, high-water mark,
  the age of the oldest message) and its receive loop times each message, for the `Telemetry` it is
  handed (`metrics.OFF` when none). And its thread's log context is bound as it starts (`logs`): its
  kind, its name under `log_key`, over what the actor that created it had bound.
- `Timers`: one thread holds every timeout of its owner, on an injected clock (DESIGN.md: TimerActor). A
  due timer runs its callback on the timer thread; callbacks only `tell`, so they are quick, and one that
  raises is logged and never ends the thread. With a `VirtualClock`, advance the clock and `poke()`.
- `Deadline`: one timer kept at a core's deadline (`arm(at)` / `cancel()`), which delivers a message.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import sys
import threading
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, cast

import pykka

from jr2_actors import logs
from jr2_actors.clock import Clock, SystemClock
from jr2_actors.metrics import OFF, PROCESSING_BUCKETS, Mailbox, Telemetry

log = logging.getLogger(__name__)
pykka_log = logging.getLogger("pykka")

# How long the timer thread waits at most between reads of the clock (a virtual clock moves without notice).
MAX_WAIT = 0.25


class Recipient(Protocol):
    """Anything that takes a tell: an actor's ref, or a test's inbox."""

    def tell(self, message: Any) -> None: ...


def tell_quietly(recipient: Recipient | None, message: object) -> bool:
    """Tell `recipient`, unless it is gone; True when the message was handed over."""
    if recipient is None:
        return False
    try:
        recipient.tell(message)
    except pykka.ActorDeadError:
        log.debug("recipient gone before %s", type(message).__name__)
        return False
    return True


@dataclass(frozen=True)
class ActorFault:
    """Told to an actor's parent when the actor died of an exception it did not expect (our bug)."""

    kind: str  # the actor's class name
    name: str  # which one (a Workspace path, an agent, …)
    error: str


class Shell(pykka.ThreadingActor):
    """The base of every actor: a failure cleans up as a stop does and is told to the parent.

    Subclasses put what `on_stop` would do in `cleanup()` (it runs once, on a stop or a failure), what
    `on_start` would do in `started()`, and set `parent` and `name` when they have them. `telemetry` is
    the orchestrator's; the actor is counted there from its start to the end of its loop. `log_key` names
    the log field its `name` is logged under (`run`, `workspace`, `agent`), if any.
    """

    parent: Recipient | None = None
    name: str = ""
    log_key: ClassVar[str] = ""

    def __init__(self, *, telemetry: Telemetry | None = None) -> None:
        super().__init__()
        self.telemetry = telemetry or OFF
        self.mailbox = cast(Mailbox, self.actor_inbox)
        self.mailbox.now = self.telemetry.monotonic  # set before anyone holds the ref: nothing is queued yet
        self.log_context = logs.context()  # the creator's (a RunActor's, for its Workspaces); ours at start

    @staticmethod
    def _create_actor_inbox() -> Mailbox:
        return Mailbox()

    def started(self) -> None:
        """What the actor does first, on its own thread."""

    def cleanup(self) -> None:
        """Release what the actor holds (threads, timers, registrations); runs once."""

    def on_start(self) -> None:
        own = {self.log_key: self.name} if self.log_key and self.name else {}
        self.log_context = {**self.log_context, "actor": type(self).__name__, **own}
        logs.bind(self.log_context)  # this thread is the actor's for its whole life
        self.telemetry.actors.register(self)
        try:
            self.started()
        except Exception as e:
            # pykka stops an actor whose on_start raises without calling on_failure: do it here.
            self.mailbox.failures += 1
            self._fail(e)
            raise

    def _actor_loop_running(self) -> None:
        """pykka 4.5's receive loop (`Actor._actor_loop_running`, same order, same outcomes), with each
        message timed on the mailbox's clock: one clock read per message while messages wait (the end of
        one is the start of the next), two after the mailbox ran dry. Inlined, not a wrapper around
        `_handle_receive`: a call more per message is a tenth of pykka's tell throughput."""
        mailbox = self.mailbox
        waiting = mailbox.queue
        buckets = mailbox.buckets
        clock = mailbox.now
        first = PROCESSING_BUCKETS[0]
        stopped = self.actor_stopped
        high = mailbox.high_water
        seconds = mailbox.seconds
        end: float | None = None
        while not stopped.is_set():
            envelope = mailbox.get()
            if len(waiting) >= high:  # the depth just before this take was one more
                high = mailbox.high_water = len(waiting) + 1
            start = clock() if end is None else end
            try:
                response = self._handle_receive(envelope.message)
                if envelope.reply_to is not None:
                    envelope.reply_to.set(response)
            except Exception:
                mailbox.failures += 1
                if envelope.reply_to is not None:
                    pykka_log.info(f"Exception returned from {self} to caller:", exc_info=sys.exc_info())
                    envelope.reply_to.set_exception()
                else:
                    self._handle_failure(*sys.exc_info())
                    try:
                        self.on_failure(*sys.exc_info())
                    except Exception:
                        self._handle_failure(*sys.exc_info())
            except BaseException:
                pykka_log.debug(f"{sys.exc_info()[1]!r} in {self}. Stopping all actors.")
                self._stop()
                pykka.ActorRegistry.stop_all()
            end = clock()
            elapsed = end - start
            seconds += elapsed
            mailbox.seconds = seconds  # only this thread writes it
            if elapsed <= first:
                buckets[0] += 1
            else:
                buckets[bisect_left(PROCESSING_BUCKETS, elapsed)] += 1
            if not waiting:
                end = None  # the next take may wait: its start is read after it

    def _actor_loop_teardown(self) -> None:
        super()._actor_loop_teardown()
        self.telemetry.actors.retire(self)

    def on_stop(self) -> None:
        self._cleanup_once()

    def on_failure(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self._fail(exc_value)

    def _fail(self, error: BaseException | None) -> None:
        kind = type(self).__name__
        log.error("%s %s died: %r", kind, self.name or "", error)
        self._cleanup_once()
        tell_quietly(self.parent, ActorFault(kind, self.name, f"{type(error).__name__}: {error}"))

    def _cleanup_once(self) -> None:
        if getattr(self, "_cleaned_up", False):
            return
        self._cleaned_up = True
        try:
            self.cleanup()
        except Exception:
            log.exception("%s %s: cleanup failed", type(self).__name__, self.name or "")


class Timers:
    def __init__(self, clock: Clock | None = None, *, name: str = "jr2-timers") -> None:
        self.clock = clock or SystemClock()
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[[], object]] = {}
        self._ids = itertools.count(1)
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, when: float, callback: Callable[[], object]) -> int:
        with self._cond:
            handle = next(self._ids)
            self._callbacks[handle] = callback
            heapq.heappush(self._heap, (when, handle))
            self._cond.notify()
            return handle

    def cancel(self, handle: int | None) -> None:
        if handle is None:
            return
        with self._cond:
            self._callbacks.pop(handle, None)

    def poke(self) -> None:
        with self._cond:
            self._cond.notify()

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stopped = True
            self._callbacks.clear()
            self._cond.notify()
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
                    if callback is not None:
                        due.append(callback)
                if not due:
                    wait = MAX_WAIT if not self._heap else min(MAX_WAIT, max(self._heap[0][0] - now, 0.0))
                    self._cond.wait(wait)
                    continue
            for callback in due:
                try:
                    callback()
                except Exception:  # one bad callback must not end every other timeout of the owner
                    log.exception("a timer callback raised")


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
        self._handle = self._timers.schedule(at, lambda: tell_quietly(ref, message))

    def fired(self) -> None:
        """The message arrived: whatever the next step answers is armed afresh."""
        self._handle, self.armed_for = None, None

    def cancel(self) -> None:
        self._timers.cancel(self._handle)
        self._handle, self.armed_for = None, None


def jitter_source(seed: int | None) -> random.Random:
    """The randomness a core is handed for its jitter: seeded in tests, from the OS otherwise."""
    return random.Random(seed)  # noqa: S311 - jitter, not a secret
