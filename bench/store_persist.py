"""Persist cost against raw sqlite3 + json, measured in the same run.

1. One persist, p50: `RunStore.persist` (the StoreActor's write: checks, compact JSON, the upsert, its
   commit) against the least a persist can be — `json.dumps` and one `INSERT … ON CONFLICT DO UPDATE` on a
   bare `sqlite3` connection in autocommit, same file settings (WAL, synchronous=NORMAL) — for a 1 KB run
   blob and a 100 KB Pool blob (ADR-0065's two sizes). Goal ≤ 2× (1 KB), ≤ 1.1× (100 KB).
2. 100 runs persisting at once: 100 threads, each asking the StoreActor to persist its own 1 KB row over
   and over (the group commit writes what waits in one transaction), against raw single-row commits — one
   thread, `json.dumps` + the upsert + its commit, as fast as it goes, with the store's settings (NORMAL:
   no flush) and with `synchronous=FULL` (each commit flushed) — and against the same StoreActor with its
   group capped at one row (what it was before group commit), and the same persists each a pykka `ask` (a
   Future per ask, before `store.save`'s `AnswerLatch`), and the group commit's write alone (`persist_many` of
   100 rows at a time on one thread: what no way of asking can beat). Rows per second and per CPU-second.
   Goal ≥ 5× raw.

Each figure is the median of `--rounds` interleaved rounds (ours, raw, ours, raw …); a ratio is ours over
raw (time) or ours over raw (rows/s). Databases live in a temp folder, never the checkout.

    python bench/store_persist.py [--rounds 5] [--n 2000] [--runs 100] [--each 100]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jr2_actors.store import actor as store_actor
from jr2_actors.store.actor import StoreActor
from jr2_actors.store.messages import Persist
from jr2_actors.store.rows import Row, RunStore

RAW_UPSERT = ("INSERT INTO runs (run_id, status, blob, reason, updated_at) VALUES (?, ?, ?, ?, ?) "
              "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, blob = excluded.blob, "
              "reason = excluded.reason, updated_at = excluded.updated_at")


def blob(size: int) -> dict[str, Any]:
    return {"state": "code", "pad": "x" * size}


def raw_connection(where: str, synchronous: str = "normal") -> sqlite3.Connection:
    conn = sqlite3.connect(os.path.join(where, "raw.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode = wal")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, status TEXT, blob TEXT, reason TEXT, "
                 "updated_at REAL)")
    return conn


def ours_one(size: int, n: int) -> float:
    """p50 seconds of `RunStore.persist`, over 20 runs' rows."""
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(tmp)
        store.open()
        doc = blob(size)
        times = []
        for i in range(n):
            t = time.perf_counter()
            store.persist(f"r{i % 20}", "live", doc, None, 1.0)
            times.append(time.perf_counter() - t)
        store.close()
    return statistics.median(times)


