"""WatchActor: the one Sandbox watch of the process (ADR-0063), a thin shell over `WatchCore`.

Theory of operation: the actor owns the core, one I/O thread and its timers. The I/O thread performs
the calls the core asks for — list, open a watch, read it — and steps the core itself with each result
and each frame the moment it is decoded (an API server cuts a watcher that reads slowly), under the lock
that every step takes: a frame costs one thread wake-up (the read), not two (at steady rates each
thread woken per event costs more CPU than the whole step). The actor's own thread steps the core for
what comes by message — registrations, the timer, the stop. Each step routes its deliveries as
`SandboxSeen` / `SandboxGone` / `WatchFailed` to the recipient registered for that Sandbox (told while the
lock is held, so a key's deliveries keep the core's order whichever thread stepped), logs the reports, and
re-arms one timer at the core's deadline (recomputed at every step from the last progress, so a
registration never postpones it). A step that raises on the I/O thread (our bug) is handed to the actor,
which dies of it as of any other: the I/O thread steps nothing more.

A Workspace's own Lease renewal is recognised without a message: the renewal lane notes each stamp it is
about to write in the `OwnStamps` this actor's core reads (`own_stamps=`), and the change that only carries
that stamp is not delivered back (see `watch/deliveries.py`).

The I/O thread never dies of a surprise: whatever a call raises that it does not expect (our bug or a
library's) is logged with its traceback and reported to the core as a transport failure, and the thread
takes the next command. A key has one recipient at a time: a `Register` for a key another recipient
holds hands the key over (a Workspace's successor, ADR-0064), and an `Unregister` from anyone but the
holder is ignored, so a predecessor's cleanup never silences its successor.

Metrics: every frame, re-list and watch opened is counted in the orchestrator's `Telemetry`,
and the watch's state is published after each step; a delivery of an event the server stamped with its
write time carries that time (`written_at`), so its recipient can measure the delivery latency.

Nothing else in the process lists or polls Sandboxes. Shutdown closes the stream, joins the I/O
thread within a budget, tells every registered recipient `WatchClosed`, and — the actor being dead —
later registrations are refused by pykka with `ActorDeadError`.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.kube.watch_stream import WatchStream
from jr2_actors.shell import Deadline, Recipient, Shell, Timers, jitter_source, tell_quietly
from jr2_actors.shell.activity import QUIET, Job, Reporter, activity
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.values.constants import (
    STALL_BOUND_SECONDS,
    WATCH_CONTROL_BATCH,
    WATCH_SHUTDOWN_SECONDS,
    WATCH_TIMEOUT_SECONDS,
)
from jr2_actors.values.errors import ClusterAccessError, KubeError, KubeProtocolError, KubeTransportError
from jr2_actors.watch import core, messages
from jr2_actors.watch import metrics as watch_metrics
from jr2_actors.watch import stream as watch_stream
from jr2_actors.watch.identity import RUN_LABEL, Foreign, SandboxKey
from jr2_actors.watch.messages import Health, Register, Unregister, WatchClosed, WatchHealth, WatchReport
from jr2_actors.watch.metrics import WatchState, WatchTelemetry, relist_cause
from jr2_actors.watch.stream import Failure, Termination

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _IoFault:
    """A step on the I/O thread raised: the actor dies of it (Shell tells its parent an ActorFault)."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class _Tick:
    pass


# -- the I/O thread ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _ListCmd:
    pass


@dataclass(frozen=True, slots=True)
class _WatchCmd:
    resource_version: str
    stream: int


_STOP = object()


