"""StoreActor: the only writer of `state.db` (ADR-0065). Every persist is an `ask`, so the row is on
disk (in WAL, handed to the OS) before the caller's next side effect — the ordering ADR-0065 keeps the
write synchronous for. The actor owns its one connection; it sweeps finished rows at boot and hourly.

Group commit: when it takes a `Persist`, it also takes every `Persist` waiting behind it in its
mailbox (up to `STORE_GROUP_COMMIT_ROWS`, stopping at the first other message, so order holds) and writes
them in one transaction; each ask is answered only after that commit, so every caller still has its row on
disk before its next side effect. Nothing waits for company: a lone persist is written at once, and a
batch is only what queued while the previous write was on the disk. A persist may carry a tell to make
once its row is committed (`then`: a run's feed lines), made on this thread before the answers.

A write the disk refuses (read-only, full, I/O) is answered `DiskWriteFailed` with the reason: the caller
holds and retries (a run stops before its next side effect; a submission is refused with 503), and
`Healthy` says the store cannot write until a write lands again — its own probe, a real committed write,
finds that out when no run is asking. A file that is not ours is `StoreUnusable`, answered to `Restore`
(the boot's first ask) so the process can say so in one line.

Metrics: each persist's latency and blob size, each sweep, and the rows by status — recounted
at boot, after a sweep, and one second after writes (however many), so a burst costs one count.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any, cast

import pykka
from pykka._envelope import Envelope  # private: `save` puts what `ask` puts (tests/test_shell_pykka.py pins it)

from jr2_actors.shell import Recipient, Shell, Timers, tell_quietly
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.store import metrics as store_metrics
from jr2_actors.store.messages import (
    DiskWriteFailed,
    Fetch,
    FindKey,
    Healthy,
    ListFinished,
    Persist,
    Restore,
    StoreError,
    StoreUnusable,
    Sweep,
    Withdraw,
)
from jr2_actors.store.metrics import StoreTelemetry
from jr2_actors.store.rows import Row, RunStore
from jr2_actors.values.constants import STORE_GROUP_COMMIT_ROWS, STORE_ROWS_RECOUNT_SECONDS, SWEEP_INTERVAL_SECONDS

log = logging.getLogger(__name__)


# What a persist's asker may meet when the store cannot write now: hold, retry, and say so.
STORE_DOWN: tuple[type[BaseException], ...] = (DiskWriteFailed, pykka.Timeout, pykka.ActorDeadError)

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class AnswerLatch:
    """One persist's answer: a lock taken as it is made and released once, by the store's
    thread after the commit that holds the row — one C call that wakes exactly its asker. A pykka ask's
    Future is a `queue.Queue` (three Conditions, a Python-level notify per answer, built per ask): answering
    those was 29 % of the store's thread at 100 runs persisting at once (docs/benchmarks.md). It answers as
    the Future does (`set`, `set_exception`), so an envelope carrying one is answered on every path an ask's
    is — the shell's loop, the group commit, and pykka's teardown (`ActorDeadError`) when the store stops."""

    __slots__ = ("_error", "_latch")

    def __init__(self) -> None:
        self._latch = threading.Lock()
        self._latch.acquire()
        self._error: BaseException | None = None

    def set(self, value: object = None) -> None:
        self._latch.release()

    def set_exception(self, exc_info: ExcInfo | None = None) -> None:
        self._error = (exc_info or sys.exc_info())[1]
        self._latch.release()

    def get(self, timeout: float) -> None:
        if not self._latch.acquire(timeout=timeout):
            raise pykka.Timeout(f"no answer to the persist within {timeout} seconds")
        if self._error is not None:
            raise self._error


def save(store: pykka.ActorRef[Any], message: Persist, timeout: float) -> None:
    """`store.ask(message, timeout=timeout)` with an `AnswerLatch` for a Future: it returns once the commit
    holds the row (ADR-0065) and raises what the ask would (`STORE_DOWN`, `StoreError`). How runs persist."""
    if not store.is_alive():
        raise pykka.ActorDeadError(f"{store} not found")
    answer = AnswerLatch()
    store.actor_inbox.put(Envelope(message, reply_to=cast("pykka.Future[Any]", answer)))
    answer.get(timeout)


@dataclass(frozen=True)
class _Recount:
    pass


def _is_persist(message: object) -> bool:
    return isinstance(message, Persist)


class StoreActor(Shell):
    def __init__(self, state_dir: str, *, clock: Clock | None = None,
                 sweep_interval: float = SWEEP_INTERVAL_SECONDS, parent: Recipient | None = None,
                 telemetry: StoreTelemetry | None = None) -> None:
        super().__init__(telemetry=telemetry)
        self.metrics = store_metrics.OFF if telemetry is None else telemetry.store
        self.parent = parent  # told an ActorFault if this actor dies of our bug (the orchestrator)
        self.clock = clock or SystemClock()
        self.store = RunStore(state_dir)
        self._interval = sweep_interval
        self._timers = Timers(self.clock, name="jr2-store-timers")
        self._next_sweep: int | None = None
        self._recount_due = False
        self._write_error = ""
        self._settle_error = False  # said once until a move lands again
        self._unusable: StoreUnusable | None = None

    def started(self) -> None:
        try:
            self.store.open()  # the connection belongs to this actor's thread
        except StoreUnusable as e:
            self._unusable = e  # answered to every ask: the orchestrator's start says it in one line
            return
        self._sweep()
        self._recount()

    def cleanup(self) -> None:
        self._timers.stop()
        self.store.close()

    def on_receive(self, message: Any) -> Any:
        if self._unusable is not None:
            if isinstance(message, Healthy):
                return str(self._unusable)
            if isinstance(message, (_Recount, Sweep, Withdraw)):
                return None
            raise self._unusable
        if isinstance(message, Persist):
            return self._persist(message)
        if isinstance(message, _Recount):
            self._recount_due = False
            self._recount()
            return None
        if isinstance(message, Healthy):
            return self._healthy()
        if isinstance(message, Restore):
            return self.store.restore()
        if isinstance(message, Fetch):
            return self.store.get(message.run_id)
        if isinstance(message, FindKey):
            try:
                return self.store.keyed(message.key)
            except sqlite3.Error as e:  # the disk's (what the API answers 503), not our bug
                raise DiskWriteFailed(f"the store cannot be read: {type(e).__name__}: {e}") from e
        if isinstance(message, ListFinished):
            return self.store.finished(message.prefix, message.limit)
        if isinstance(message, Sweep):
            return self._sweep()
        if isinstance(message, Withdraw):
            return self._withdraw(message.run_id)
        return None

    def _persist(self, first: Persist) -> None:
        """Write `first` and every persist waiting behind it in one transaction, then answer each: the
        others' asks here, `first`'s by returning (or raising) to the shell's loop."""
        waiting = self.mailbox.take_while(_is_persist, STORE_GROUP_COMMIT_ROWS - 1)
        batch = [first, *(envelope.message for envelope in waiting)]
        metrics = self.metrics
        began = metrics.monotonic()
        outcomes: list[int | StoreError | DiskWriteFailed]
        try:
            outcomes = [*self.store.persist_many(
                [Row(p.run_id, p.status, p.blob, p.reason, p.create, p.keyed) for p in batch], self.clock.wall())]
        except Exception as e:  # the disk's: nothing of the batch is written; /healthz says so until a write lands
            if not self._write_error:
                log.error("the store cannot write %s: %s: %s", self.store.path, type(e).__name__, e)
            self._write_error = f"{type(e).__name__}: {e}"
            self.metrics.writes(self._write_error)
            failed = DiskWriteFailed(self._write_error)
            failed.__cause__ = e
            outcomes = [failed] * len(batch)
        took = metrics.monotonic() - began
        for outcome in outcomes:
            if isinstance(outcome, int):
                metrics.persisted(took, outcome)
            else:
                metrics.persist_failed()
        wrote = any(isinstance(outcome, int) for outcome in outcomes)
        if wrote:
            self._wrote()
            self._recount_soon()
        # ADR-0065: every row of the batch is committed now; only now is anything told of it, or any asker
        # answered.
        for message, outcome in zip(batch, outcomes, strict=True):
            if message.then is not None and isinstance(outcome, int):
                tell_quietly(*message.then)
        for envelope, outcome in zip(waiting, outcomes[1:], strict=True):
            if envelope.reply_to is None:
                if not isinstance(outcome, int):
                    log.error("a persist told, not asked, was refused: %s", outcome)
            elif isinstance(outcome, int):
                envelope.reply_to.set(None)
            else:
                envelope.reply_to.set_exception((type(outcome), outcome, outcome.__traceback__))
        if wrote:
            self._settle()
        if not isinstance(outcomes[0], int):
            raise outcomes[0]  # our bug (or a taken id), or the disk's: answered to the asker
        return None

    def _settle(self) -> None:
        """Move the runs that ended to the history, after the answers: a restore never reads them. One the
        disk refuses now is moved by the next write's settle, or at the next open."""
        try:
            self.store.settle()
        except Exception as e:
            if not self._settle_error:
                log.warning("moving finished runs to %s failed (tried after each write): %s: %s",
                            self.store.history_path, type(e).__name__, e)
            self._settle_error = True
        else:
            self._settle_error = False

    def _healthy(self) -> bool | str:
        """The present, not the past: after a failed write, a real write decides (and clears it)."""
        try:
            if self._write_error:
                self.store.probe_write()
                self._wrote()
            else:
                self.store.can_write()
        except Exception as e:
            self._write_error = self._write_error or f"{type(e).__name__}: {e}"
            self.metrics.writes(self._write_error)
            return self._write_error
        self.metrics.writes("")
        return True

    def _wrote(self) -> None:
        self.metrics.writes("")
        if self._write_error:
            log.warning("the store writes %s again (it could not: %s)", self.store.path, self._write_error)
            self._write_error = ""

    def _withdraw(self, run_id: str) -> None:
        try:
            withdrawn = self.store.withdraw(run_id)
        except Exception as e:  # the disk's: the create did not land either while it refuses, or is restored
            log.error("run %s was refused (503) but its row could not be withdrawn: %s: %s; a restart may "
                      "start it", run_id, type(e).__name__, e)
            return
        if withdrawn:
            log.warning("run %s was refused (503: its create timed out) and its row, which landed later, is "
                        "withdrawn", run_id)
            self._recount_soon()

    def _sweep(self) -> int:
        """Sweep now and keep one hourly chain, however many sweeps are asked for. A sweep that fails (a
        locked or full disk) is logged and tried again next hour: it must not end the store's writer."""
        self._timers.cancel(self._next_sweep)
        ref = self.actor_ref
        self._next_sweep = self._timers.schedule(self.clock.monotonic() + self._interval,
                                                 lambda: tell_quietly(ref, Sweep()))
        try:
            removed = self.store.sweep(self.clock.wall())
        except Exception:
            log.exception("the sweep of finished runs failed; the next one is in %.0fs", self._interval)
            self.metrics.swept(None)
            return 0
        self.metrics.swept(removed)
        if removed:
            log.info("swept %d finished runs older than 7 days", removed)
            self._recount_soon()
        return removed

    def _recount_soon(self) -> None:
        """One recount a second at most, whatever the number of writes before it."""
        if self.metrics.enabled and not self._recount_due:
            self._recount_due = True
            ref = self.actor_ref
            self._timers.schedule(self.clock.monotonic() + STORE_ROWS_RECOUNT_SECONDS,
                                  lambda: tell_quietly(ref, _Recount()))

    def _recount(self) -> None:
        if self.metrics.enabled:
            try:
                self.metrics.rows(self.store.count_by_status())
                self.metrics.footprint(self.store.footprint())
            except Exception:
                log.exception("counting the store's rows failed (only the metrics miss it)")


