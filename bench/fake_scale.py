"""The fake cluster at kwok's scale: `FakeCluster(nodes=1000)` holding 10,000 Sandboxes with 10 watchers.

Measures, in one run:
- the fixture's start-up: `FakeCluster(namespace="jr2")` started and stopped as the `jr2_fake_cluster` fixture
  does, the first time in the process and each time after;
- placing: 10,000 Sandboxes (100m cpu, 256Mi each) written in process, until the operator has placed every
  one over the 1,000 nodes;
- memory per object: the process's resident memory before the writes and after every one is placed, over
  10,000 (store, history, the operator's model and the watch caches together);
- a list of 10,000 through the official client (HTTPS, JSON decode), and a GET of one while all that is held;
- the watch fan-out: 10 official-client watches on the Sandboxes; a write stamped with `perf_counter()`,
  then the time until each of the 10 has it (p50 and max over the 10, over paced writes).

    python bench/fake_scale.py [--nodes 1000] [--sandboxes 10000] [--watchers 10] [--writes 50]

Record the output in docs/benchmarks.md (machine, date, command). Nothing here is asserted by a test.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client as k8s
from kubernetes import config, watch

from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.kinds import SANDBOX

STAMP = "bench.jr2.dev/t0"
GROUP, VERSION, NS, PLURAL = "core.jr2.dev", "v1alpha1", "jr2", "sandboxes"
BATCH = 500


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


COLD = ("import time; t = time.perf_counter(); from jr2_actors.fake.cluster import FakeCluster; "
        "c = FakeCluster(namespace='jr2').start(); print(time.perf_counter() - t); c.stop()")


def cold_start() -> float:
    """The first test's start-up in a fresh process: importing the fake cluster, then starting it."""
    out = subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent, timeout=120)
    return float(out.stdout.strip().splitlines()[-1])


def startups(count: int) -> list[float]:
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        cluster = FakeCluster(namespace=NS).start()
        times.append(time.perf_counter() - t0)
        cluster.stop()
    return times


