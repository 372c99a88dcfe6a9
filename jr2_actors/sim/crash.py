"""Crash trials against the real process: `jr2-actors serve` with 20 runs posted at once is SIGKILLed at a
point the trial's seed draws — and up to twice more after each restart — started again on the same state
dir each time, and every run must still reach its end.

The fake cluster runs in this process (so its Harness's admissions can be counted); `serve` is a child
process talking to it over loopback, as a deployed orchestrator talks to its cluster. Each run is followed
as an EventSource follows it: its server-sent events, resumed after a cut with `Last-Event-ID`. The
invariants are the simulation's (`invariants.py`); a run answered 201 that is missing after the restart is
one that was lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import requests

from jr2_actors.api import sse
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness import core as fake_harness
from jr2_actors.sim import invariants
from jr2_actors.sim.runner import cluster_facts, harness_actions
from jr2_actors.sim.schedule import HARNESS_MODELS, SHAPES, RunPlan, guard_peaks, scripts_for, workflow
from jr2_actors.sim.serve_process import ServeProcess
from jr2_actors.values.timefmt import parse_rfc3339

RUNS_PER_TRIAL = 20
KILL_WINDOW_SECONDS = 4.0  # the kill falls this far at most after the first submission
READY_SECONDS = 60.0
FINISH_SECONDS = 120.0
STOP_SECONDS = 15.0  # serve's SIGTERM budget is 10 s; past this it did not keep it


@dataclass
class TrialResult:
    trial: int
    violations: list[str]
    seconds: float
    accepted: int
    killed_at: float
    statuses: dict[str, str] = field(default_factory=dict)
    describe: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations


class _Follower(threading.Thread, invariants.FeedRecord):
    """An EventSource: reads the run's events, and after a cut reconnects with `Last-Event-ID`."""

    def __init__(self, run_id: str, server: list[str], token: str, stop: threading.Event) -> None:
        threading.Thread.__init__(self, name=f"jr2-crash-follow-{run_id}", daemon=True)
        invariants.FeedRecord.__init__(self, run_id)
        self.server, self.token, self.stop_event = server, token, stop
        self.ended = False

    def run(self) -> None:
        while not self.stop_event.is_set() and not self.ended:
            headers = {"Authorization": f"Bearer {self.token}"}
            if self.last:
                headers["Last-Event-ID"] = str(self.last)
            try:
                with requests.get(f"{self.server[0]}/runs/{self.run_id}/events", headers=headers, stream=True,
                                  timeout=(2, 20)) as resp:
                    if resp.status_code != 200:
                        self.stop_event.wait(0.2)
                        continue
                    for doc in sse.decode(raw or "" for raw in resp.iter_lines(decode_unicode=True)):
                        self.take_doc(doc)
                        if self.stop_event.is_set():
                            return
                    self.ended = self.ended or self._finished()
            except (requests.RequestException, ValueError):
                self.stop_event.wait(0.2)

    def _finished(self) -> bool:
        return any(json.loads(t).get("kind") == "ended" for t in self.lines.values())

    def take_doc(self, doc: dict[str, Any]) -> None:
        event_id = doc.get("id")
        if not isinstance(event_id, int):
            self.problems.append(f"{self.run_id}: an event without an integer id: {str(doc)[:120]}")
            return
        self.take(event_id, json.dumps(doc, sort_keys=True))


# One fault on the way of each trial, beside the kill (the real process meets it over loopback).
TRIAL_FAULTS = ("control-plane-away", "answers-refused", "watch-expire", "api-refuse", "none")


def _trial_fault(cluster: FakeCluster, fault: str) -> None:
    """The trial's fault, played by the fake's own levers (`cluster.faults`); a cluster already stopped is no
    fault."""
    levers: dict[str, Callable[[], object]] = {
              "control-plane-away": lambda: cluster.faults.away(seconds=1.0),
              "answers-refused": lambda: cluster.faults.answers_refused(2),
              "watch-expire": cluster.faults.expire_watches,
              "api-refuse": lambda: cluster.faults.refuse(4, 503)}
    lever = levers.get(fault)
    if lever is not None:
        with contextlib.suppress(Exception):  # the trial is over and its cluster gone: nothing to fault
            lever()


