"""Watch delivery latency: the WatchActor against the official client's watch, same fake cluster, same run.

Each Sandbox is stamped at its write (an annotation holding `perf_counter()`), and each side notes when
the event reaches it: the WatchActor when a `SandboxSeen` reaches its registered recipient, the official
client (`kubernetes.watch.Watch().stream`, the baseline LIBRARY-NOTES names) when its generator yields.
Two loads: a burst (all writes at once) and a paced stream (one write every 5 ms). Prints p50/p95/max
and the ratio ours/baseline; record the output in docs/benchmarks.md.

    python bench/watch_latency.py [--burst 2000] [--paced 200]
"""

from __future__ import annotations

import argparse
import statistics
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
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.deliveries import SandboxSeen
from jr2_actors.watch.identity import SandboxKey, annotations_for, labels_for, sandbox_name
from jr2_actors.watch.messages import Register

STAMP = "bench.jr2.dev/t0"


class Collector:
    def __init__(self, expected: int) -> None:
        self.latencies: list[float] = []
        self.done = threading.Event()
        self.expected = expected
        self.lock = threading.Lock()

    def note(self, obj: dict[str, Any]) -> None:
        stamp = (obj.get("metadata", {}).get("annotations") or {}).get(STAMP)
        if stamp is None:
            return
        with self.lock:
            self.latencies.append(time.perf_counter() - float(stamp))
            if len(self.latencies) >= self.expected:
                self.done.set()

    def tell(self, message: Any) -> None:
        if isinstance(message, SandboxSeen):
            self.note(dict(message.object))


def write(cluster: FakeCluster, runs: list[str], pace: float) -> None:
    def create(run: str) -> None:
        def fn(s: ClusterState) -> None:
            annotations = {**annotations_for(run, "F-1"), STAMP: repr(time.perf_counter())}
            s.create(SANDBOX, "jr2", {"metadata": {"name": sandbox_name(run, "F-1"), "labels": labels_for(run, "b"),
                                                   "annotations": annotations}}, now=time.time())
        cluster.call(fn)

    if pace == 0:
        def burst(s: ClusterState) -> None:
            for run in runs:
                annotations = {**annotations_for(run, "F-1"), STAMP: repr(time.perf_counter())}
                s.create(SANDBOX, "jr2", {"metadata": {"name": sandbox_name(run, "F-1"),
                                                       "labels": labels_for(run, "b"), "annotations": annotations}},
                         now=time.time())
        cluster.call(burst)
        return
    for run in runs:
        create(run)
        threading.Event().wait(pace)


def ours(n: int, pace: float, tag: str) -> list[float]:
    with FakeCluster(operator=False, harness=False, bookmark_interval=None) as cluster:
        collector = Collector(n)
        ref = WatchActor.start(cluster.client())
        runs = [f"{tag}-{i:05d}" for i in range(n)]
        for run in runs:
            ref.tell(Register(SandboxKey(run, "F-1"), collector))
        waited = threading.Event()
        while cluster.watch_stats()["open"] < 1:
            waited.wait(0.01)
        write(cluster, runs, pace)
        if not collector.done.wait(120):
            raise SystemExit(f"ours: only {len(collector.latencies)} of {n} delivered")
        ref.stop(block=True, timeout=10)
        return collector.latencies


def baseline(n: int, pace: float, tag: str) -> list[float]:
    with FakeCluster(operator=False, harness=False, bookmark_interval=None) as cluster, \
            tempfile.TemporaryDirectory() as tmp:
        api = config.new_client_from_config(config_file=cluster.write_kubeconfig(f"{tmp}/kubeconfig"))
        custom = k8s.CustomObjectsApi(api)
        collector = Collector(n)
        rv = str(cluster.resource_version)
        w = watch.Watch()

        def read() -> None:
            for event in w.stream(custom.list_namespaced_custom_object, "core.jr2.dev", "v1alpha1", "jr2",
                                  "sandboxes", resource_version=rv, label_selector="jr2.dev/run",
                                  timeout_seconds=240):
                collector.note(event["object"])
                if collector.done.is_set():
                    w.stop()

        threading.Thread(target=read, daemon=True).start()
        waited = threading.Event()
        while cluster.watch_stats()["open"] < 1:
            waited.wait(0.01)
        write(cluster, [f"{tag}-{i:05d}" for i in range(n)], pace)
        if not collector.done.wait(120):
            raise SystemExit(f"baseline: only {len(collector.latencies)} of {n} delivered")
        w.stop()
        api.close()
        return collector.latencies


def summary(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return p50 * 1000, p95 * 1000, ordered[-1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--paced", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median of each figure")
    args = parser.parse_args()
    print(f"{'load':<22}{'side':<12}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}")
    loads = ((f"burst of {args.burst}", args.burst, 0.0), (f"{args.paced} paced 5 ms", args.paced, 0.005))
    for label, n, pace in loads:
        mine_rounds, base_rounds = [], []
        for r in range(args.rounds):  # alternate, so drift on the machine falls on both sides
            mine_rounds.append(summary(ours(n, pace, f"o{r}")))
            base_rounds.append(summary(baseline(n, pace, f"b{r}")))
        mine = tuple(statistics.median(x[i] for x in mine_rounds) for i in range(3))
        base = tuple(statistics.median(x[i] for x in base_rounds) for i in range(3))
        for side, (p50, p95, top) in (("WatchActor", mine), ("official", base)):
            print(f"{label:<22}{side:<12}{p50:>10.2f}{p95:>10.2f}{top:>10.2f}")
        ratios = [m / b if b else float("nan") for m, b in zip(mine, base, strict=True)]
        print(f"{label:<22}{'ratio':<12}{ratios[0]:>10.2f}{ratios[1]:>10.2f}{ratios[2]:>10.2f}")


if __name__ == "__main__":
    main()
