"""Starting 40 Workspaces: the actors (one watch, in-process client) against what ADR-0063 replaced — a
`kubectl` process per call, polling `get` every second until Ready — on the same fake cluster, same run.

Figures: wall time until every Sandbox is Ready (ours: Running, i.e. attached too) and CPU seconds spent
by this process and its children (the fake cluster runs in-process on both sides, so both include it).
The baseline needs kubectl on PATH; without it only our side is printed.

    python bench/workspace_start.py [--n 40] [--rounds 3]
    python bench/workspace_start.py --scale 5000 [--window 30]

The default run also starts the N Workspaces through `jr2-actors serve` as a real process (as
`bench/serve_runs.py` launches it: N runs submitted over its API, each holding one Workspace), from the first
submit until its `/metrics` counts N Workspaces running, interleaved round by round with the kubectl baseline
on a fake cluster of its own. For both: the orchestrator's CPU-seconds alone (serve's, from
/proc; the kubectl processes' plus the threads that ran them — never the in-process fake's), its peak threads
(serve's; the live kubectl processes' summed), and its peak TCP connections to the fake API server and to the
Harness, counted by the fake's servers at accept and close (`FakeCluster.connections`), so a short
`kubectl` call's connection is never missed. Medians over `--rounds`.

`--scale N` starts N Workspaces as serve's orchestrator would (its pools' sizes, one timer
thread, the renewal lane where the tree has one) and prints: seconds to every one Running, peak RSS and
threads of this process (the fake cluster's included: it runs here), the renewals still queued on the lane
then, and the Lease renewals' CPU. For that, once all are Running and the lane is empty, each Workspace's next
renewal is pulled into the next `--window` seconds (its interval set to the window, its due time spread over
it, and a tick told so its timer is re-armed): CPU over the window less this process's idle CPU, over the
renewal PATCHes the fake logged, is a renewal's cost, and at the real 5-minute interval N of them take
`cost × N / 300` of a core. The baseline is a bare merge patch of the same Lease from one thread with the
Workspaces stopped (their watch still open), CPU per call.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import serve_runs
from bench.report import Row, emit
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.shell import Timers
from jr2_actors.shell.pools import CountedPool
from jr2_actors.values.constants import LEASE_INTERVAL_SECONDS
from jr2_actors.values.workflow import WorkspaceDef
from jr2_actors.watch.actor import WatchActor
from jr2_actors.workspace.actor import WorkspaceActor
from jr2_actors.workspace.manifest import WorkspaceSpec, lease_patch, sandbox_body
from jr2_actors.workspace.messages import Running

try:  # the lane is not in older trees; the bench also runs on a tree from before it, for the "before" figure
    from jr2_actors.workspace.renewals import RenewalLane
except ImportError:  # pragma: no cover
    RenewalLane = None  # type: ignore[assignment,misc]

NODES = [Node("n1", 32_000, 64 * 2**30), Node("n2", 32_000, 64 * 2**30)]


def own_cpu() -> float:
    """This process's CPU alone (not a profiler's, which is a child)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def spec(i: int, tag: str) -> WorkspaceSpec:
    return WorkspaceSpec(f"{tag}-run-{i:03d}", "bench", WorkspaceDef("F-1", cpu="500m", memory="512Mi"), image="i")


class Counter:
    def __init__(self, n: int) -> None:
        self.n, self.seen, self.done, self.lock = n, 0, threading.Event(), threading.Lock()

    def tell(self, message: object) -> None:
        if isinstance(message, Running):
            with self.lock:
                self.seen += 1
                if self.seen == self.n:
                    self.done.set()


