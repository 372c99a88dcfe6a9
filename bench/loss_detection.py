"""Loss detection: a Sandbox evicted → the run's feed shows `workspace.lost`, against a bare watch's delivery of
the same event, the same eviction, the same process.

The Orchestrator runs one-Workspace runs on the fake cluster whose agent hangs (they stay running); each trial
evicts one run's Sandbox (the fake operator turns it `Lost`, as the kubelet's eviction does) and times, from
the eviction's write, (a) a reader of the run's feed seeing `workspace.lost` (the WatchActor's delivery, the
WorkspaceActor's step, the RunActor's step, the StoreActor's commit and its publication to the feed hub) and
(b) the official client's bare `watch.Watch().stream` loop, on a thread of this process, seeing the object's
phase `Lost`. Runs are started in batches (one round each) and evicted one at a time, each trial waiting for
both sides and then for the run's teardown to end (`--back-to-back`: 10 ms after both sides saw it, during the
teardown). Prints p50/p99 of both and the ratios.

    python -m bench.loss_detection [--trials 200] [--rounds 3] [--hops] [--back-to-back] [--switch-interval S]

`--hops` stamps each hop of the loss on its way (monotonic `perf_counter`, by wrapping the product's
methods in this process only: the product carries no probe) and prints where each trial's time went, the
median, p90 and p99 of each hop, and the slowest trials' hops with the depth of each queue the loss joined
(and `checkpoint` when its commit ran sqlite's automatic checkpoint).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
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

from bench import report
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Action as HarnessAction
from jr2_actors.fake.harness.core import Hang, Say
from jr2_actors.fake.operator.core import Node
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run.feed.lines import EventLine
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


HOPS = ("delivered", "ws took", "run queued", "run took", "store queued", "store took", "committed", "published")


class Hops:
    """`--hops`: when each hop of a trial's loss happened (perf_counter), by run id; installed by wrapping the
    product's methods here, so the product carries no probe. Each hop keeps its first stamp after the
    eviction (`arm`), and the depth of the queue it joined."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.armed: dict[str, str] = {}  # run id → its Sandbox's name, while its trial is under way
        self.at: dict[str, dict[str, float]] = {}
        self.depth: dict[str, dict[str, int]] = {}
        self.ahead: dict[str, list[str]] = {}  # what waited in the run's mailbox before the loss

    def arm(self, run_id: str) -> None:
        with self.lock:
            self.armed[run_id] = run_id
            self.at[run_id] = {}
            self.depth[run_id] = {}

    def disarm(self, run_id: str) -> None:
        with self.lock:
            self.armed.pop(run_id, None)

    def stamp(self, run_id: str, hop: str, depth: int | None = None) -> None:
        now = time.perf_counter()
        with self.lock:
            if run_id not in self.armed:
                return
            if hop not in self.at[run_id]:
                self.at[run_id][hop] = now
                if depth is not None:
                    self.depth[run_id][hop] = depth

    def install(self) -> None:
        from jr2_actors.run.actor import RunActor
        from jr2_actors.run.feed.hub import FeedHub
        from jr2_actors.shell.mailbox import Mailbox
        from jr2_actors.store import messages as store_actor
        from jr2_actors.store.rows import RunStore
        from jr2_actors.watch.deliveries import SandboxSeen
        from jr2_actors.workspace import messages as ws
        from jr2_actors.workspace.actor import WorkspaceActor

        hops = self

        def lost_seen(message: object) -> bool:
            return isinstance(message, SandboxSeen) and message.sandbox.phase == "Lost"

        put = Mailbox.put

        def put_stamped(box: Mailbox, item: object, block: bool = True, timeout: float | None = None) -> None:
            message = getattr(item, "message", None)
            if message is not None and hops.armed:
                owner = box.owner()
                if lost_seen(message) and isinstance(owner, WorkspaceActor):
                    hops.stamp(owner.spec.run_id, "delivered", len(box.queue))
                elif isinstance(message, ws.Lost) and isinstance(owner, RunActor):
                    hops.stamp(owner.name, "run queued", len(box.queue))
                    hops.ahead.setdefault(owner.name, [type(e.message).__name__ for e in box.queue])
                elif isinstance(message, store_actor.Persist):
                    hops.stamp(message.run_id, "store queued", len(box.queue))
            put(box, item, block, timeout)

        Mailbox.put = put_stamped  # type: ignore[method-assign,assignment]

        ws_receive = WorkspaceActor.on_receive

        def ws_receive_stamped(actor: WorkspaceActor, message: object) -> object:
            if lost_seen(message):
                hops.stamp(actor.spec.run_id, "ws took")
            return ws_receive(actor, message)

        WorkspaceActor.on_receive = ws_receive_stamped  # type: ignore[method-assign,assignment]

        take = RunActor._take

        def take_stamped(actor: RunActor, message: object) -> None:
            if isinstance(message, ws.Lost):
                hops.stamp(actor.name, "run took")
            take(actor, message)

        RunActor._take = take_stamped  # type: ignore[method-assign,assignment]

        carry_out = RunActor._carry_out

        def carry_out_stamped(actor: RunActor, step: Any, **kw: Any) -> None:
            if "committed" in hops.at.get(actor.name, {}):
                hops.stamp(actor.name, "run resumed")  # off the path since the store publishes: not reported
            carry_out(actor, step, **kw)

        RunActor._carry_out = carry_out_stamped  # type: ignore[method-assign,assignment]

        persist_many = RunStore.persist_many

        def persist_many_stamped(store: RunStore, rows: Any, now: float) -> Any:
            ended = [r.run_id for r in rows if r.run_id in hops.armed]
            for run_id in ended:
                hops.stamp(run_id, "store took", len(rows))
            # In WAL mode a commit writes the WAL alone: `state.db` itself changes only when the commit ran a
            # checkpoint (sqlite's automatic one, in the committing call).
            before = os.stat(store.path).st_mtime_ns if ended else 0
            try:
                return persist_many(store, rows, now)
            finally:
                for run_id in ended:
                    hops.stamp(run_id, "committed")
                    if os.stat(store.path).st_mtime_ns != before:
                        hops.depth[run_id]["checkpoint"] = 1

        RunStore.persist_many = persist_many_stamped  # type: ignore[method-assign,assignment]

        publish = FeedHub.publish

        def publish_stamped(hub: FeedHub, run_id: str, events: Any, **kw: Any) -> Any:
            events = tuple(events)
            if any(isinstance(e.line, EventLine) and e.line.event == "workspace.lost" for e in events):
                hops.stamp(run_id, "published")
            return publish(hub, run_id, events, **kw)  # the lines it took: the run's metrics read them

        FeedHub.publish = publish_stamped  # type: ignore[method-assign,assignment]