class _WatchIo:
    """Performs list and watch calls one at a time and tells the actor every result and frame."""

    def __init__(self, client: KubeClient, namespace: str, tell: Callable[[core.Input], None],
                 watch_timeout: int, under_way: Reporter = QUIET) -> None:
        self._client = client
        self._under_way = under_way  # a driven VirtualClock's: this thread is at work but while it blocks
        self._counted: contextlib.AbstractContextManager[Job] | None = None
        self._job: Job | None = None  # on a driven VirtualClock: never a jump mid-step
        self._namespace = namespace
        self._tell = tell
        self._watch_timeout = watch_timeout
        self._commands: queue.Queue[object] = queue.Queue()
        self._lock = threading.Lock()
        self._stream: WatchStream | None = None
        self._stream_id = 0
        self._closed_ids: set[int] = set()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jr2-watch-io", daemon=True)

    def start(self) -> None:
        if self._under_way is not QUIET:  # counted from here: the thread's first list is work before it runs
            self._counted = self._under_way.busy("the watch's I/O thread")
            self._job = self._counted.__enter__()
        self._thread.start()

    def list(self) -> None:
        self._commands.put(_ListCmd())

    def watch(self, resource_version: str, stream: int) -> None:
        self._commands.put(_WatchCmd(resource_version, stream))

    def close(self, stream: int) -> None:
        with self._lock:
            self._closed_ids.add(stream)
            current = self._stream if self._stream_id == stream else None
        if current is not None:
            current.close()

    def stop(self, budget: float) -> bool:
        self._stopping.set()
        with self._lock:
            current = self._stream
        if current is not None:
            current.close()
        self._commands.put(_STOP)
        self._thread.join(budget)
        return not self._thread.is_alive()

    def _told(self) -> bool:
        return not self._commands.empty()

    def _commanded(self) -> bool:  # put and not yet carried out: taken is not done (the GIL may come between)
        return self._commands.unfinished_tasks > 0

    def _parked(self, ready: Callable[[], bool]) -> contextlib.AbstractContextManager[None]:
        """While this thread blocks (on its commands, on a stream's next frame): not work under way."""
        return _NOT_COUNTED if self._job is None else self._job.waiting(ready)

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            if self._counted is not None:
                self._counted.__exit__(None, None, None)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            with self._parked(self._commanded):
                cmd = self._commands.get()
            if cmd is _STOP or self._stopping.is_set():
                return
            try:
                if isinstance(cmd, _ListCmd):
                    self._list()
                elif isinstance(cmd, _WatchCmd):
                    self._watch(cmd)
            except Exception:  # our own bookkeeping failed: the core's deadlines recover the loop
                log.exception("the watch I/O thread failed on %s; it goes on", type(cmd).__name__)
            finally:
                self._commands.task_done()

    def _list(self) -> None:
        try:
            result = self._client.list(SANDBOX, self._namespace, label_selector=RUN_LABEL)
        except Exception as e:
            self._tell(watch_stream.ListFailed(failure_of(e)))
            return
        self._tell(watch_stream.Listed(result.items, result.resource_version))

    def _watch(self, cmd: _WatchCmd) -> None:
        with self._lock:
            if cmd.stream in self._closed_ids:  # abandoned before it opened
                self._closed_ids.discard(cmd.stream)
                return
        try:
            stream = self._client.watch(SANDBOX, self._namespace, resource_version=cmd.resource_version,
                                        label_selector=RUN_LABEL, timeout_seconds=self._watch_timeout)
        except Exception as e:
            self._tell(watch_stream.WatchOpenFailed(cmd.stream, failure_of(e)))
            return
        if self._job is not None:
            stream.wait_before_reads()
        with self._lock:
            self._stream, self._stream_id = stream, cmd.stream
            closed = cmd.stream in self._closed_ids or self._stopping.is_set()
        if closed:
            stream.close()
        self._tell(watch_stream.WatchOpened(cmd.stream))
        failure: Failure | None = None
        told, bytes_waiting = self._told, stream.ready

        def ready() -> bool:  # a command waiting (a list after a close) is work, and so are bytes to read
            return told() or bytes_waiting()
        try:
            frames = iter(stream)
            while True:
                with self._parked(ready):
                    frame = next(frames, None)
                if frame is None:
                    break
                self._tell(watch_stream.FrameReceived(cmd.stream, frame))
        except Exception as e:
            failure = failure_of(e)
        finally:
            with self._lock:
                self._stream = None
                self._closed_ids.discard(cmd.stream)
        self._tell(watch_stream.StreamEnded(cmd.stream, failure))


_NOT_COUNTED = contextlib.nullcontext()


def failure_of(e: Exception) -> Failure:
    """What the core needs to know of a failed call, keeping the platform's own words. Anything but the
    client's own errors is a surprise (our bug or a library's): logged with its traceback, and reported
    as a transport failure so the loop goes on."""
    if isinstance(e, KubeError):
        return Failure("api", e.message, e.status, e.reason, e.retry_after)
    if isinstance(e, KubeTransportError):
        return Failure("transport", f"{e.kind}: {e.detail}")
    if isinstance(e, KubeProtocolError | ClusterAccessError):
        return Failure("transport", str(e))
    log.error("unexpected failure in a watch call", exc_info=e)
    return Failure("transport", f"unexpected {type(e).__name__}: {e}")