def _times(feeds: dict[str, dict[int, str]]) -> dict[str, dict[int, float]]:
    """Each served feed line's time (its `at`), for the invariants that weigh a fault against the Harness."""
    out: dict[str, dict[int, float]] = {}
    for run_id, lines in feeds.items():
        for event_id, text in lines.items():
            at = parse_rfc3339(json.loads(text).get("at"))
            if at is not None:
                out.setdefault(run_id, {})[event_id] = at
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Trial:
    def __init__(self, seed: int, trial: int, workdir: str, stop: threading.Event | None = None, *,
                 harness_mode: str = "lenient") -> None:
        self.seed, self.trial, self.workdir = seed, trial, workdir
        self.harness_mode = harness_mode  # the fake Harness's: lenient or strict (fake/harness/core.py)
        self.rng = random.Random(seed * 100_003 + trial)  # noqa: S311 - a trial's schedule, not a secret
        self.stop = stop or threading.Event()
        self.token = secrets.token_hex(16)
        self.describe = ""
        self.last_docs: dict[str, Any] = {}  # each run's last RunStatus: a run that never ended is shown
        self.signing_key = secrets.token_hex(32).encode()  # serve reads the env's text as the key's bytes

    def plans(self) -> list[RunPlan]:
        peaks = guard_peaks(more=True)
        self.rng.shuffle(peaks)
        plans = []
        for i in range(RUNS_PER_TRIAL):
            shape = self.rng.choice(SHAPES)
            before = list(peaks)
            scripts = scripts_for(shape, i, self.rng, peaks)
            plans.append(RunPlan(f"#{i}", shape, workflow(shape, i), scripts, tuple(p for p in before
                                                                                    if p not in peaks)))
        return plans

    def run(self) -> TrialResult:
        started = time.monotonic()
        violations: list[str] = []
        statuses: dict[str, str] = {}
        accepted: dict[str, RunPlan] = {}
        killed_admissions: list[int] = []
        killed_at = round(self.rng.uniform(0.0, KILL_WINDOW_SECONDS), 2)
        latency, run_on = self.rng.choice(HARNESS_MODELS)
        fault = self.rng.choice(TRIAL_FAULTS)
        fault_at = round(self.rng.uniform(0.0, KILL_WINDOW_SECONDS + 2.0), 2)
        # 1-3 SIGKILLs: the first into the burst of submissions, each later one that long after the restarted
        # process said it listens (mid-restore, mid-Turn, mid-teardown, as the draw falls).
        again_at = [round(self.rng.uniform(0.0, KILL_WINDOW_SECONDS), 2) for _ in range(self.rng.choice((0, 1, 2)))]
        self.describe = (f"killed at {killed_at:.2f}s" + "".join(f", again {t:.2f}s after the restart"
                                                                   for t in again_at)
                         + f"; answers take {latency * 1000:.0f} ms, Submissions run on {run_on * 1000:.0f} ms; "
                         f"{fault} at {fault_at:.2f}s")
        with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=1.0,
                         signing_key=self.signing_key, harness_mode=self.harness_mode) as cluster:
            cluster.harness(lambda core: core.pick_first_allowed(True))

            def model(core: fake_harness.HarnessCore) -> None:
                core.set_answer_latency(latency)
                core.set_run_on(run_on)

            cluster.harness(model)
            faulting = threading.Timer(fault_at, _trial_fault, args=(cluster, fault))
            faulting.daemon = True
            faulting.start()
            plans = self.plans()
            for plan in plans:
                for agent, turns in plan.scripts.items():
                    cluster.script(agent, *[harness_actions(t) for t in turns])
            kubeconfig = os.path.join(self.workdir, "kubeconfig")
            cluster.write_kubeconfig(kubeconfig)
            state = os.path.join(self.workdir, "state")
            tmp = os.path.join(self.workdir, "tmp")
            os.makedirs(tmp, exist_ok=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")}
            env.update({"JR2_INSTANCE_TOKEN": self.token, "JR2_SIGNING_KEY": self.signing_key.decode(),
                        "PYTHONUNBUFFERED": "1"})
            with self._serving(kubeconfig, state, tmp, env, cluster.instance_harness_url) as start:
                server = [""]
                stop_following = threading.Event()
                followers: list[_Follower] = []
                try:
                    proc = start()
                    server[0] = proc.url
                    submitter = threading.Thread(target=self._submit, args=(proc.url, plans, accepted),
                                                 name="jr2-crash-submit", daemon=True)
                    t0 = time.monotonic()
                    submitter.start()
                    while time.monotonic() - t0 < killed_at and not self.stop.is_set():
                        for run_id in list(accepted):
                            if not any(f.run_id == run_id for f in followers):
                                f = _Follower(run_id, server, self.token, stop_following)
                                f.start()
                                followers.append(f)
                        self.stop.wait(0.02)
                    proc.proc.send_signal(signal.SIGKILL)
                    proc.proc.wait(10)
                    killed_admissions.append(len(cluster.admissions()))  # what the dead process sent, landed
                    submitter.join(15)
                    violations += [f"serve #1 logged: {t}" for t in proc.tracebacks()]
                    again = start()
                    server[0] = again.url
                    for n, after in enumerate(again_at, start=2):
                        self.stop.wait(after)
                        again.proc.send_signal(signal.SIGKILL)
                        again.proc.wait(10)
                        killed_admissions.append(len(cluster.admissions()))
                        violations += [f"serve #{n} logged: {t}" for t in again.tracebacks()]
                        again = start()
                        server[0] = again.url
                    for run_id in list(accepted):
                        if not any(f.run_id == run_id for f in followers):
                            f = _Follower(run_id, server, self.token, stop_following)
                            f.start()
                            followers.append(f)
                    statuses = self._wait_all(again.url, list(accepted))
                    feeds = {run_id: self._feed(again.url, run_id) for run_id in accepted}
                    caught_up = time.monotonic() + 10
                    for f in followers:
                        f.wait_for(max(feeds.get(f.run_id) or {0: ""}), max(caught_up - time.monotonic(), 0))
                    stop_following.set()
                    again.proc.send_signal(signal.SIGTERM)
                    try:
                        again.proc.wait(STOP_SECONDS)
                    except subprocess.TimeoutExpired:
                        violations.append(f"serve did not stop within {STOP_SECONDS:.0f}s of SIGTERM")
                    violations += [f"serve #{len(again_at) + 2} logged: {t}" for t in again.tracebacks()]
                finally:
                    stop_following.set()
                    for f in followers:
                        f.join(5)
            faulting.cancel()
            facts = invariants.Facts(
                runs=accepted, statuses=statuses, cancelled=set(), restart_marks=killed_admissions,
                stored_feeds=feeds if accepted else {}, feed_times=_times(feeds) if accepted else {},
                stuck={r: d for r, d in self.last_docs.items() if statuses.get(r) not in invariants.TERMINAL},
                **cluster_facts(cluster, followers))
            violations += invariants.check(facts)
        return TrialResult(self.trial, violations, time.monotonic() - started, len(accepted), killed_at, statuses,
                           self.describe)

    @contextlib.contextmanager
    def _serving(self, kubeconfig: str, state: str, tmp: str, env: dict[str, str],
                 harness: str) -> Iterator[Callable[[], ServeProcess]]:
        procs: list[ServeProcess] = []

        def start() -> ServeProcess:
            proc = ServeProcess(kubeconfig, state, env={**env, "TMPDIR": tmp}, extra=("--instance-harness", harness))
            procs.append(proc)
            if not proc.ready(READY_SECONDS):
                raise RuntimeError("serve did not start: " + "".join(proc.lines[-5:]))
            return proc

        try:
            yield start
        finally:
            for proc in procs:
                if proc.proc.poll() is None:
                    proc.proc.kill()
                    proc.proc.wait(10)

    def _submit(self, url: str, plans: list[RunPlan], accepted: dict[str, RunPlan]) -> None:
        """Every run posted at once, as a release would post them."""
        def post(plan: RunPlan) -> None:
            try:
                resp = requests.post(f"{url}/runs", json={"workflow": plan.document},
                                     headers={"Authorization": f"Bearer {self.token}"}, timeout=10)
            except requests.RequestException:
                return  # the process is gone: what was not answered 201 was never accepted
            if resp.status_code == 201:
                accepted[str(resp.json()["runId"])] = plan

        with ThreadPoolExecutor(len(plans) or 1, thread_name_prefix="jr2-crash-submit") as pool:
            list(pool.map(post, plans))

    def _wait_all(self, url: str, run_ids: list[str]) -> dict[str, str]:
        deadline = time.monotonic() + FINISH_SECONDS
        statuses: dict[str, str] = {}
        pending = list(run_ids)
        while pending and time.monotonic() < deadline and not self.stop.is_set():
            for run_id in list(pending):
                try:
                    resp = requests.get(f"{url}/runs/{run_id}", headers={"Authorization": f"Bearer {self.token}"},
                                        timeout=10)
                except requests.RequestException:
                    continue
                if resp.status_code == 404:
                    statuses[run_id] = "missing"
                    pending.remove(run_id)
                elif resp.ok:
                    doc = resp.json()
                    status = str(doc.get("status"))
                    statuses[run_id] = status
                    self.last_docs[run_id] = doc
                    if status in invariants.TERMINAL:
                        pending.remove(run_id)
            self.stop.wait(0.2)
        return statuses

    def _feed(self, url: str, run_id: str) -> dict[int, str]:
        out: dict[int, str] = {}
        try:
            with requests.get(f"{url}/runs/{run_id}/events", headers={"Authorization": f"Bearer {self.token}"},
                              stream=True, timeout=(2, 5)) as resp:
                if resp.status_code != 200:
                    return out
                for doc in sse.decode(raw or "" for raw in resp.iter_lines(decode_unicode=True)):
                    if isinstance(doc.get("id"), int):
                        out[doc["id"]] = json.dumps(doc, sort_keys=True)
        except (requests.RequestException, ValueError):
            pass
        return out
