"""Restore beside 100,000 finished rows against the live rows alone, cold and warm.

Two stores are written through `RunStore.persist_many` as a serving process writes them: `beside` has
101,000 runs created in order, 1,000 of them (spread evenly) still live and the rest finished after a few
saves each; `alone` has the same 1,000 live runs and nothing else. A round opens each store and restores
its live runs (`open` + `restore`, what a boot does), first with a cold file cache — every file of the
store fsynced, then dropped with `os.posix_fadvise(..., POSIX_FADV_DONTNEED)` — then warm (five times
more at once, their median). Figures are the median of `--rounds` interleaved rounds (alone, beside,
alone, beside …); a ratio is beside over alone, in wall time and in CPU time. Goal: cold ≤ 1.2× (wall
time: what a cold cache costs is the wait on the disk, not CPU), warm ≤ 1.1× (CPU time). Stores live in a
temp folder, never the checkout.

    python bench/store_restore.py [--rounds 9] [--live 1000] [--finished 100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jr2_actors.store.rows import Row, RunStore

PAD = "x" * 900  # a run's blob is about 1 KB (ADR-0065)
BATCH = 1000


def build(where: str, live: int, finished: int) -> None:
    """`live` runs left live among `finished` runs that ended, in creation order, as a process writes
    them: each run created, saved twice, and (unless it stays live) ended."""
    store = RunStore(where)
    store.open()
    total = live + finished
    every = total // live if live else total + 1
    now = 1_790_000_000.0
    for start in range(0, total, BATCH):
        ids = range(start, min(start + BATCH, total))
        store.persist_many([Row(f"run-{i:07d}", "live", {"i": i, "pad": PAD}, create=True) for i in ids], now)
        store.persist_many([Row(f"run-{i:07d}", "live", {"i": i, "s": 1, "pad": PAD}) for i in ids], now)
        ended = [Row(f"run-{i:07d}", "done", {"i": i, "s": 2, "pad": PAD}) for i in ids if i % every != 0]
        if ended:
            store.persist_many(ended, now)
            store.settle()  # what the StoreActor does after answering
        now += 60.0
    store.close()


def drop_cache(where: str) -> None:
    for name in os.listdir(where):
        fd = os.open(os.path.join(where, name), os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def restore(where: str, expect: int) -> tuple[float, float]:
    """Wall and CPU seconds of a boot's read: open the store, restore its live runs."""
    wall, cpu = time.perf_counter(), time.process_time()
    store = RunStore(where)
    store.open()
    restored = store.restore()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    store.close()
    assert len(restored.runs) == expect, (len(restored.runs), expect)
    return wall, cpu


def size(where: str) -> int:
    return sum(os.path.getsize(os.path.join(where, n)) for n in os.listdir(where))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--live", type=int, default=1000)
    parser.add_argument("--finished", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"alone": os.path.join(tmp, "alone"), "beside": os.path.join(tmp, "beside")}
        build(stores["alone"], args.live, 0)
        build(stores["beside"], args.live, args.finished)
        for name, where in stores.items():
            print(f"{name}: {sorted(os.listdir(where))}, {size(where) / 2**20:.1f} MiB")
        figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            for name, where in stores.items():
                drop_cache(where)
                figures.setdefault((name, "cold"), []).append(restore(where, args.live))
                warm = [restore(where, args.live) for _ in range(5)]  # five, their median: 6 ms each is noisy
                figures.setdefault((name, "warm"), []).append((statistics.median(w for w, _ in warm),
                                                               statistics.median(c for _, c in warm)))
        print(f"{'cache':<6}{'side':<8}{'wall ms':>10}{'CPU ms':>10}")
        for cache, goal in (("cold", "≤ 1.2 (wall: a cold read waits on the disk)"), ("warm", "≤ 1.1 (CPU)")):
            med = {name: (statistics.median(w for w, _ in figures[(name, cache)]),
                          statistics.median(c for _, c in figures[(name, cache)])) for name in stores}
            for name in stores:
                print(f"{cache:<6}{name:<8}{med[name][0] * 1e3:>10.2f}{med[name][1] * 1e3:>10.2f}")
            print(f"{cache:<6}{'ratio':<8}{med['beside'][0] / med['alone'][0]:>10.2f}"
                  f"{med['beside'][1] / med['alone'][1]:>10.2f}   goal {goal}")


if __name__ == "__main__":
    main()
