"""One seed of the simulation, performed: the fake cluster and the orchestrator in this process, the seed's
runs submitted, its faults applied at their times, then every invariant checked (`invariants.py`).

Time here is real (the fake cluster and the orchestrator run their own threads and sockets); what the seed
fixes is the schedule. A restart is either clean (`stop()`, then a new orchestrator on the same state
dir) or a crash: the store's file is copied as a SIGKILL would leave it (sqlite's backup: every committed
transaction, WAL included, and nothing else), the old orchestrator is dropped, and a new one starts on
the copy — so nothing the old process still had in memory reaches the new one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pykka

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness import core as fake_harness
from jr2_actors.harness import briefing
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.sim import invariants
from jr2_actors.sim.schedule import Fault, Schedule
from jr2_actors.sim.store_switch import StoreSwitch
from jr2_actors.watch.identity import sandbox_name

log = logging.getLogger(__name__)

FINISH_SECONDS = 90.0  # after the last fault, every run must have finished within this
THREADS_GONE_SECONDS = 10.0  # after the stop, every thread the seed started must have ended within this
FOLLOW_WAIT_SECONDS = 0.2


@dataclass
class SeedResult:
    seed: int
    violations: list[str]
    seconds: float
    statuses: dict[str, str]
    faults_done: list[str] = field(default_factory=list)
    schedule_text: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations


class _Current:
    """The orchestrator the followers read from; swapped on each restart."""

    def __init__(self, orch: Orchestrator) -> None:
        self._lock = threading.Lock()
        self._orch = orch

    def get(self) -> Orchestrator:
        with self._lock:
            return self._orch

    def set(self, orch: Orchestrator) -> None:
        with self._lock:
            self._orch = orch


class _Follower(threading.Thread, invariants.FeedRecord):
    """A reader of one run's feed, as an EventSource is: it resumes after the last id it holds, across
    restarts, and remembers what each id said (a second line under one id is a violation)."""

    def __init__(self, run_id: str, current: _Current, stop: threading.Event) -> None:
        threading.Thread.__init__(self, name=f"jr2-sim-follow-{run_id}", daemon=True)
        invariants.FeedRecord.__init__(self, run_id)
        self.current = current
        self.stop_event = stop

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                got = self.current.get().feed(self.run_id, self.last, FOLLOW_WAIT_SECONDS)
            except Exception:  # a stopping orchestrator: read again from the next one
                self.stop_event.wait(0.05)
                continue
            if got is None:
                self.stop_event.wait(0.05)
                continue
            events = got.events
            for e in events:
                self.take(e.id, invariants.fingerprint(e))
            if not events:
                self.stop_event.wait(0.01)



class _ErrorLog(logging.Handler):
    """Every traceback logged while the seed runs: an exception nobody expected is a bug."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(f"{record.name}: {record.getMessage()[:300]}")


def harness_actions(actions: tuple[Any, ...]) -> list[fake_harness.Action]:
    out: list[fake_harness.Action] = []
    for kind, value in actions:
        if kind == "say":
            out.append(fake_harness.Say(value))
        elif kind == "pick":
            out.append(fake_harness.Pick(value))
        elif kind == "guard-kill":
            out.append(fake_harness.GuardKill(peak=value, limit="2Gi"))
    return out


