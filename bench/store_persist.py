"""Persist cost: the store's WAL + synchronous=NORMAL against sqlite's default (rollback journal, FULL),
for a 1 KB run blob and a 100 KB Pool blob (ADR-0065's two sizes). Same machine, same run.

    python bench/store_persist.py [--n 400] [--dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jr2_actors.store import rows as runstore
from jr2_actors.store.rows import RunStore


def blob(size: int) -> dict[str, Any]:
    return {"state": "code", "pad": "x" * size}


def measure(pragmas: dict[str, Any], size: int, n: int, where: str) -> list[float]:
    saved = runstore.PRAGMAS
    runstore.PRAGMAS = pragmas
    try:
        with tempfile.TemporaryDirectory(dir=where) as tmp:
            store = RunStore(tmp)
            store.open()
            doc = blob(size)
            times = []
            for i in range(n):
                t = time.perf_counter()
                store.persist(f"r{i % 20}", "live", doc, None, 1.0)
                times.append(time.perf_counter() - t)
            store.close()
            return times
    finally:
        runstore.PRAGMAS = saved


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--dir", default=tempfile.gettempdir(),
                        help="where the bench's databases live (default: the temp folder, never the checkout)")
    args = parser.parse_args()
    ours = dict(runstore.PRAGMAS)
    baseline = {**ours, "journal_mode": "delete", "synchronous": "full"}
    print(f"{'blob':<8}{'config':<22}{'p50 ms':>10}{'p95 ms':>10}")
    for size, label in ((1024, "1 KB"), (100 * 1024, "100 KB")):
        results = {}
        for name, pragmas in (("WAL + NORMAL", ours), ("delete + FULL", baseline)):
            times = sorted(measure(pragmas, size, args.n, args.dir))
            results[name] = (statistics.median(times) * 1000, times[int(0.95 * len(times))] * 1000)
            print(f"{label:<8}{name:<22}{results[name][0]:>10.3f}{results[name][1]:>10.3f}")
        ratio = results["WAL + NORMAL"][0] / results["delete + FULL"][0]
        print(f"{label:<8}{'ratio (p50)':<22}{ratio:>10.3f}")


if __name__ == "__main__":
    main()