# -- the actor ---------------------------------------------------------------------------------------

class WatchActor(Shell):
    def __init__(self, client: KubeClient, *, namespace: str | None = None, clock: Clock | None = None,
                 stall_bound: float = STALL_BOUND_SECONDS, watch_timeout: int = WATCH_TIMEOUT_SECONDS,
                 tap: Recipient | None = None, seed: int | None = None,
                 shutdown_budget: float = WATCH_SHUTDOWN_SECONDS, parent: Recipient | None = None,
                 telemetry: WatchTelemetry | None = None, **core_options: Any) -> None:
        super().__init__(telemetry=telemetry)
        self.metrics = watch_metrics.OFF if telemetry is None else telemetry.watch
        self.parent = parent  # told an ActorFault if this actor dies of our bug (the orchestrator)
        self.clock = clock or SystemClock()
        self.core = core.WatchCore(stall_bound=stall_bound, rng=jitter_source(seed), deliver_all=tap is not None,
                                      **core_options)
        self._tap = tap
        self._recipients: dict[SandboxKey, Recipient] = {}
        self._lock = threading.Lock()  # every step: the I/O thread's (frames) and the actor's (messages)
        self._io_broken = False  # a step on the I/O thread raised: it steps nothing more
        self._timers = Timers(self.clock, name="jr2-watch-timers")
        self._deadline: Deadline | None = None
        self._off_leap: Callable[[], None] | None = None
        self._kept: tuple[int, float] | None = None  # (stream, its stall bound as a clock's leaps moved it on)
        self._budget = shutdown_budget
        self._io = _WatchIo(client, namespace or client.namespace, self._from_io, watch_timeout, activity(self.clock))

    def started(self) -> None:
        self._deadline = Deadline(self._timers, self.actor_ref, _Tick(), keep_earlier=True)
        on_leap = getattr(self.clock, "on_leap", None)  # a driven VirtualClock's leaps over keepalives only
        if callable(on_leap) and getattr(self.clock, "settle", False):
            self._off_leap = on_leap(self._leapt)
        self._io.start()
        with self._lock:
            self._step(watch_stream.Started())

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _CONTROL):
            with self._lock:
                self._control(message)
        elif isinstance(message, Health):
            with self._lock:
                c = self.core
                began = c.failing_since
                return WatchHealth(c.phase, c.up, c.resource_version, c.failures, len(c.cache.waiters), c.tracked,
                                   c.listed, c.last_error,
                                   None if began is None else max(0.0, self.clock.monotonic() - began))
        elif isinstance(message, _IoFault):
            raise RuntimeError(f"a step of the watch on its I/O thread failed: {message.error!r}") from message.error
        return None

    def cleanup(self) -> None:
        if self._off_leap is not None:
            self._off_leap()
        with self._lock:
            self._step(watch_stream.Shutdown())
        self._timers.stop(self._budget)
        if not self._io.stop(self._budget):
            log.error("the watch I/O thread did not end within %.1fs", self._budget)
        with self._lock:  # an I/O thread that did not end in time may still step (and read them)
            recipients, self._recipients = self._recipients, {}
        for key, recipient in recipients.items():
            tell_quietly(recipient, WatchClosed(key))

    def _leapt(self, seconds: float) -> None:
        """On the clock's thread, while nothing is under way: a watching stream's stall bound moves on by the
        span leapt over (the keepalives a real clock would have brought), held here, not in the core, whose
        machine knows the API server only: until the stream's progress passes it, or the stream ends."""
        with self._lock:
            c = self.core
            if self._deadline is not None and c.deadline_kept and c.deadline is not None:
                self._kept = (c.keeper.stream, self._bound(c.deadline) + seconds)
                self._deadline.arm(self._kept[1], kept=True)

    def _bound(self, deadline: float) -> float:
        """`deadline`, or the stall bound a leap moved past it while the same stream is watched."""
        kept, c = self._kept, self.core
        if kept is not None and c.deadline_kept and kept[0] == c.keeper.stream and kept[1] > deadline:
            return kept[1]
        self._kept = None
        return deadline

    def _control(self, message: Register | Unregister | messages.RunEnded | _Tick) -> None:
        """A message that steps the core; the caller holds `_lock`."""
        if isinstance(message, messages.RunEnded):
            self._step(core.Ended(message.run_id))
        elif isinstance(message, _Tick):
            if self._deadline is not None:
                self._deadline.fired()
            self._step(watch_stream.StreamTick())
        elif isinstance(message, Register):
            self._recipients[message.key] = message.recipient
            self._step(core.Registered(message.key, message.restored))
        else:
            holder = self._recipients.get(message.key)
            if holder is not None and _same(holder, message.recipient):  # ADR-0064: not a successor's key
                del self._recipients[message.key]
                self._step(core.Unregistered(message.key))

    def _from_io(self, event: core.Input) -> None:
        """On the I/O thread: step the core here, where the frame was read (after the stop, the stopped
        core ignores whatever still comes). What was told to this actor before the write that made the
        frame — a Register before its apply — may still wait in the mailbox
        (the frame overtook it): the messages at its head that step the core are taken and stepped first,
        so the order a sender relies on holds."""
        with self._lock:
            if self._io_broken:
                return
            try:
                # Only while the actor's thread holds no message: one it took is older than these, and stepping
                # these first would reorder them (an Unregister before the Register it follows).
                for envelope in self.mailbox.take_while(_is_control, WATCH_CONTROL_BATCH, idle_only=True):
                    self._control(envelope.message)
                self._step(event)
            except Exception as e:  # our bug: the actor dies of it, as it would have on its own thread
                self._io_broken = True
                log.debug("a watch step failed on the I/O thread", exc_info=e)
                tell_quietly(self.actor_ref, _IoFault(e))

    def _step(self, event: core.Input) -> None:
        """One step of the core and what follows from it; the caller holds `_lock`."""
        step = self.core.step(event, self.clock.monotonic())
        metrics = self.metrics
        if isinstance(event, watch_stream.FrameReceived):
            metrics.frame(event.frame)
        for report in step.reports:
            if isinstance(report, core.DELIVERIES):  # the core's deliveries are the messages themselves
                recipient = self._recipients.get(report.key)
                if recipient is not None:
                    tell_quietly(recipient, report)
                if self._tap is not None:
                    tell_quietly(self._tap, report)
            else:
                _log(report)
                if isinstance(report, watch_stream.Terminated) and report.action != "resume":
                    metrics.relist(relist_cause(event, report, self.core.keeper.degraded))
                tell_quietly(self._tap, WatchReport(report))
        for action in step.actions:
            if isinstance(action, watch_stream.ListNow):
                self._io.list()
            elif isinstance(action, watch_stream.WatchFrom):
                metrics.watch_opened()
                self._io.watch(action.resource_version, action.stream)
            elif isinstance(action, watch_stream.CloseStream):
                self._io.close(action.stream)
        if self._deadline is not None:
            deadline = step.deadline if step.deadline is None else self._bound(step.deadline)
            self._deadline.arm(deadline, kept=self.core.deadline_kept)
        if metrics.on:  # the state built only for a watch that is counted
            c = self.core
            metrics.publish(WatchState(c.phase, c.keeper.degraded, c.failures, len(c.cache.waiters), c.tracked,
                                       c.resource_version, c.listed))