class Sim:
    def __init__(self, schedule: Schedule, workdir: str, stop: threading.Event | None = None, *,
                 harness_mode: str = "lenient") -> None:
        self.schedule = schedule
        self.harness_mode = harness_mode  # the fake Harness's (fake/harness/core.py): lenient or strict
        self.stop = stop or threading.Event()
        self.workdir = workdir
        self.faults_done: list[str] = []
        self.cancelled: set[str] = set()
        self.restarts: list[int] = []  # how many admissions the Harness had seen at each restart
        self.store_switch = StoreSwitch()
        self._dirs = 0

    def run(self) -> SeedResult:
        started = time.monotonic()
        before = set(threading.enumerate())
        errors = _ErrorLog()
        root = logging.getLogger()
        root.addHandler(errors)
        violations: list[str] = []
        statuses: dict[str, str] = {}
        try:
            with self._cluster() as cluster:
                violations, statuses = self._play(cluster, errors)
        except Exception as e:  # the simulation itself broke: say so as a violation, with the seed
            log.exception("seed %d: the simulation failed", self.schedule.seed)
            violations.append(f"the simulation raised {type(e).__name__}: {e}")
        finally:
            root.removeHandler(errors)
        violations += invariants.threads_left(before, _settled_threads(before))
        if pykka.ActorRegistry.get_all():
            names = sorted({ref.actor_class.__name__ for ref in pykka.ActorRegistry.get_all()})
            violations.append(f"actors alive after the stop: {', '.join(names)}")
            pykka.ActorRegistry.stop_all(block=True, timeout=5)
        return SeedResult(self.schedule.seed, violations, time.monotonic() - started, statuses, self.faults_done,
                          self.schedule.describe())

    # -- the parts --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _cluster(self) -> Iterator[FakeCluster]:
        with self.store_switch, FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=1.0,
                                            harness_mode=self.harness_mode) as cluster:
            cluster.harness(lambda core: core.pick_first_allowed(True))
            latency, run_on = self.schedule.answer_latency, self.schedule.run_on

            def model(core: fake_harness.HarnessCore) -> None:
                core.set_answer_latency(latency)
                core.set_run_on(run_on)

            cluster.harness(model)
            yield cluster

    def _state_dir(self) -> str:
        self._dirs += 1
        path = os.path.join(self.workdir, f"state-{self._dirs}")
        os.makedirs(path, exist_ok=True)
        return path

    def _orchestrator(self, cluster: FakeCluster, state_dir: str) -> Orchestrator:
        return Orchestrator(cluster.client(), state_dir=state_dir, signing_key=cluster.signing_key,
                            instance_harness=cluster.instance_harness_url).start()

    @staticmethod
    def _stop(orch: Orchestrator) -> None:
        """Stop it and close its client (an open keep-alive connection holds a thread of the fake's)."""
        try:
            orch.stop()
        finally:
            orch.client.close()

    def _play(self, cluster: FakeCluster, errors: _ErrorLog) -> tuple[list[str], dict[str, str]]:
        schedule = self.schedule
        for plan in schedule.runs:
            for agent, turns in plan.scripts.items():
                cluster.script(agent, *[harness_actions(t) for t in turns])
        state_dir = self._state_dir()
        orch = self._orchestrator(cluster, state_dir)
        current = _Current(orch)
        stop_following = threading.Event()
        followers: list[_Follower] = []
        try:
            for plan in schedule.runs:
                orch.submit(plan.document, run_id=plan.run_id)
                follower = _Follower(plan.run_id, current, stop_following)
                follower.start()
                followers.append(follower)
            orch, state_dir = self._apply_faults(cluster, current, state_dir)
            deadline = time.monotonic() + FINISH_SECONDS
            for plan in schedule.runs:
                while not self.stop.is_set() and time.monotonic() < deadline:
                    if orch.wait_finished(plan.run_id, min(max(deadline - time.monotonic(), 0.01), 0.5)):
                        break
            docs = {plan.run_id: orch.status(plan.run_id) for plan in schedule.runs}
            statuses = {run_id: "missing" if doc is None else str(doc.get("status")) for run_id, doc in docs.items()}
            stuck = {run_id: doc for run_id, doc in docs.items() if doc is not None
                     and doc.get("status") not in invariants.TERMINAL}
            feeds = {plan.run_id: self._stored_feed(orch, plan.run_id) for plan in schedule.runs}
            feed_times = {plan.run_id: self._feed_times(orch, plan.run_id) for plan in schedule.runs}
            caught_up = time.monotonic() + 5.0
            for follower in followers:  # each reader takes the lines of its finished run, then stops
                follower.wait_for(max(feeds.get(follower.run_id) or {0: ""}), max(caught_up - time.monotonic(), 0))
        finally:
            stop_following.set()
            for follower in followers:
                follower.join(5)
            self._stop(current.get())
        facts = invariants.Facts(
            runs={plan.run_id: plan for plan in schedule.runs},
            statuses=statuses,
            cancelled=set(self.cancelled),
            restart_marks=list(self.restarts),
            stored_feeds=feeds,
            feed_times=feed_times,
            stuck=stuck,
            tracebacks=list(errors.records),
            **cluster_facts(cluster, followers),
        )
        return invariants.check(facts), statuses

    @staticmethod
    def _feed_times(orch: Orchestrator, run_id: str) -> dict[int, float]:
        got = orch.feed(run_id, 0, 0.0)
        return {} if got is None else {e.id: e.at for e in got[0]}

    def _stored_feed(self, orch: Orchestrator, run_id: str) -> dict[int, str]:
        got = orch.feed(run_id, 0, 0.0)
        if got is None:
            return {}
        return {e.id: invariants.fingerprint(e) for e in got[0]}

    # -- the faults ---------------------------------------------------------------------------------------

    def _apply_faults(self, cluster: FakeCluster, current: _Current, state_dir: str) -> tuple[Orchestrator, str]:
        t0 = time.monotonic()
        undo: list[tuple[float, str, Callable[[], None]]] = []
        pending = list(self.schedule.faults)
        while pending or undo:
            next_fault = pending[0].at if pending else float("inf")
            next_undo = min((u[0] for u in undo), default=float("inf"))
            due = min(next_fault, next_undo)
            wait = t0 + due - time.monotonic()
            if wait > 0 and self.stop.wait(wait):  # the schedule's own time: when the next fault is due
                break
            if next_undo <= next_fault:
                undo.sort(key=lambda u: u[0])
                _, what, fn = undo.pop(0)
                self._quietly(what, fn)
                continue
            fault = pending.pop(0)
            state_dir = self._fault(cluster, current, state_dir, fault, undo, due)
        return current.get(), state_dir

    def _quietly(self, what: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as e:  # a fault whose target is gone (a Sandbox already deleted) is no fault
            self.faults_done.append(f"{what}: skipped ({type(e).__name__})")
        else:
            self.faults_done.append(what)

    def _fault(self, cluster: FakeCluster, current: _Current, state_dir: str, fault: Fault,
               undo: list[tuple[float, str, Callable[[], None]]], now: float) -> str:
        what = fault.describe()
        target = sandbox_name(self.schedule.runs[fault.run].run_id, fault.workspace) if fault.run >= 0 else ""
        lever = cluster_lever(fault, target)
        if lever is not None:  # the cluster's faults are the fake's own levers (`cluster.faults`), undos and all
            name, params = lever
            self._quietly(what, lambda: getattr(cluster.faults, name)(**params))
            skipped = cluster.faults.log[-1].skipped if cluster.faults.log else ""
            if skipped and self.faults_done and self.faults_done[-1] == what:
                self.faults_done[-1] = f"{what}: skipped ({skipped})"
        elif fault.kind == "store-unwritable":
            self._quietly(what, self.store_switch.refuse.set)
            undo.append((now + fault.seconds, "store writable", self.store_switch.refuse.clear))
        elif fault.kind == "cancel":
            plan = self.schedule.runs[fault.run]

            def cancel() -> None:
                orch = current.get()
                before = orch.status(plan.run_id)
                if before is not None and before.get("status") == "running":
                    self.cancelled.add(plan.run_id)  # asked while live: it may end cancelled (or done, if first)
                orch.cancel(plan.run_id)
            self._quietly(what, cancel)
        elif fault.kind in ("restart-clean", "restart-crash"):
            state_dir = self._restart(cluster, current, state_dir, crash=fault.kind == "restart-crash")
            self.faults_done.append(what)
        return state_dir

    def _restart(self, cluster: FakeCluster, current: _Current, state_dir: str, *, crash: bool) -> str:
        old = current.get()
        if crash:
            # The process dies here: nothing it writes from now lands, and what it does without a write first
            # is what a process may have had in flight when killed.
            self.store_switch.freeze()
            fresh = self._state_dir()
            for name in ("state.db", "history.db"):  # the live rows, then the finished (store/rows.py)
                if os.path.exists(os.path.join(state_dir, name)):
                    _snapshot(os.path.join(state_dir, name), os.path.join(fresh, name))
            self._stop(old)
            state_dir = fresh
        else:
            self._stop(old)
        self.restarts.append(len(cluster.admissions()))  # what the old process sent has landed by now
        self.store_switch.frozen.clear()
        self.store_switch.refuse.clear()  # the process comes back on a disk that writes (else it would not start)
        current.set(self._orchestrator(cluster, state_dir))
        return state_dir


def cluster_lever(fault: Fault, target: str) -> tuple[str, dict[str, Any]] | None:
    """The `cluster.faults` call that plays a fault of the cluster (None for the sim's own: the store, a
    cancel, a restart). `target` is the Sandbox a targeted fault aims at."""
    kind, seconds = fault.kind, fault.seconds
    levers: dict[str, tuple[str, dict[str, Any]]] = {
        "api-latency": ("latency", {"delay": 0.05, "seconds": seconds}),
        "watch-drop": ("drop_watches", {}),
        "watch-expire": ("expire_watches", {}),
        "watch-error": ("stream_error", {"status": fault.status}),
        "watch-stall": ("stall_watches", {"seconds": seconds}),
        "api-refuse": ("refuse", {"count": fault.count, "status": fault.status,
                                  "retry_after": 1 if fault.status == 429 else None}),
        "control-plane-away": ("away", {"seconds": seconds}),
        "token-rotation": ("rotate_token", {}),
        "evict": ("evict", {"sandbox": target}),
        "harness-restart": ("harness_restart", {"sandbox": target, "watch_lag": fault.lag}),
        "answers-refused": ("answers_refused", {"count": fault.count, "status": fault.status}),
        "kernel-kill": ("kernel_oom", {"sandbox": target, "watch_lag": fault.lag}),
        "harness-draining": ("draining", {"sandbox": target, "seconds": seconds}),
        "conversations-lost": ("lose_conversations", {"sandbox": target}),
        "list-kill": ("guard_kill", {"sandbox": target, "peak": fault.peak or "1.05Gi", "limit": "2Gi"}),
        "quota": ("quota", {"seconds": seconds}),
    }
    return levers.get(kind)


def _snapshot(source: str, target: str) -> None:
    """What a SIGKILL leaves of a WAL database: every committed transaction (sqlite's online backup)."""
    src = sqlite3.connect(source)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()


def _settled_threads(before: set[threading.Thread]) -> list[str]:
    """The threads the seed started that are still alive after a while, each with where it waits."""
    deadline = time.monotonic() + THREADS_GONE_SECONDS
    while True:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left or time.monotonic() >= deadline:
            frames = sys._current_frames()
            return [f"{t.name} at {_where(frames.get(t.ident or -1))}" for t in left]
        left[0].join(max(deadline - time.monotonic(), 0))  # threads end on their own; a new one is looked at next


def _where(frame: Any) -> str:
    stack = traceback.extract_stack(frame)[-4:] if frame is not None else []
    return " < ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in reversed(stack)) or "?"


def cluster_facts(cluster: FakeCluster, followers: Sequence[invariants.FeedRecord]) -> dict[str, Any]:
    """What the cluster and the followers hold at a seed's or a trial's end, for `invariants.Facts`: the
    cluster restarted first (every fault off), so the last look at it is answered."""
    cluster.restart()
    lister = cluster.client()
    try:
        objects = lister.list(SANDBOX).items
    finally:
        lister.close()
    return {"admissions": cluster.admissions(), "kills": cluster.harness_read(lambda core: core.kill_log()),
            "reads": cluster.harness_read(lambda core: list(core.read_log)),
            "boots": cluster.harness_read(lambda core: list(core.boots)),
            "cut": cluster.harness_read(lambda core: list(core.cut)),
            "lost": cluster.harness_read(lambda core: list(core.lost)), "ended_at": cluster.clock.wall(),
            "sandboxes": [sandbox_facts(obj) for obj in objects],
            "follower_lines": {f.run_id: dict(f.lines) for f in followers},
            "follower_problems": [p for f in followers for p in f.problems],
            "nudge_text": briefing.NUDGE, "readmit_text": briefing.READMIT}


def sandbox_facts(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    annotations = meta.get("annotations") or {}
    return {"name": meta.get("name"), "runId": annotations.get("jr2.dev/run-id"),
            "workspace": annotations.get("jr2.dev/workspace"), "phase": status.get("phase"),
            "podUID": status.get("podUID"), "deleting": bool(meta.get("deletionTimestamp"))}


def clean_workdir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