def hop_report(hops: Hops, trials: list[tuple[str, float, float, float]]) -> None:
    """Each trial's time, hop by hop, from the eviction's write (t0) to the reader: median and p99 of each
    segment, then the slowest trials' segments."""
    names = ("evicted", *HOPS, "reader")
    pairs = list(itertools.pairwise(names))
    segments: dict[str, list[float]] = {f"{a} → {b}": [] for a, b in pairs}
    rows: list[tuple[float, str, list[float | None]]] = []
    for run_id, t0, fed, _bare in trials:
        at = {"evicted": t0, **hops.at.get(run_id, {}), "reader": fed}
        row: list[float | None] = []
        for (a, b), key in zip(pairs, segments, strict=True):
            if a in at and b in at:
                segments[key].append((at[b] - at[a]) * 1000)
                row.append((at[b] - at[a]) * 1000)
            else:
                row.append(None)
        rows.append(((fed - t0) * 1000, run_id, row))
    print(f"{'hop (ms)':<34}{'n':>5}{'p50':>8}{'p90':>8}{'p99':>8}")
    for key, values in segments.items():
        if values:
            print(f"{key:<34}{len(values):>5}{statistics.median(values):>8.2f}{quantile(values, 0.9):>8.2f}"
                  f"{quantile(values, 0.99):>8.2f}")
    print("slowest trials (total; then each hop, ms; queue depths):")
    for total, run_id, row in sorted(rows, reverse=True)[:8]:
        cells = " ".join("-" if v is None else f"{v:.1f}" for v in row)
        print(f"  {total:7.2f}  {cells}  {hops.depth.get(run_id, {})} {hops.ahead.get(run_id)}")


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


def trials(count: int, rounds: int, tmp: str, hops: Hops | None = None,
           log: list[tuple[str, float, float, float]] | None = None, back_to_back: bool = False,
           ) -> tuple[list[float], list[float], list[tuple[float, float]]]:
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
                        late = {r: [e.kind for e in got.events] if (got := orch.feed(r, 0, 0.0)) else None
                                for r in runs if not running(orch, r)}
                        raise SystemExit(f"{len(late)} of {n} runs did not reach running within 120 s: {late}")
                    pause.wait(0.05)
                mine: list[float] = []
                theirs: list[float] = []
                for run_id in runs:
                    name = sandbox_name(run_id, "W")
                    reader_of_feed = read_feed(orch, run_id, stamps)
                    if hops is not None:
                        hops.arm(run_id)
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
                        if log is not None:
                            log.append((run_id, t0, stamps.feed[run_id], stamps.bare[name]))
                    reader_of_feed.join(5)
                    if hops is not None:
                        hops.disarm(run_id)
                    # The trials one at a time: the next eviction waits until this run's teardown is over (its
                    # Workspace deleted, its last row written, the orchestrator told), so a trial times the loss,
                    # not the loss queued behind the previous trial's teardown (`--back-to-back`: 10 ms apart).
                    if not back_to_back and orch.wait_finished(run_id, 30) is None:
                        raise SystemExit(f"{run_id}: its teardown did not end within 30 s")
                    pause.wait(0.01)
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
    parser.add_argument("--hops", action="store_true", help="stamp each hop of the loss and print where it waits")
    parser.add_argument("--back-to-back", action="store_true",
                        help="evict 10 ms after the previous trial, during its run's teardown (the first version)")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval for this process (a diagnostic: how long a woken thread may "
                             "wait for the GIL; CPython's default is 0.005 s)")
    args = parser.parse_args(argv)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    hops = Hops() if args.hops else None
    if hops is not None:
        hops.install()
    log: list[tuple[str, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ours, bare, per_round = trials(args.trials, args.rounds, tmp, hops, log, args.back_to_back)
    if hops is not None:
        hop_report(hops, log)
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
