"""What the shell base's metrics cost (under 15 %): pykka's tell throughput and ask round trip for a
plain `pykka.ThreadingActor` (the baseline) against a `Shell` counted in an enabled `Telemetry` — the same
trivial `on_receive`, so the figures are the shell's whole cost, nothing else. Same machine, same run,
rounds alternated; medians.

The shell's `Mailbox` is a leaner `queue.Queue` than pykka's (an unbounded queue needs no task accounting
and no `not_full` notify), which pays for the stamp and the count. So a third side, `pykka+lean queue`,
is a plain actor on that same lean queue without any metric: the ratio against it is what the metrics
alone cost, the ratio against `pykka` what changing to the shell base costs.

Two settings: `pinned` runs the process on one CPU, so the figure is the CPU the metrics add per message
(the GIL never crosses CPUs); `2 CPUs` is how the pod runs, where the hand-off between the sender's and the
actor's threads dominates and the figures are noisier.

    python bench/actor_overhead.py [--tells 100000] [--asks 5000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pykka

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jr2_actors.shell import Shell
from jr2_actors.telemetry import Telemetry


class Plain(pykka.ThreadingActor):
    def __init__(self, expect: int, done: threading.Event) -> None:
        super().__init__()
        self.expect, self.done, self.seen = expect, done, 0

    def on_receive(self, message: Any) -> Any:
        if message is None:
            return 1  # an ask
        self.seen += 1
        if self.seen == self.expect:
            self.done.set()
        return None


class LeanQueue(queue.Queue[Any]):
    """`metrics.Mailbox`'s put and get without the stamp and the count: the lean queue alone."""

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        with self.not_empty:
            self.queue.append(item)
            self.not_empty.notify()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        with self.not_empty:
            while not self.queue:
                self.not_empty.wait()
            return self.queue.popleft()


class PlainLean(Plain):
    @staticmethod
    def _create_actor_inbox() -> LeanQueue:
        return LeanQueue()


class Measured(Shell):
    def __init__(self, expect: int, done: threading.Event, telemetry: Telemetry) -> None:
        super().__init__(telemetry=telemetry)
        self.expect, self.done, self.seen = expect, done, 0

    def on_receive(self, message: Any) -> Any:
        if message is None:
            return 1
        self.seen += 1
        if self.seen == self.expect:
            self.done.set()
        return None


SIDES = ("pykka", "pykka+lean queue", "Shell+metrics")


def start(side: str, expect: int, done: threading.Event) -> pykka.ActorRef[Any]:
    if side == "Shell+metrics":
        return Measured.start(expect, done, Telemetry())
    if side == "pykka+lean queue":
        return PlainLean.start(expect, done)
    return Plain.start(expect, done)


def tells(side: str, n: int) -> tuple[float, float]:
    """Tells per second (wall) and CPU µs per tell (this process, both threads)."""
    done = threading.Event()
    ref = start(side, n, done)
    began, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        ref.tell(i)
    if not done.wait(120):
        raise SystemExit("the actor did not take every tell within 120 s")
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    ref.stop(block=True, timeout=10)
    return n / elapsed, cpu / n * 1e6


def ask_round_trips(side: str, n: int) -> tuple[float, float]:
    ref = start(side, 0, threading.Event())
    times = []
    for _ in range(n):
        began = time.perf_counter()
        ref.ask(None, timeout=10)
        times.append(time.perf_counter() - began)
    ref.stop(block=True, timeout=10)
    times.sort()
    return times[len(times) // 2], times[int(0.99 * len(times))]


def setting(name: str, cpus: set[int], args: argparse.Namespace) -> None:
    os.sched_setaffinity(0, cpus)
    rate: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, list[float]] = {side: [] for side in SIDES}
    p50: dict[str, list[float]] = {side: [] for side in SIDES}
    p99: dict[str, list[float]] = {side: [] for side in SIDES}
    for _ in range(args.rounds):
        for side in SIDES:
            r, c = tells(side, args.tells)
            rate[side].append(r)
            cpu[side].append(c)
            a50, a99 = ask_round_trips(side, args.asks)
            p50[side].append(a50)
            p99[side].append(a99)
    med = {k: {side: statistics.median(v[side]) for side in SIDES}
           for k, v in (("rate", rate), ("cpu", cpu), ("p50", p50), ("p99", p99))}
    print(f"{name:<8}{'side':<22}{'tells/s':>10}{'CPU µs/tell':>13}{'ask p50 µs':>12}{'ask p99 µs':>12}")
    for side in SIDES:
        print(f"{name:<8}{side:<22}{med['rate'][side]:>10.0f}{med['cpu'][side]:>13.2f}"
              f"{med['p50'][side] * 1e6:>12.1f}{med['p99'][side] * 1e6:>12.1f}")
    # A cost ratio: the time a tell takes (1 / throughput), its CPU, an ask's time — Shell over the other.
    for base in SIDES[:2]:
        ours = "Shell+metrics"
        print(f"{name:<8}{'cost vs ' + base:<22}{med['rate'][base] / med['rate'][ours]:>10.3f}"
              f"{med['cpu'][ours] / med['cpu'][base]:>13.3f}{med['p50'][ours] / med['p50'][base]:>12.3f}"
              f"{med['p99'][ours] / med['p99'][base]:>12.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tells", type=int, default=100_000)
    parser.add_argument("--asks", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    every = os.sched_getaffinity(0)
    setting("pinned", {min(every)}, args)
    setting("2 CPUs", every, args)


if __name__ == "__main__":
    main()