def ours(n: int) -> tuple[float, float]:
    with FakeCluster(nodes=NODES, start_seconds=0.5, bookmark_interval=None) as cluster:
        client = cluster.client()
        watch = WatchActor.start(client)
        pool, attach, timers, counter = ThreadPoolExecutor(8), ThreadPoolExecutor(4), Timers(), Counter(n)
        c0, t0 = cpu(), time.perf_counter()
        refs = [WorkspaceActor.start(spec(i, "o"), client=client, watch=watch, parent=counter,
                                     signing_key=cluster.signing_key, kube_pool=pool, attach_pool=attach,
                                     timers=timers) for i in range(n)]
        if not counter.done.wait(120):
            raise SystemExit(f"ours: {counter.seen} of {n} running")
        wall, used = time.perf_counter() - t0, cpu() - c0
        for ref in refs:
            ref.stop(block=True, timeout=10)
        watch.stop(block=True, timeout=10)
        pool.shutdown()
        attach.shutdown()
        timers.stop()
        return wall, used


class Peaks:
    """Peak threads of an orchestrator, sampled every 20 ms on a thread: `threads()` is the side's count now."""

    def __init__(self, threads: Any) -> None:
        self.threads, self.peak, self.peak_procs = threads, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            count, procs = self.threads()
            self.peak, self.peak_procs = max(self.peak, count), max(self.peak_procs, procs)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