def raw_one(size: int, n: int) -> float:
    """p50 seconds of json.dumps + the upsert on a bare connection (autocommit: its own commit)."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = raw_connection(tmp)
        doc = blob(size)
        times = []
        for i in range(n):
            t = time.perf_counter()
            conn.execute(RAW_UPSERT, (f"r{i % 20}", "live", json.dumps(doc), None, 1.0))
            times.append(time.perf_counter() - t)
        conn.close()
    return statistics.median(times)


def ours_at_once(runs: int, each: int, *, group: bool = True, asked: bool = False) -> tuple[float, float]:
    """Rows/s and rows per CPU-second: `runs` threads saving `each` persists apiece through the StoreActor
    (`store.save`, as a RunActor does). `group=False`: one row a transaction, as before group commit (the group's
    cap set to one); `asked`: each a pykka ask (a Future per ask, as before the `AnswerLatch`)."""
    cap = vars(store_actor)  # the actor reads its own binding of the cap (imported from values.constants)
    saved = cap["STORE_GROUP_COMMIT_ROWS"]
    cap["STORE_GROUP_COMMIT_ROWS"] = saved if group else 1
    try:
        return _at_once(runs, each, asked)
    finally:
        cap["STORE_GROUP_COMMIT_ROWS"] = saved


def _at_once(runs: int, each: int, asked: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        ref = StoreActor.start(tmp)
        doc = blob(1024)
        go = threading.Barrier(runs + 1)

        def run(i: int) -> None:
            go.wait()
            for _ in range(each):
                if asked:
                    ref.ask(Persist(f"r{i}", "live", doc), timeout=60)
                else:
                    store_actor.save(ref, Persist(f"r{i}", "live", doc), 60)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(runs)]
        for t in threads:
            t.start()
        go.wait()
        wall, cpu = time.perf_counter(), time.process_time()
        for t in threads:
            t.join()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        ref.stop(block=True, timeout=30)
    rows = runs * each
    return rows / wall, rows / cpu


def write_alone(runs: int, each: int) -> tuple[float, float]:
    """Rows/s and rows per CPU-second of the group commit's write itself — `RunStore.persist_many` of `runs`
    rows at a time, `each` times, on one thread: no actor, no asks. The ceiling of any way of asking."""
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(tmp)
        store.open()
        batch = [Row(f"r{i}", "live", blob(1024), None, False) for i in range(runs)]
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(each):
            store.persist_many(batch, 1.0)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        store.close()
    rows = runs * each
    return rows / wall, rows / cpu


def raw_single_commits(rows: int, synchronous: str = "normal") -> tuple[float, float]:
    """Rows/s and rows per CPU-second of single-row commits from one thread (`synchronous=full`: each
    commit fsynced, what a single-row commit costs when the disk's flush is in it)."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = raw_connection(tmp, synchronous)
        doc = blob(1024)
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(rows):
            conn.execute(RAW_UPSERT, (f"r{i % 100}", "live", json.dumps(doc), None, 1.0))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        conn.close()
    return rows / wall, rows / cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=2000, help="persists per round, one at a time")
    parser.add_argument("--runs", type=int, default=100, help="runs persisting at once")
    parser.add_argument("--each", type=int, default=100, help="persists per run, per round")
    args = parser.parse_args()
    print(f"{'figure':<46}{'ours':>12}{'base':>12}{'ratio':>8}{'goal':>8}")
    for size, label, goal in ((1024, "1 KB", "≤ 2"), (100 * 1024, "100 KB", "≤ 1.1")):
        n = args.n if size < 10_000 else max(args.n // 4, 100)
        ours, raw = [], []
        for _ in range(args.rounds):
            ours.append(ours_one(size, n))
            raw.append(raw_one(size, n))
        o, r = statistics.median(ours), statistics.median(raw)
        name = f"persist {label}, p50 µs: ours / raw"
        print(f"{name:<46}{o * 1e6:>12.1f}{r * 1e6:>12.1f}{o / r:>8.2f}{goal:>8}")
    sides: dict[str, list[tuple[float, float]]] = {k: [] for k in ("ours", "asked", "ungrouped", "raw",
                                                                    "raw FULL", "write alone")}
    rows = args.runs * args.each
    for _ in range(args.rounds):
        sides["ours"].append(ours_at_once(args.runs, args.each))
        sides["raw"].append(raw_single_commits(rows))
        sides["asked"].append(ours_at_once(args.runs, args.each, asked=True))
        sides["ungrouped"].append(ours_at_once(args.runs, args.each, group=False))
        sides["raw FULL"].append(raw_single_commits(rows // 10, "full"))
        sides["write alone"].append(write_alone(args.runs, args.each))
    for k, what in ((0, "rows/s"), (1, "rows per CPU-s")):
        med = {side: statistics.median(x[k] for x in xs) for side, xs in sides.items()}
        for side, base, goal in (("ours", "raw", "≥ 5"), ("asked", "raw", ""), ("ungrouped", "raw", ""),
                                 ("ours", "raw FULL", ""), ("ours", "asked", ""), ("ours", "ungrouped", ""),
                                 ("write alone", "raw", "")):
            label = f"{args.runs} at once, {what}: {side} / {base}"
            print(f"{label:<46}{med[side]:>12,.0f}{med[base]:>12,.0f}{med[side] / med[base]:>8.2f}"
                  f"{goal if k == 0 else '':>8}")


if __name__ == "__main__":
    main()
