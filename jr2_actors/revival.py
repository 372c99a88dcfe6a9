"""`Revival`: what the orchestrator does when a run's actor died — the supervision plumbing.

The policy (died n times: revive, abandon, or nothing to restore) is `run/supervision.py`'s pure
`after_death`; this performs it on a `jr2-revive-<run>` thread of its own, restoring the run from its last
row as a restart would, or ending the row `error` and deleting what never ran. A store that cannot serve
the revival is waited for on `REVIVE_RETRY_BACKOFF`. The Orchestrator is handed one when it starts, with
the run table and the store. Next stage: `run/actor.py`, the revived run's actor.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pykka

from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.run import supervision
from jr2_actors.run.core import RunCore
from jr2_actors.run.feed.hub import FeedHub
from jr2_actors.shell import ActorFault
from jr2_actors.shell.clock import Clock, pause
from jr2_actors.store import messages as store
from jr2_actors.values.constants import ORCHESTRATOR_ASK_SECONDS, REVIVE_RETRY_BACKOFF
from jr2_actors.values.errors import KUBE_ERRORS
from jr2_actors.watch.identity import sandbox_name

log = logging.getLogger(__name__)


class Revival:
    """A run whose actor died: revived from its row, or abandoned, by `run/supervision.py`'s verdict.

    The Orchestrator hands it the store and the two doors of its run table: `restore` (a new actor for a
    live row; False when none starts) and `forget` (the run is over here: unlisted, its waiters woken)."""

    def __init__(self, *, client: KubeClient, clock: Clock, feed_hub: FeedHub, store_ref: pykka.ActorRef[Any],
                 restore: Callable[[store.RunRecord], bool], forget: Callable[[str], None]) -> None:
        self.client = client
        self.clock = clock
        self.feed_hub = feed_hub
        self._store = store_ref
        self._restore = restore
        self._forget = forget
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # no revival thread is being started
        self._deaths: dict[str, int] = {}  # run id → how often its actor died in this process
        self._unrevived: dict[str, str] = {}  # run id → why its revival waits for the store (now)
        self._revivers: list[threading.Thread] = []
        self._starting = 0  # revival threads being started outside the lock: `stop()` waits for them
        self._stopping = False
        self._stopped = threading.Event()  # wakes a revival's wait for the store

    def waiting(self) -> tuple[str, str] | None:
        """A run whose revival waits for the store, and why (the first by id), for `/healthz`."""
        with self._lock:
            return next(iter(sorted(self._unrevived.items())), None)

    def stop(self, deadline: float) -> None:
        """Nothing new is revived; waits (until `deadline`, monotonic) for a revival thread being started."""
        with self._idle:
            self._stopping = True
            self._stopped.set()
            self._idle.wait_for(lambda: self._starting == 0, max(deadline - time.monotonic(), 0.0))

    def join(self, deadline: float) -> None:
        """Waits (until `deadline`, monotonic) for every revival under way: once stopped, each ends soon."""
        with self._lock:
            revivers = list(self._revivers)
        for thread in revivers:
            thread.join(max(deadline - time.monotonic(), 0.0))

    def run_died(self, fault: ActorFault) -> None:
        """Supervision (`run/supervision.py` decides) on a thread of its own (this is the dying actor's thread).
        Its dead ref stays listed meanwhile, so nobody takes it for finished."""
        with self._lock:
            stopping = self._stopping
            if not stopping:
                deaths = self._deaths[fault.name] = self._deaths.get(fault.name, 0) + 1
                self._starting += 1
        if stopping:
            self._forget(fault.name)
            return
        thread = threading.Thread(target=self._revive, args=(fault.name, deaths, fault.error),
                                  name=f"jr2-revive-{fault.name}", daemon=True)
        try:
            thread.start()  # outside the lock; `stop()` waits for this start, so it joins every revival
        finally:
            with self._idle:
                self._starting -= 1
                self._revivers = [t for t in self._revivers if t.is_alive()] + [thread]
                self._idle.notify_all()

    def _revive(self, run_id: str, deaths: int, error: str) -> None:
        """A store that cannot serve the revival (its row unread, its end not written) is waited for on
        `REVIVE_RETRY_BACKOFF`: `/healthz` names the run meanwhile, and is true again once it lands."""
        attempt = 0
        while True:
            try:
                restored = self._revive_once(run_id, deaths, error)
                break
            except Exception as e:
                attempt += 1
                why = f"{type(e).__name__}: {e}"
                with self._lock:
                    self._unrevived[run_id] = why
                if attempt == 1:
                    log.error("run %s died (%s) and the store cannot serve its revival (%s); it tries again",
                              run_id, error, why)
                if pause(self.clock, REVIVE_RETRY_BACKOFF.delay(attempt), self._stopped,
                         what=f"run {run_id}'s revival: its backoff"):  # on a virtual clock, its time
                    restored = False  # stopping: its row stays as it is for the next start
                    break
        with self._lock:
            self._unrevived.pop(run_id, None)
        if restored:
            return
        self._forget(run_id)
        self.feed_hub.publish(run_id, (), finished=True)

    def _revive_once(self, run_id: str, deaths: int, error: str) -> bool:
        """Perform `supervision.after_death`: True when a new actor runs the run, False when it is over here."""
        found = self._store.ask(store.Fetch(run_id), timeout=ORCHESTRATOR_ASK_SECONDS)
        record = found if isinstance(found, store.RunRecord) else None
        live = record if record is not None and record.status == "live" else None
        verdict = supervision.after_death(run_id, deaths, error, row_live=live is not None)
        if verdict.do != "abandon":
            log.error("%s", verdict.why)
        if live is None or verdict.do == "nothing":
            return False
        if verdict.do == "revive":
            return self._restore(live)
        self._abandon(live, verdict.why)
        return False

    def _abandon(self, record: store.RunRecord, reason: str) -> None:
        """Past `RUN_REVIVALS`: the row ends `error` with its `ended` line, and what never ran is deleted
        here (ADR-0064: by the uid each Workspace wrote); what ran is left to the idle GC, its Lease stopped."""
        core, _ = RunCore.restore(record.blob, self.clock.monotonic(), self.clock.wall(),
                                  feed_after=self.feed_hub.last_id(record.run_id))
        for path, uid in core.never_ran():
            try:
                self.client.delete(SANDBOX, sandbox_name(record.run_id, path), uid=uid)
            except KUBE_ERRORS as e:
                log.error("run %s: the Sandbox of %s that never ran could not be deleted (%s); the idle GC "
                          "will", record.run_id, path, e)
        lines = core.abandon(f"{reason}; what ran is left to the idle GC")
        log.error("run %s: %s", record.run_id, core.fault)
        self._store.ask(store.Persist(record.run_id, "error", core.snapshot(), core.fault),
                        timeout=ORCHESTRATOR_ASK_SECONDS)
        self.feed_hub.publish(record.run_id, lines)
