"""The watch's CPU per event: `jr2-actors watch` against the official client's bare loop, same fake server.

Each side is a process of its own, so its CPU is its own (the fake cluster runs in this process and writes
the Sandboxes): `python -m jr2_actors watch` printing one JSON line per delivery, and the official client's
`kubernetes.watch.Watch().stream` loop (the baseline LIBRARY-NOTES names) printing the same JSON line per
event. A side's CPU is the sum of its threads' `/proc/<pid>/task/*/schedstat` run time (nanoseconds), read
once its watch is open and again when the last event's line has arrived here: CPU-seconds per event, the
child's idle timers included. Delivery latency is from the write (stamped here as it is made) to the line's
arrival here, the same pipe hop on both sides. A third side (`inproc`'s second row) is the
WatchActor in a process of its own, delivering to one pykka receiver per key that prints the same line.
Loads: bursts of 200 and 2,000 (written in one call) and a
steady 100 writes/s. Rounds alternate the sides; each figure is the median over rounds. Every event must
arrive exactly once (a lost or duplicated one fails the run).

    python -m bench.watch_cpu [--rounds 3] [--quick] [--sides command,official,inproc] [--profile DIR]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import report
from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.watch.identity import annotations_for, labels_for, sandbox_name

NAMESPACE = "jr2"

# The baseline: the official client's bare loop, printing the line `jr2-actors watch` prints for a Sandbox.
OFFICIAL = r"""
import json, sys
from kubernetes import client as k8s, config, watch
api = config.new_client_from_config(config_file=sys.argv[1])
custom = k8s.CustomObjectsApi(api)
w = watch.Watch()
out = sys.stdout
for event in w.stream(custom.list_namespaced_custom_object, "core.jr2.dev", "v1alpha1", sys.argv[2], "sandboxes",
                      label_selector="jr2.dev/run", timeout_seconds=600):
    obj = event["object"]
    meta = obj["metadata"]
    out.write(json.dumps({"delivery": "seen", "name": meta["name"], "uid": meta["uid"],
                          "resourceVersion": meta["resourceVersion"],
                          "phase": (obj.get("status") or {}).get("phase")}) + "\n")
    out.flush()
"""


# The second row of the watch's table: the WatchActor in process, delivering to one receiver per key — a pykka
# actor each, as a Workspace is — that prints the same line. The last run named is the warm-up's: its
# registration is stepped after every other, so once its event arrives every key is registered. As the
# command does, what was built at start is frozen out of the collector's scans.
INPROC = r"""
import gc, json, os, signal, sys, threading
import pykka
from jr2_actors.kube.access import LocalFiles, resolve
from jr2_actors.kube.client import KubeClient
from jr2_actors.watch.actor import Register, SandboxSeen, WatchActor
from jr2_actors.watch.identity import SandboxKey
kubeconfig, namespace, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
out, lock = sys.stdout, threading.Lock()

class Receiver(pykka.ThreadingActor):
    def on_receive(self, message):
        if isinstance(message, SandboxSeen):
            s = message.sandbox
            line = json.dumps({"delivery": "seen", "name": s.name, "uid": s.uid, "resourceVersion": s.resource_version,
                               "phase": s.phase}) + "\n"
            with lock:
                out.write(line)
                out.flush()

client = KubeClient(resolve(os.environ, LocalFiles(), home=None, explicit_path=kubeconfig, context=None))
watch = WatchActor.start(client, namespace=namespace)
for run in runs:
    watch.tell(Register(SandboxKey(run, "F-1"), Receiver.start()))
gc.collect()
gc.freeze()
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())  # the bench's terminate(): a clean stop, as the command's
stop.wait()
pykka.ActorRegistry.stop_all(timeout=10)
client.close()  # its private copy of the kubeconfig's CA goes with it (a killed process would leave it in /tmp)
os._exit(0)
"""


# `--sides command,official,frozen`: the command after `gc.freeze()` of everything imported at start, to see
# what the collector's full scans of the long-lived heap cost per event (docs/benchmarks.md).
FROZEN = r"""
import gc, sys
import jr2_actors.cli as cli
import jr2_actors.commands.common, jr2_actors.kube.client, jr2_actors.watch.actor
gc.collect()
gc.freeze()
sys.exit(cli.main(sys.argv[1:]))
"""


def cpu_seconds(pid: int) -> float:
    """The process's CPU so far: its live threads' run time from schedstat (ns resolution)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9