def body(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"s-{i:05d}", "labels": {"jr2.dev/run": f"r{i % 100}"}},
            "spec": {"port": 8080, "podResources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}}


def write_all(cluster: FakeCluster, count: int) -> None:
    for start in range(0, count, BATCH):
        def batch(state: ClusterState, start: int = start) -> None:
            for i in range(start, min(start + BATCH, count)):
                state.create(SANDBOX, NS, body(i), now=time.time())
        cluster.call(batch)


def counted(cluster: FakeCluster, phase: str | None = None) -> int:
    """How many Sandboxes have a node (or, with `phase`, are in it)."""
    def count(s: ClusterState) -> int:
        statuses = [o.get("status") or {} for o in s.objects(SANDBOX)]
        return sum(1 for st in statuses if (st.get("phase") == phase if phase else st.get("node")))
    return cluster.call(count)


class Watcher:
    """One official-client watch: when each stamped write reached it."""

    def __init__(self, custom: k8s.CustomObjectsApi, rv: str) -> None:
        self.arrived: dict[str, float] = {}
        self.lock = threading.Lock()
        self.watch = watch.Watch()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(custom, rv), daemon=True)
        self.thread.start()

    def run(self, custom: k8s.CustomObjectsApi, rv: str) -> None:
        try:
            for event in self.watch.stream(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                                           resource_version=rv, timeout_seconds=600):
                stamp = (event["object"]["metadata"].get("annotations") or {}).get(STAMP)
                if stamp is not None:
                    with self.lock:
                        self.arrived.setdefault(stamp, time.perf_counter())
        except Exception:  # noqa: S110 - the cluster stops under it at the end
            pass


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--sandboxes", type=int, default=10_000)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--writes", type=int, default=50)
    args = parser.parse_args()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · {when}")

    cold = statistics.median(cold_start() for _ in range(3))
    times = startups(6)
    print(f"fixture start-up: the first test in a fresh process (import + start) {cold * 1000:.0f} ms (median of 3); "
          f"in a process that has it imported, first {times[0] * 1000:.0f} ms, each after: "
          f"{', '.join(f'{t * 1000:.0f}' for t in times[1:])} ms (median {statistics.median(times[1:]) * 1000:.0f})")

    with FakeCluster(namespace=NS, nodes=args.nodes, bookmark_interval=None) as cluster, \
            tempfile.TemporaryDirectory() as tmp:
        gc.collect()
        before = rss_bytes()
        t0 = time.perf_counter()
        write_all(cluster, args.sandboxes)
        written = time.perf_counter() - t0
        while counted(cluster) < args.sandboxes:
            threading.Event().wait(0.2)
        all_placed = time.perf_counter() - t0
        while counted(cluster, "Ready") < args.sandboxes:  # the operator's Ready wave ends before measuring
            threading.Event().wait(0.2)
        all_ready = time.perf_counter() - t0
        gc.collect()
        per_object = (rss_bytes() - before) / args.sandboxes
        nodes_used = cluster.call(lambda s: len({(o.get("status") or {}).get("node") for o in s.objects(SANDBOX)}))
        print(f"{args.sandboxes} Sandboxes written in process in {written:.2f} s; all placed (over {nodes_used} of "
              f"{args.nodes} nodes) {all_placed:.2f} s and all Ready {all_ready:.2f} s after the first write")
        print(f"memory: {per_object / 1024:.1f} KiB resident per Sandbox (RSS delta / {args.sandboxes}, "
              "store + history + operator model + Harness)")

        api = config.new_client_from_config(config_file=cluster.write_kubeconfig(f"{tmp}/kubeconfig"))
        custom = k8s.CustomObjectsApi(api)
        lists = []
        for _ in range(3):
            t = time.perf_counter()
            doc = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)
            lists.append(time.perf_counter() - t)
            assert len(doc["items"]) == args.sandboxes
        t = time.perf_counter()
        cluster.call(lambda s: s.list_objects(SANDBOX, NS))
        in_process = time.perf_counter() - t
        print(f"list of {args.sandboxes} through the official client: median {statistics.median(lists):.2f} s "
              f"(runs {', '.join(f'{x:.2f}' for x in lists)}); the store's own list {in_process * 1000:.0f} ms")

        rv = str(cluster.resource_version)
        watchers = [Watcher(custom, rv) for _ in range(args.watchers)]
        opened = time.perf_counter() + 30
        while cluster.watch_stats()["open"] < args.watchers + 2 and time.perf_counter() < opened:
            threading.Event().wait(0.05)  # the operator's and the Harness's watches are open already
        fanout_max: list[float] = []
        fanout_p50: list[float] = []
        gets: list[float] = []
        for n in range(args.writes):
            stamp = f"{n}"
            t_write = time.perf_counter()
            custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, f"s-{n:05d}",
                                                  {"metadata": {"annotations": {STAMP: stamp}}})
            deadline = t_write + 30
            while time.perf_counter() < deadline:
                with_it = [w.arrived.get(stamp) for w in watchers]
                if all(x is not None for x in with_it):
                    break
                threading.Event().wait(0.0005)
            delays = [(x - t_write) * 1000 for x in with_it if x is not None]
            fanout_max.append(max(delays) if len(delays) == len(watchers) else float("inf"))
            fanout_p50.append(statistics.median(delays))
            t = time.perf_counter()
            custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, f"s-{args.sandboxes - 1 - n:05d}")
            gets.append((time.perf_counter() - t) * 1000)
            threading.Event().wait(0.02)
        print(f"watch fan-out to {args.watchers} watchers over {args.writes} paced writes (write sent → event "
              f"decoded by the watcher): median of the per-write p50 {statistics.median(fanout_p50):.1f} ms, "
              f"median of the per-write max {statistics.median(fanout_max):.1f} ms, worst {max(fanout_max):.1f} ms")
        print(f"GET of one Sandbox meanwhile: p50 {statistics.median(gets):.1f} ms, p95 {pct(gets, 0.95):.1f} ms")
        for w in watchers:
            w.watch.stop()
        api.close()


if __name__ == "__main__":
    main()
