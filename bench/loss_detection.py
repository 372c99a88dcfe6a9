"""Loss detection: a Sandbox evicted → the run's feed shows `workspace.lost`, against a bare watch's delivery of
the same event, the same eviction, the same process.

The Orchestrator runs one-Workspace runs on the fake cluster whose agent hangs (they stay running); each trial
evicts one run's Sandbox (the fake operator turns it `Lost`, as the kubelet's eviction does) and times, from
the eviction's write, (a) the run's feed publishing `workspace.lost` (the WatchActor's delivery, the
WorkspaceActor's step, the RunActor's step, the feed hub) and (b) the official client's bare
`watch.Watch().stream` loop, on a thread of this process, seeing the object's phase `Lost`. Runs are started in
batches (one round each) and evicted one at a time, each trial waiting for both sides. Prints p50/p99 of both
and the ratios.

    python -m bench.loss_detection [--trials 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client as k8s
from kubernetes import config, watch

from bench import report
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Action as HarnessAction
from jr2_actors.fake.harness.core import Hang, Say
from jr2_actors.fake.operator.core import Node
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run.feedlines import EventLine
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.identity import sandbox_name

HANGING = """
name: hang
workspaces:
  W: {size: {cpu: "1", memory: "1Gi"}}
agents:
  worker: {instructions: "You work.", workspace: W, access: write}
start: work
states:
  work:
    holds: [W]
    turn: {agent: worker, prompt: "Work."}
    on: {never: done}
  done: {final: done}
"""


class Stamps:
    """When each side first saw each Sandbox lost (perf_counter), under one condition."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.feed: dict[str, float] = {}  # run id → the feed's workspace.lost
        self.bare: dict[str, float] = {}  # Sandbox name → the bare watch's Lost

    def both(self, run_id: str, name: str) -> bool:
        return run_id in self.feed and name in self.bare

    def note(self, side: dict[str, float], key: str) -> None:
        now = time.perf_counter()
        with self.cond:
            side.setdefault(key, now)
            self.cond.notify_all()


def read_feed(orch: Orchestrator, run_id: str, stamps: Stamps) -> threading.Thread:
    """A reader of the run's feed, as the API's event stream is one: it stamps the `workspace.lost` line."""
    got = orch.feed(run_id, 0, 0.0)
    after = got.events[-1].id if got is not None and got.events else 0

    def read() -> None:
        nonlocal after
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = orch.feed(run_id, after, 1.0)
            if got is None:
                return
            for e in got.events:
                after = e.id
                if isinstance(e.line, EventLine) and e.line.event == "workspace.lost":
                    stamps.note(stamps.feed, run_id)
                    return
            if got.finished:
                return

    thread = threading.Thread(target=read, name="bench-feed-reader", daemon=True)
    thread.start()
    return thread


def bare_watch(kubeconfig: str, stamps: Stamps, stop: threading.Event) -> threading.Thread:
    api = config.new_client_from_config(config_file=kubeconfig)
    custom = k8s.CustomObjectsApi(api)
    w = watch.Watch()

    def read() -> None:
        while not stop.is_set():
            try:
                for event in w.stream(custom.list_namespaced_custom_object, "core.jr2.dev", "v1alpha1", "jr2",
                                      "sandboxes", label_selector="jr2.dev/run", timeout_seconds=60):
                    obj = event["object"]
                    if (obj.get("status") or {}).get("phase") == "Lost":
                        stamps.note(stamps.bare, obj["metadata"]["name"])
                    if stop.is_set():
                        w.stop()
                        break
            except Exception:  # the cluster going away at the end; a real loss shows as a trial's timeout
                if stop.is_set():
                    return

    thread = threading.Thread(target=read, name="bench-bare-watch", daemon=True)
    thread.start()
    return thread


def running(orch: Orchestrator, run_id: str) -> bool:
    got = orch.feed(run_id, 0, 0.0)
    return got is not None and any(e.kind == "running" for e in got[0])