@dataclass
class Arrivals:
    """The lines one side printed, stamped as each arrived here."""

    expected: set[str]
    at: dict[str, float] = field(default_factory=dict)
    duplicates: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    def expect(self, names: set[str]) -> None:
        """From now on, count these (the warm-up's lines are done with)."""
        self.at, self.duplicates, self.done, self.expected = {}, 0, threading.Event(), names

    def read(self, stream: Any) -> None:
        for line in stream:
            now = time.perf_counter()
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            name = doc.get("name")
            if doc.get("delivery") != "seen" or name not in self.expected:
                continue
            if name in self.at:
                self.duplicates += 1
            else:
                self.at[name] = now
                if len(self.at) == len(self.expected):
                    self.done.set()


@dataclass(frozen=True, slots=True)
class Load:
    label: str
    count: int
    rate: float | None  # writes per second; None: one burst


@dataclass
class Sample:
    cpu_per_event: float
    latencies: list[float]
    lost: int
    duplicated: int


def write(cluster: FakeCluster, names: list[str], runs: list[str], load: Load) -> dict[str, float]:
    """Create the Sandboxes (one call for a burst, paced on an absolute schedule otherwise); their write times."""
    stamps: dict[str, float] = {}

    def create(s: ClusterState, run: str, name: str) -> None:
        stamps[name] = time.perf_counter()
        s.create(SANDBOX, NAMESPACE, {"metadata": {"name": name, "labels": labels_for(run, "b"),
                                                   "annotations": annotations_for(run, "F-1")}}, now=time.time())

    if load.rate is None:
        def burst(s: ClusterState) -> None:
            for run, name in zip(runs, names, strict=True):
                create(s, run, name)
        cluster.call(burst)
        return stamps
    start = time.perf_counter()
    pause = threading.Event()
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        due = start + i / load.rate
        delay = due - time.perf_counter()
        if delay > 0:
            pause.wait(delay)
        cluster.call(functools.partial(create, run=run, name=name))
    return stamps