_CONTROL = (Register, Unregister, messages.RunEnded, _Tick)


def _is_control(message: object) -> bool:
    return isinstance(message, _CONTROL)


def _same(a: Recipient, b: Recipient) -> bool:
    """One recipient? Two refs to one actor are equal by its URN (pykka's refs compare by identity)."""
    urn = getattr(a, "actor_urn", None)
    return a is b or (urn is not None and urn == getattr(b, "actor_urn", None))


def _log(report: core.Report) -> None:
    if isinstance(report, watch_stream.Terminated):
        # A failed call (no answer, a refusal, a 5xx) is a warning an operator must see at the default level:
        # a wrong token or an unreachable API server says so at once. An expiry or a silence is routine.
        failed = report.termination in (Termination.TRANSPORT, Termination.TRANSIENT)
        level = logging.ERROR if report.action == "degraded" else logging.WARNING if failed else logging.INFO
        log.log(level, "watch %s → %s from %s: %s", report.termination.value, report.action,
                report.resource_version or "a re-list", report.detail)
    elif isinstance(report, Foreign):
        log.warning("foreign Sandbox %s (uid %s) not routed: %s", report.name, report.uid, report.why)
    else:
        log.warning("unusable watch frame (%s, %d bytes): %s", report.frame.kind, report.frame.size,
                    report.frame.detail)