def threads_of(pid: int) -> int:
    """The process's threads now (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^Threads:\s+(\d+)", status, re.M)
    return int(found.group(1)) if found else 0


def children_cpu() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def baseline(n: int, kubectl: str) -> dict[str, float]:
    """ADR-0063's baseline: a `kubectl apply` per Workspace, then `kubectl get` every second until Ready, each
    Workspace on a thread of its own (the 36 concurrent processes ADR-0063 measured). `cpu_s` counts this
    process too (the in-process fake's included, as `ours` does); `orch_cpu_s` only the kubectl processes
    and the threads that ran them."""
    with FakeCluster(nodes=NODES, start_seconds=0.5, harness=False, bookmark_interval=None) as cluster, \
            tempfile.TemporaryDirectory() as tmp:
        cfg = cluster.write_kubeconfig(f"{tmp}/kubeconfig")
        env = {"KUBECONFIG": cfg, "HOME": tmp, "PATH": "/usr/bin:/bin"}
        live: set[int] = set()
        lock = threading.Lock()
        thread_cpu: list[float] = []

        def kube(args: list[str], stdin: str | None = None) -> str:
            proc = subprocess.Popen([kubectl, *args], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            with lock:
                live.add(proc.pid)
            try:
                out, err = proc.communicate(stdin)
            finally:
                with lock:
                    live.discard(proc.pid)
            if proc.returncode:
                raise RuntimeError(f"kubectl {args[0]}: {err.strip()}")
            return out

        def one(i: int) -> None:
            t = time.thread_time()
            s = spec(i, "b")
            body = {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", **sandbox_body(s, b"k" * 32, time.time())}
            kube(["apply", "--server-side", "--field-manager=jr2", "-f", "-"], json.dumps(body))
            while True:  # the old provisioning loop: `get sandbox` every second
                out = kube(["get", "sandboxes.core.jr2.dev", s.name, "-o", "json"])
                if (json.loads(out).get("status") or {}).get("phase") == "Ready":
                    break
                threading.Event().wait(1.0)
            with lock:
                thread_cpu.append(time.thread_time() - t)

        def count() -> tuple[int, int]:
            with lock:
                pids = list(live)
            return sum(threads_of(p) for p in pids), len(pids)

        cluster.connections(reset_peak=True)
        c0, k0, t0 = cpu(), children_cpu(), time.perf_counter()
        peaks = Peaks(count)
        with ThreadPoolExecutor(n) as workers:
            list(workers.map(one, range(n)))
        wall, used, kids = time.perf_counter() - t0, cpu() - c0, children_cpu() - k0
        peaks.stop()
        return {"wall_s": wall, "cpu_s": used, "orch_cpu_s": kids + sum(thread_cpu), "threads": peaks.peak,
                "processes": peaks.peak_procs, "api_conns": cluster.connections()["api"][1], "harness_conns": 0}


def workflow(cpu_: str = "500m", memory: str = "512Mi") -> dict[str, Any]:
    """bench/serve_runs.py's workflow (one Workspace held an hour) at this bench's Workspace size."""
    doc: dict[str, Any] = json.loads(json.dumps(serve_runs.WORKFLOW))
    doc["workspaces"]["W"]["size"] = {"cpu": cpu_, "memory": memory}
    return doc


def running(session: requests.Session, url: str) -> int:
    """Workspaces running, as serve's `/metrics` counts them."""
    text = session.get(url + "/metrics", timeout=30).text
    found = re.search(r'^jr2_workspaces\{phase="running"\} ([\d.]+)$', text, re.M)
    return int(float(found.group(1))) if found else 0


def through_serve(n: int) -> dict[str, float]:
    """N runs submitted to `jr2-actors serve` (a process of its own on the fake's kubeconfig, as
    bench/serve_runs.py runs it), each holding one Workspace: from the first submit until serve's `/metrics`
    counts N running (placed, provisioned, attached). Serve's CPU, threads and connections alone."""
    tmp = Path(tempfile.mkdtemp(prefix="jr2-bench-ws-serve-"))
    try:
        with FakeCluster(nodes=NODES, start_seconds=0.5, bookmark_interval=None) as cluster:
            proc, url, lines = serve_runs.serve(tmp, cluster.write_kubeconfig(str(tmp / "kubeconfig")))
            try:
                session = requests.Session()
                session.headers["Authorization"] = f"Bearer {serve_runs.TOKEN}"
                probe = requests.Session()  # the /metrics polls, on a connection of their own
                time.sleep(1.0)  # serve's start-up (its first list and watch) behind it
                at_rest, threads_at_rest = cluster.connections(reset_peak=True), threads_of(proc.pid)
                sampler = serve_runs.Sampler(proc.pid)
                c0, t0 = sampler.cpu(), time.perf_counter()
                peaks = Peaks(lambda: (threads_of(proc.pid), 1))
                body = {"workflow": workflow()}
                with ThreadPoolExecutor(8) as pool:
                    codes = list(pool.map(lambda _: session.post(url + "/runs", json=body, timeout=60).status_code,
                                          range(n)))
                if any(c != 201 for c in codes):
                    raise SystemExit(f"serve: submits answered {sorted(set(codes))}")
                while running(probe, url) < n:
                    if time.perf_counter() - t0 > 120:
                        raise SystemExit("serve: not all running in 120 s:\n" + "".join(lines[-20:]))
                    time.sleep(0.1)
                wall, used = time.perf_counter() - t0, sampler.cpu() - c0
                peaks.stop()
                sampler.stop()
                conns = cluster.connections()
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
            return {"wall_s": wall, "orch_cpu_s": used, "threads": peaks.peak, "threads_at_rest": threads_at_rest,
                    "api_conns": conns["api"][1], "api_conns_at_rest": at_rest["api"][0],
                    "api_conns_after": conns["api"][0], "harness_conns": conns["harness"][1],
                    "rss_mib": sampler.peak["rss_mib"]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def idle_cpu(seconds: float) -> float:
    """This process's CPU as a share of a core over `seconds` of doing nothing."""
    c0, t0 = own_cpu(), time.perf_counter()
    time.sleep(seconds)
    return (own_cpu() - c0) / (time.perf_counter() - t0)


def renewals(cluster: FakeCluster) -> int:
    return sum(1 for r in cluster.requests(clear=True) if r.get("method") == "PATCH"
               and "merge-patch" in str(r.get("content_type") or r.get("contentType") or ""))


def scale(n: int, window: float, profile: str = "") -> dict[str, float]:
    nodes = [Node(f"n{i}", 10_000_000, 2**44) for i in range(4)]
    with FakeCluster(nodes=nodes, start_seconds=0.05, bookmark_interval=None, quota=None) as cluster:
        client = cluster.client()
        watch = WatchActor.start(client)
        kube, attach = (CountedPool(k, thread_name_prefix=f"jr2-{name}") for k, name in ((12, "kube"), (8, "attach")))
        timers, counter = Timers(name="jr2-run-timers"), Counter(n)
        lane = RenewalLane() if RenewalLane is not None else None  # serve's one renewal lane, where it has one
        options = {} if lane is None else {"renewals": lane}
        t0 = time.perf_counter()
        refs = [WorkspaceActor.start(spec(i, "s"), client=client, watch=watch, parent=counter,
                                     signing_key=cluster.signing_key, kube_pool=kube, attach_pool=attach,
                                     timers=timers, **options) for i in range(n)]
        if not counter.done.wait(600):
            raise SystemExit(f"scale: {counter.seen} of {n} running")
        out: dict[str, float] = {"to_running_s": round(time.perf_counter() - t0, 1)}
        # The last attaches' tails, and every first renewal (due within a fifth of the interval of the start):
        # the idle share below must see none of them.
        time.sleep(max(2.0, LEASE_INTERVAL_SECONDS / 5 + 5 - (time.perf_counter() - t0)))
        out["threads"] = threading.active_count()
        if lane is not None:  # the first renewals still queued on the lane (the start's writes went first)
            out["lane_queued"] = len(lane._ready)
            while lane._ready:
                time.sleep(0.5)
            out["lane_drained_s"] = round(time.perf_counter() - t0, 1)
            time.sleep(2.0)
        idle = idle_cpu(5.0)
        renewals(cluster)
        actors = [ref._actor_weakref() for ref in refs]  # in process: a bench's reach into each actor
        now = time.monotonic()
        for i, actor in enumerate(actors):  # every renewal due within the window, spread over it
            assert isinstance(actor, WorkspaceActor)
            if lane is None:  # a tree whose core keeps the due times
                actor.core._lease_interval = window
                actor.core._lease_due = now + window * i / n
            elif actor._lease is not None:  # the lane keeps them: each Lease handed to it again, due in the window
                uid, lease = actor._lease
                lane.take_back(lease)
                actor._lease = (uid, lane.hold(lease.key, lease.renew, now + window * i / n, window))
        for ref in refs if lane is None else ():
            ref.tell(workspace_tick())
        c0, t1 = own_cpu(), time.perf_counter()
        spy = None if not profile else subprocess.Popen(
            [shutil.which("py-spy") or "py-spy", "record", "--threads", "--nonblocking", "-r", "100",
             "-d", str(int(window) - 1), "-f", "raw", "-o", profile, "--pid", str(os.getpid())],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(window)
        if spy is not None:
            spy.wait()
        used, spent = own_cpu() - c0, time.perf_counter() - t1
        done = renewals(cluster)
        per = (used - idle * spent) / max(done, 1)
        out.update(renewals=done, idle_share=round(idle, 4), renewal_ms=round(1000 * per, 2),
                   renewal_share_at_5min=round(per * n / LEASE_INTERVAL_SECONDS, 4))
        print(out, flush=True)  # the figures so far, whatever the stop below meets on a loaded machine
        uids = [actor.core.uid for actor in actors if isinstance(actor, WorkspaceActor)]
        stopping = [ref.stop(block=False) for ref in refs]  # all asked at once, then waited for
        for future in stopping:
            future.get(timeout=120)
        calls = min(n, 2000)
        c0 = own_cpu()
        for i in range(calls):
            client.merge_patch(SANDBOX, spec(i, "s").name, lease_patch(time.time(), uids[i]))
        bare = (own_cpu() - c0) / calls
        out.update(bare_patch_ms=round(1000 * bare, 2), ratio=round(per / bare, 2), peak_rss_mib=round(peak_rss_mib()))
        watch.stop(block=True, timeout=10)
        for pool in (kube, attach):
            pool.shutdown()
        if lane is not None:
            lane.shutdown()
        timers.stop()
        return out


def workspace_tick() -> object:
    from jr2_actors.workspace.actor import _Tick
    return _Tick()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3, help="serve / kubectl rounds, interleaved (medians)")
    parser.add_argument("--scale", type=int, default=0, help="N Workspaces: to Running, RSS, threads, renewals")
    parser.add_argument("--window", type=float, default=30.0, help="--scale: seconds the renewals are spread over")
    parser.add_argument("--profile", default="", help="--scale: py-spy raw stacks of the renewal window to this file")
    args = parser.parse_args()
    if args.scale:
        print(scale(args.scale, args.window, args.profile), flush=True)
        return
    mine = ours(args.n)
    print(f"{'side':<28}{'wall s':>10}{'CPU s':>10}")
    print(f"{'actors (to Running)':<28}{mine[0]:>10.2f}{mine[1]:>10.2f}")
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("kubectl not on PATH: no baseline")
        return
    served, bases = [], []
    for _ in range(args.rounds):  # interleaved: each pair under the same load
        served.append(through_serve(args.n))
        bases.append(baseline(args.n, kubectl))
    base = {k: statistics.median(b[k] for b in bases) for k in bases[0]}
    srv = {k: statistics.median(r[k] for r in served) for k in served[0]}
    print(f"{'kubectl + 1 s polling':<28}{base['wall_s']:>10.2f}{base['cpu_s']:>10.2f}")
    print(f"{'ratio':<28}{mine[0] / base['wall_s']:>10.2f}{mine[1] / base['cpu_s']:>10.2f}")
    print(f"\n{args.n} Workspaces through serve against kubectl polling, medians of {args.rounds} interleaved rounds "
          "(the orchestrator alone: CPU, threads, TCP connections to the fake API server / its Harness):")
    heads = ("wall s", "CPU s", "threads", "API conns", "Harness conns")
    keys = ("wall_s", "orch_cpu_s", "threads", "api_conns", "harness_conns")
    print(f"{'side':<28}" + "".join(f"{h:>14}" for h in heads))
    print(f"{'serve (to Running)':<28}" + "".join(f"{srv[k]:>14.2f}" for k in keys))
    print(f"{'kubectl + 1 s polling':<28}" + "".join(f"{base[k]:>14.2f}" for k in keys))
    print(f"{'serve ratio':<28}" + "".join(f"{srv[k] / base[k]:>14.2f}" if base[k] else f"{'-':>14}" for k in keys))
    print(f"serve: threads at rest {srv['threads_at_rest']:.0f}; API connections open at rest "
          f"{srv['api_conns_at_rest']:.0f}, after {srv['api_conns_after']:.0f}; "
          f"peak RSS {srv['rss_mib']:.0f} MiB. kubectl: peak {base['processes']:.0f} processes at once.")
    print("rounds:", json.dumps({side: [{k: round(v, 3) for k, v in r.items()} for r in rs]
                                 for side, rs in (("serve", served), ("kubectl", bases))}))
    emit("workspace_start", [
        Row(f"{args.n} Workspaces in process, CPU s vs kubectl (both with the fake)", mine[1], base["cpu_s"], "s"),
        Row(f"{args.n} Workspaces in process, wall s vs kubectl", mine[0], base["wall_s"], "s"),
        Row(f"{args.n} Workspaces through serve, CPU s vs kubectl", srv["orch_cpu_s"], base["orch_cpu_s"], "s",
            "≤ 0.1"),
        Row(f"{args.n} Workspaces through serve, wall s vs kubectl", srv["wall_s"], base["wall_s"], "s"),
        Row(f"{args.n} Workspaces through serve, peak API connections", srv["api_conns"], base["api_conns"], "",
            "≤ 13 ours"),
        Row(f"{args.n} Workspaces through serve, peak threads", srv["threads"], base["threads"], ""),
    ])

if __name__ == "__main__":
    main()
