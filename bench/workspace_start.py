"""Starting 40 Workspaces: the actors (one watch, in-process client) against what ADR-0063 replaced — a
`kubectl` process per call, polling `get` every second until Ready — on the same fake cluster, same run.

Figures: wall time until every Sandbox is Ready (ours: Running, i.e. attached too) and CPU seconds spent
by this process and its children (the fake cluster runs in-process on both sides, so both include it).
The baseline needs kubectl on PATH; without it only our side is printed.

    python bench/workspace_start.py [--n 40]
"""

from __future__ import annotations

import argparse
import json
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
from jr2_actors.shell import Timers
from jr2_actors.values.workflow import WorkspaceDef
from jr2_actors.watch.actor import WatchActor
from jr2_actors.workspace.actor import WorkspaceActor
from jr2_actors.workspace.manifest import WorkspaceSpec, sandbox_body
from jr2_actors.workspace.messages import Running

NODES = [Node("n1", 32_000, 64 * 2**30), Node("n2", 32_000, 64 * 2**30)]


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40)
    args = parser.parse_args()
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
