"""The shell base of every actor, and what it tells its parent when it dies.

`Shell`: an actor that dies of an unexpected exception — in a tell, or in `on_start` — cleans up exactly
as a stop does (`cleanup()`), logs why, and tells its parent an `ActorFault`: no actor dies silently, and
no thread of its outlives it (DESIGN.md "Messages"). It is also where every actor is measured, once: its
inbox is a `Mailbox` (depth, high-water mark, the age of the oldest message) and its receive loop times
each message, for the `ActorMetrics` it is handed (`shell.metrics.OFF` when none). And its thread's log
context is bound as it starts (`logs`): its kind, its name under `log_key`, over what the actor that
created it had bound.

pykka is pinned to one minor version (setup.cfg) because two of its hooks used here are private: pykka 4
chooses an actor's inbox only in `_create_actor_inbox`, and its public hooks (`on_start`, `on_receive`,
`on_stop`, `on_failure`) see neither a proxy call nor an ask whose handling raised, so the time and the
outcome of each message can only be read in the receive loop, `_actor_loop_running`, copied here.
`tests/test_shell_pykka.py` fails when pykka's copy of either changes.
"""

from __future__ import annotations

import logging
import random
import sys
import weakref
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, cast

import pykka

from jr2_actors.shell import logs, stopping
from jr2_actors.shell.kind_totals import BUCKET_UNITS
from jr2_actors.shell.mailbox import PROCESSING_BUCKETS, Mailbox
from jr2_actors.shell.metrics import OFF, ActorMetrics
from jr2_actors.shell.recipient import Recipient, tell_quietly

log = logging.getLogger(__name__)
pykka_log = logging.getLogger("pykka")


class Metered(Protocol):
    """What a shell is handed to be counted in: the orchestrator's telemetry (or anything holding the
    shell's recorder)."""

    @property
    def actors(self) -> ActorMetrics: ...


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
    the orchestrator's (its `actors` recorder): the actor is counted there from its start to the end of its
    loop. `log_key` names the log field its `name` is logged under (`run`, `workspace`, `agent`), if any.
    """

    parent: Recipient | None = None
    name: str = ""
    log_key: ClassVar[str] = ""
    # The orchestrator's stop waits for every actor within its budget (`shell/stopping.py`); one that hangs
    # past it must not hold the process's exit as well.
    use_daemon_thread: ClassVar[bool] = True

    def __init__(self, *, telemetry: Metered | None = None) -> None:
        super().__init__()
        self.actor_metrics = OFF if telemetry is None else telemetry.actors
        self.mailbox = cast(Mailbox, self.actor_inbox)
        self.mailbox.now = self.actor_metrics.monotonic  # set before anyone holds the ref: nothing is queued yet
        self.mailbox.owner = weakref.ref(self)
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
        self.actor_metrics.register(self)
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
        units = BUCKET_UNITS
        packed = mailbox.buckets
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
            packed += units[0] if elapsed <= first else units[bisect_left(PROCESSING_BUCKETS, elapsed)]
            mailbox.buckets = packed  # only this thread writes it
            if not waiting:
                end = None  # the next take may wait: its start is read after it

    def _actor_loop_teardown(self) -> None:
        super()._actor_loop_teardown()
        self.actor_metrics.retire(self)
        stopping.ended(self.actor_urn)

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


def jitter_source(seed: int | None) -> random.Random:
    """The randomness a core is handed for its jitter: seeded in tests, from the OS otherwise."""
    return random.Random(seed)  # noqa: S311 - jitter, not a secret