def measure(side: str, load: Load, tag: str, tmp: str, profile: str | None = None) -> Sample:
    runs = [f"{tag}-{i:05d}" for i in range(load.count)]
    names = [sandbox_name(run, "F-1") for run in runs]
    with FakeCluster(namespace=NAMESPACE, operator=False, harness=False, bookmark_interval=None) as cluster:
        kubeconfig = cluster.write_kubeconfig(f"{tmp}/kubeconfig-{tag}")
        if side == "official":
            argv = [sys.executable, "-c", OFFICIAL, kubeconfig, NAMESPACE]
        elif side == "inproc":
            argv = [sys.executable, "-c", INPROC, kubeconfig, NAMESPACE, *runs, f"warm-{tag}"]
        elif side == "frozen":  # an experiment: the command with what it imported frozen out of the GC's scans
            argv = [sys.executable, "-c", FROZEN, "watch", "--namespace", NAMESPACE, "--kubeconfig", kubeconfig]
        else:
            argv = [sys.executable, "-m", "jr2_actors", "watch", "--namespace", NAMESPACE, "--kubeconfig", kubeconfig]
        with open(f"{tmp}/stderr-{tag}", "w") as err:
            child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        try:
            arrivals = Arrivals({sandbox_name(f"warm-{tag}", "F-1")})
            reader = threading.Thread(target=arrivals.read, args=(child.stdout,), daemon=True)
            reader.start()
            waited = threading.Event()
            deadline = time.monotonic() + 60
            while cluster.watch_stats()["open"] < 1:
                if child.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{side}: the watch did not open (see {tmp}/stderr-{tag})")
                waited.wait(0.01)
            # A warm-up event, awaited, on both sides: the first delivery's lazy imports are not the load's.
            write(cluster, [sandbox_name(f"warm-{tag}", "F-1")], [f"warm-{tag}"], Load("warm", 1, None))
            if not arrivals.done.wait(60):
                raise SystemExit(f"{side}: the warm-up event never arrived (see {tmp}/stderr-{tag})")
            waited.wait(0.3)
            arrivals.expect(set(names))
            spy = None
            if profile:  # py-spy on the child for the load's window (`--profile DIR`): a flame graph per side
                spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record",
                                        "--pid", str(child.pid),
                                        "--threads", "--gil", "--rate", "1000", "--format", "raw",
                                        "-o", f"{profile}/{side}-{load.count}-{tag}.txt"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                waited.wait(1.0)
            before = cpu_seconds(child.pid)
            stamps = write(cluster, names, runs, load)
            arrivals.done.wait(120)
            after = cpu_seconds(child.pid)
            if spy is not None:
                spy.send_signal(2)
                spy.wait(30)
            # Anything late or twice shows within a short grace after the last one.
            waited.wait(0.2)
        finally:
            child.terminate()
            child.wait(10)
    latencies = [arrivals.at[n] - stamps[n] for n in names if n in arrivals.at]
    return Sample((after - before) / load.count, latencies, load.count - len(arrivals.at), arrivals.duplicates)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("nan")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median of each figure")
    parser.add_argument("--quick", action="store_true", help="smaller loads (a steady second instead of five)")
    parser.add_argument("--sides", default="command,official,inproc",
                        help="which sides, comma-separated (command, official, inproc, frozen)")
    parser.add_argument("--only", default="", help="only the loads whose label contains this")
    parser.add_argument("--profile", metavar="DIR", help="py-spy each side's load window into DIR (raw folded stacks)")
    args = parser.parse_args(argv)
    steady = 100 if args.quick else 500
    big = 1000 if args.quick else 2000
    loads: tuple[Load, ...] = (Load("burst of 200", 200, None), Load(f"burst of {big}", big, None),
                               Load(f"steady 100/s ({steady})", steady, 100.0))
    sides = args.sides.split(",")
    loads = tuple(load for load in loads if args.only in load.label)
    rows: list[report.Row] = []
    samples: dict[str, list[float]] = {}
    failed = False
    print(f"{'load':<24}{'side':<10}{'CPU µs/event':>14}{'p50 ms':>10}{'p95 ms':>10}{'lost':>6}{'dup':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        for load in loads:
            got: dict[str, list[Sample]] = {side: [] for side in sides}
            for r in range(args.rounds):
                order = sides if r % 2 == 0 else sides[::-1]  # interleaved: drift falls on both sides
                for side in order:
                    got[side].append(measure(side, load, f"{side[0]}{r}", tmp, args.profile))
            figures: dict[str, tuple[float, float, float]] = {}
            for side in sides:
                s = got[side]
                cpu = statistics.median(x.cpu_per_event for x in s)
                p50 = statistics.median(statistics.median(x.latencies) for x in s)
                q95 = statistics.median(p95(x.latencies) for x in s)
                lost = sum(x.lost for x in s)
                dup = sum(x.duplicated for x in s)
                failed = failed or lost > 0 or dup > 0
                figures[side] = (cpu, p50, q95)
                samples[f"{load.label}: {side}"] = [v * 1000 for x in s for v in x.latencies]
                print(f"{load.label:<24}{side:<10}{cpu * 1e6:>14.1f}{p50 * 1000:>10.2f}{q95 * 1000:>10.2f}"
                      f"{lost:>6}{dup:>5}")
            if "command" in figures and "official" in figures:
                ours, base = figures["command"], figures["official"]
                print(f"{load.label:<24}{'ratio':<10}{ours[0] / base[0]:>14.2f}{ours[1] / base[1]:>10.2f}"
                      f"{ours[2] / base[2]:>10.2f}")
                rows.append(report.Row(f"watch CPU/event, {load.label}", ours[0] * 1e6, base[0] * 1e6, "µs",
                                       "≤ 1.0"))
                rows.append(report.Row(f"watch p95 delivery, {load.label}", ours[2] * 1000, base[2] * 1000, "ms",
                                       "≤ 1.2"))
            if "inproc" in figures and "official" in figures:
                ours, base = figures["inproc"], figures["official"]
                print(f"{load.label:<24}{'ratio in':<10}{ours[0] / base[0]:>14.2f}{ours[1] / base[1]:>10.2f}"
                      f"{ours[2] / base[2]:>10.2f}")
                rows.append(report.Row(f"WatchActor in process CPU/event, {load.label}", ours[0] * 1e6,
                                       base[0] * 1e6, "µs", "≤ 1.2"))
                rows.append(report.Row(f"WatchActor in process p95 delivery, {load.label}", ours[2] * 1000,
                                       base[2] * 1000, "ms", "≤ 1.2"))
    report.emit("watch_cpu", rows, samples=samples)
    if failed:
        raise SystemExit("an event was lost or duplicated")


if __name__ == "__main__":
    main()
