"""Bytes a finished run takes in `history.db`: JSON text (the previous code) against compressed,
in the same run.

Real snapshots first: `--samples` runs of a workflow (`--states` Turns each, `tests/workflows.chain`) on the
fake cluster in this process, through an `Orchestrator`, until each is final; their final rows are the
samples. Then two stores are written with `--runs` finished runs each, as a serving process writes them —
each run created, saved twice live, ended, and moved to the history by `settle` — the samples taken in turn
with their run id and times made each run's own. `plain` moves a finished blob as it is (what the code did
before: `jr2_deflate` registered as the identity); `compressed` is the code as it is. After a full checkpoint
(the WAL folded in and truncated), per store: history.db's size on disk over the runs, its pages in use over
the runs (`jr2_store_finished_run_bytes`), and the blob column's bytes alone; the ratio is compressed over
plain. Stores live in a temp folder, never the checkout.

    python bench/store_history.py [--runs 20000] [--samples 5] [--states 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.store.rows import Row, RunStore
from tests.support.workflows import chain

BATCH = 500


def samples(where: str, count: int, states: int) -> list[dict[str, Any]]:
    """The final rows of `count` real runs on the fake cluster."""
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None) as cluster:
        client = cluster.client()
        try:
            with Orchestrator(client, state_dir=where, signing_key=cluster.signing_key) as orch:
                ids = [orch.submit(chain(states)) for _ in range(count)]
                for run_id in ids:
                    if orch.wait_finished(run_id, 120) is None:
                        raise SystemExit(f"run {run_id} did not finish within 120 s")
                blobs = []
                for run_id in ids:
                    record = orch._fetch(run_id)  # the final row, as the store keeps it
                    assert record is not None
                    blobs.append(record.blob)
        finally:
            client.close()
    return blobs


def own(blob: dict[str, Any], run_id: str, shift: float) -> dict[str, Any]:
    """The sample as another run's: its id, and every time in it moved by `shift` (digits differ per run)."""
    text = json.dumps(blob).replace(blob.get("runId", "r-"), run_id)
    doc: dict[str, Any] = json.loads(text)
    for line in doc.get("feed", []):
        if isinstance(line.get("at"), float):
            line["at"] += shift
    for key in ("startedWall", "endedWall"):
        if isinstance(doc.get(key), float):
            doc[key] += shift
    return doc


def write(where: str, plain: bool, runs: int, blobs: list[dict[str, Any]]) -> dict[str, float]:
    store = RunStore(where)
    if plain:  # what the previous code did: the blob moved as it is
        store.db.register_function(lambda text: text, "jr2_deflate", 1, deterministic=True)
    store.open()
    rng = random.Random(29)
    now = 1_790_000_000.0
    began = time.process_time()
    for start in range(0, runs, BATCH):
        ids = [f"r-{i:012x}" for i in range(start, min(start + BATCH, runs))]
        finals = {run_id: own(blobs[i % len(blobs)], run_id, rng.uniform(0, 3600)) for i, run_id in
                  zip(range(start, start + len(ids)), ids, strict=True)}
        live = {run_id: {**final, "status": "running", "feed": final.get("feed", [])[:2]}
                for run_id, final in finals.items()}
        store.persist_many([Row(r, "live", live[r], create=True) for r in ids], now)
        store.persist_many([Row(r, "live", live[r]) for r in ids], now)
        store.persist_many([Row(r, "live", live[r]) for r in ids], now)
        store.persist_many([Row(r, "done", finals[r]) for r in ids], now)
        store.settle()
        now += 60.0
    cpu = time.process_time() - began
    store.db.connection().execute("PRAGMA history.wal_checkpoint(TRUNCATE)")  # type: ignore[no-untyped-call]
    footprint = store.footprint()
    store.close()
    with sqlite3.connect(os.path.join(where, "history.db")) as db:
        (blob_bytes,) = db.execute("SELECT SUM(LENGTH(CAST(blob AS BLOB))) FROM runs").fetchone()
    return {"file": os.path.getsize(os.path.join(where, "history.db")) / runs,
            "in_use": footprint.finished_run_bytes, "blob": blob_bytes / runs, "cpu_ms": 1000 * cpu / runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--states", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jr2-bench-history-") as tmp:
        blobs = samples(os.path.join(tmp, "samples"), args.samples, args.states)
        sizes = [len(json.dumps(b, separators=(",", ":"))) for b in blobs]
        statuses = sorted({str(b.get("status")) for b in blobs})
        print(f"{len(blobs)} real final rows ({', '.join(statuses)}): JSON {statistics.median(sizes):.0f} B median, "
              f"{min(sizes)}-{max(sizes)}")
        plain = write(os.path.join(tmp, "plain"), True, args.runs, blobs)
        compressed = write(os.path.join(tmp, "compressed"), False, args.runs, blobs)
    print(f"{args.runs} finished runs a store, bytes a run (after a full checkpoint):")
    print(f"{'':28}{'compressed':>12}{'plain':>10}{'ratio':>8}")  # ours first, then the baseline
    for key, label in (("file", "history.db on disk / runs"), ("in_use", "pages in use / runs"),
                       ("blob", "blob column / runs"), ("cpu_ms", "CPU ms a run (4 writes)")):
        print(f"{label:28}{compressed[key]:12.2f}{plain[key]:10.2f}{compressed[key] / plain[key]:8.2f}")


if __name__ == "__main__":
    main()
