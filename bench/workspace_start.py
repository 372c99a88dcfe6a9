"""Starting 40 Workspaces: the actors (one watch, in-process client) against what ADR-0063 replaced — a
`kubectl` process per call, polling `get` every second until Ready — on the same fake cluster, same run.

Figures: wall time until every Sandbox is Ready (ours: Running, i.e. attached too) and CPU seconds spent
by this process and its children (the fake cluster runs in-process on both sides, so both include it).
The baseline needs kubectl on PATH; without it only our side is printed.

    python bench/workspace_start.py [--n 40]
    python bench/workspace_start.py --scale 5000 [--window 30]

`--scale N` (issue 18 item 7) starts N Workspaces as serve's orchestrator would (its pools' sizes, one timer
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
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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

try:  # the lane exists from issue 18 on; the bench also runs on a tree from before it, for the "before" figure
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


def baseline(n: int, kubectl: str) -> tuple[float, float]:
    with FakeCluster(nodes=NODES, start_seconds=0.5, harness=False, bookmark_interval=None) as cluster, \
            tempfile.TemporaryDirectory() as tmp:
        cfg = cluster.write_kubeconfig(f"{tmp}/kubeconfig")
        env = {"KUBECONFIG": cfg, "HOME": tmp, "PATH": "/usr/bin:/bin"}

        def one(i: int) -> None:
            s = spec(i, "b")
            body = {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", **sandbox_body(s, b"k" * 32, time.time())}
            subprocess.run([kubectl, "apply", "--server-side", "--field-manager=jr2", "-f", "-"],
                           input=json.dumps(body), env=env, capture_output=True, text=True, check=True)
            while True:  # the old provisioning loop: `get sandbox` every second
                out = subprocess.run([kubectl, "get", "sandboxes.core.jr2.dev", s.name, "-o", "json"], env=env,
                                     capture_output=True, text=True, check=True).stdout
                if (json.loads(out).get("status") or {}).get("phase") == "Ready":
                    return
                threading.Event().wait(1.0)

        c0, t0 = cpu(), time.perf_counter()
        with ThreadPoolExecutor(n) as workers:
            list(workers.map(one, range(n)))
        return time.perf_counter() - t0, cpu() - c0


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
            out["lane_queued"] = len(lane._queue)
            while lane._queue:
                time.sleep(0.5)
            out["lane_drained_s"] = round(time.perf_counter() - t0, 1)
            time.sleep(2.0)
        idle = idle_cpu(5.0)
        renewals(cluster)
        actors = [ref._actor_weakref() for ref in refs]  # in process: a bench's reach into each actor
        now = time.monotonic()
        for i, actor in enumerate(actors):  # every renewal due within the window, spread over it
            assert isinstance(actor, WorkspaceActor)
            actor.core._lease_interval = window
            actor.core._lease_due = now + window * i / n
        for ref in refs:
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
    base = baseline(args.n, kubectl)
    print(f"{'kubectl + 1 s polling':<28}{base[0]:>10.2f}{base[1]:>10.2f}")
    print(f"{'ratio':<28}{mine[0] / base[0]:>10.2f}{mine[1] / base[1]:>10.2f}")


if __name__ == "__main__":
    main()