def trials(count: int, rounds: int, tmp: str) -> tuple[list[float], list[float], list[tuple[float, float]]]:
    ours: list[float] = []
    bare: list[float] = []
    per_round: list[tuple[float, float]] = []
    stamps = Stamps()
    stop = threading.Event()
    batch = -(-count // rounds)
    with FakeCluster(nodes=[Node("big", 1_000_000, 2**44)], start_seconds=0.05, long_poll=0.5,
                     bookmark_interval=None) as cluster:
        kubeconfig = cluster.write_kubeconfig(f"{tmp}/kubeconfig")
        reader = bare_watch(kubeconfig, stamps, stop)
        with Orchestrator(cluster.client(), state_dir=f"{tmp}/state", signing_key=cluster.signing_key,
                          instance_harness=cluster.instance_harness_url) as orch:
            done = 0
            for _ in range(rounds):
                n = min(batch, count - done)
                if n <= 0:
                    break
                turn: list[HarnessAction] = [Say("working"), Hang()]
                cluster.script("worker", *([turn] * n))  # a Turn for each run, that hangs
                runs = [orch.submit(read_document(HANGING)) for _ in range(n)]
                deadline = time.monotonic() + 120
                pause = threading.Event()
                while not all(running(orch, r) for r in runs):
                    if time.monotonic() > deadline:
                        raise SystemExit("the runs did not all reach running within 120 s")
                    pause.wait(0.05)
                mine: list[float] = []
                theirs: list[float] = []
                for run_id in runs:
                    name = sandbox_name(run_id, "W")
                    reader_of_feed = read_feed(orch, run_id, stamps)
                    t0 = time.perf_counter()
                    cluster.evict(name)
                    with stamps.cond:
                        if not stamps.cond.wait_for(functools.partial(stamps.both, run_id, name), timeout=30):
                            got = orch.feed(run_id, 0, 0.0)
                            kinds = [e.kind for e in got.events] if got is not None else None
                            raise SystemExit(f"{run_id}: lost not seen on both sides within 30 s "
                                             f"(feed {run_id in stamps.feed}: {kinds}, bare {name in stamps.bare})")
                        mine.append(stamps.feed[run_id] - t0)
                        theirs.append(stamps.bare[name] - t0)
                    reader_of_feed.join(5)
                    pause.wait(0.01)  # the trials one at a time: the run's teardown is not the next one's
                ours += mine
                bare += theirs
                per_round.append((quantile(mine, 0.99) / quantile(theirs, 0.99),
                                  statistics.median(mine) / statistics.median(theirs)))
                done += n
            stop.set()
        reader.join(0.1)
    return ours, bare, per_round


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10, help="batches of runs (about 20 a batch)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ours, bare, per_round = trials(args.trials, args.rounds, tmp)
    p50o, p99o = statistics.median(ours) * 1000, quantile(ours, 0.99) * 1000
    p50b, p99b = statistics.median(bare) * 1000, quantile(bare, 0.99) * 1000
    print(f"{'side':<28}{'trials':>8}{'p50 ms':>10}{'p99 ms':>10}")
    print(f"{'feed shows lost':<28}{len(ours):>8}{p50o:>10.2f}{p99o:>10.2f}")
    print(f"{'bare watch sees Lost':<28}{len(bare):>8}{p50b:>10.2f}{p99b:>10.2f}")
    print(f"{'ratio':<28}{'':>8}{p50o / p50b:>10.2f}{p99o / p99b:>10.2f}")
    rounds = ", ".join(f"{p99:.2f}" for p99, _ in per_round)
    print(f"p99 ratio per round: {rounds}; median {statistics.median(p for p, _ in per_round):.2f}")
    report.emit("loss_detection", [
        report.Row(f"eviction → feed lost, p50 ({len(ours)} trials)", p50o, p50b, "ms"),
        report.Row(f"eviction → feed lost, p99 ({len(ours)} trials)", p99o, p99b, "ms", "≤ 1.2"),
    ], samples={"eviction → lost: feed (workspace.lost)": [x * 1000 for x in ours],
                "eviction → lost: bare watch (phase Lost)": [x * 1000 for x in bare]})


if __name__ == "__main__":
    main()
