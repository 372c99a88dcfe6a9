"""N runs started through `serve` against a bare program that makes each run's calls, in the same run.

- serve: `serve_runs.bench(n)` (8 clients submit the one-Workspace `hold` workflow; its series every 5 s): from
  the first submit until every run is placed, the wall and serve's CPU a run.
- bare: a child process on a fake cluster of its own, 8 threads, each taking runs one after another and, for
  each, doing what a run's start needs and nothing else: create its Sandbox (the product's manifest), apply its
  token Secret, wait until one watch thread sees it Ready, attach through a `HarnessClient` (one shared
  session), and write the run's row twice to sqlite in WAL (submitted, placed). No actor, no mailbox, no feed.

The ratios say how far serve's start is from the work it does (issue 33 item 2: 5,000 Running within 30 s).

    python bench/start_bare.py [--runs 1000] [--clients 8]

Everything it writes is under temp folders, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import serve_runs
from bench.report import Row, emit, run_main
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node

GOAL_SECONDS_AT_5000 = 30.0  # issue 33: 5,000 runs Running within 30 s


def bare_child(kubeconfig: str, n: int, clients: int, state: str) -> dict[str, Any]:
    """In the child: n runs' starts on `clients` threads; the wall and this process's CPU, first create to last."""
    import secrets

    import requests

    from jr2_actors.harness.client import HarnessClient
    from jr2_actors.harness.tokens import harness_token
    from jr2_actors.kube.access import LocalFiles, load_kubeconfig
    from jr2_actors.kube.client import KubeClient
    from jr2_actors.kube.frames import WatchEvent
    from jr2_actors.kube.kinds import SANDBOX, SECRET
    from jr2_actors.values.workflow import parse_workflow
    from jr2_actors.watch.identity import RUN_LABEL
    from jr2_actors.workspace.manifest import (
        WorkspaceSpec,
        attach_branch,
        attach_slots,
        sandbox_body,
        token_secret,
    )

    client = KubeClient(load_kubeconfig(kubeconfig, LocalFiles()))
    key = secrets.token_bytes(32)
    workflow = parse_workflow(serve_runs.WORKFLOW)
    definition = workflow.workspaces["W"]
    endpoints: dict[str, str] = {}
    seen = threading.Condition()
    stream = client.watch(SANDBOX, client.namespace, label_selector=RUN_LABEL, timeout_seconds=1800)

    def watch() -> None:
        for frame in stream:
            if isinstance(frame, WatchEvent):
                status = frame.object.get("status") or {}
                if status.get("phase") == "Ready" and status.get("endpoint"):  # what the Workspace waits for
                    with seen:
                        endpoints[frame.object["metadata"]["name"]] = status["endpoint"]
                        seen.notify_all()

    threading.Thread(target=watch, daemon=True).start()
    session = requests.Session()
    local = threading.local()

    def row(run_id: str, status: str) -> None:
        db = getattr(local, "db", None)
        if db is None:
            db = local.db = sqlite3.connect(f"{state}/runs.db", timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?)", (run_id, status, json.dumps(serve_runs.WORKFLOW)))

    setup = sqlite3.connect(f"{state}/runs.db")
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, status TEXT, blob TEXT)")
    setup.close()

    def start(i: int) -> None:
        run_id = f"r-bare{i:06d}"
        row(run_id, "submitted")
        spec = WorkspaceSpec(run_id, workflow.name, definition, image="jr2-sandbox:dev")
        made = client.create(SANDBOX, sandbox_body(spec, key, time.time()))
        client.apply(SECRET, spec.secret_name, token_secret(spec, key, made["metadata"]["uid"]))
        with seen:
            if not seen.wait_for(lambda: spec.name in endpoints, timeout=120):
                raise RuntimeError(f"{spec.name} was not Ready within 120 s")
            endpoint = endpoints[spec.name]
        harness = HarnessClient(endpoint, harness_token(key, spec.name), session=session)
        try:
            harness.attach(attach_slots(spec), attach_branch(spec))
        finally:
            harness.close()
        row(run_id, "placed")

    c0, t0 = time.process_time(), time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(start, range(n)))
    cpu, wall = time.process_time() - c0, time.monotonic() - t0
    stream.close()
    client.close()
    return {"runs": n, "wall_s": round(wall, 2), "cpu_ms_per_run": round(1000 * cpu / n, 3)}


def bare(n: int, clients: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="jr2-bench-start-"))
    nodes = [Node(f"n{i}", 10_000_000, 2**44) for i in range(4)]
    try:
        with FakeCluster(nodes=nodes, start_seconds=0.05, bookmark_interval=None, quota=None) as cluster:
            kubeconfig = cluster.write_kubeconfig(str(tmp / "kubeconfig"))
            (tmp / "state").mkdir()
            out = subprocess.run([sys.executable, __file__, "--bare-child", kubeconfig, "--runs", str(n),
                                  "--clients", str(clients), "--state", str(tmp / "state")],
                                 capture_output=True, text=True, timeout=3600)
            if out.returncode != 0:
                raise SystemExit(f"the bare program failed:\n{out.stderr[-2000:]}")
            return dict(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs to start on each side")
    parser.add_argument("--clients", type=int, default=8, help="the bare program's threads (serve has 8 clients)")
    parser.add_argument("--bare-child", default="", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--state", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 1 or args.clients < 1:
        parser.error("--runs and --clients must be at least 1")
    if args.bare_child:
        print(json.dumps(bare_child(args.bare_child, args.runs, args.clients, args.state)), flush=True)
        return
    n = args.runs
    ours = serve_runs.bench(n, deadline=1800.0, every=5.0)
    base = bare(n, args.clients)
    if ours["all_placed_s"] is None:
        raise SystemExit(f"serve did not place all {n:,} runs")
    goal = f"≤ {GOAL_SECONDS_AT_5000:g} s at 5,000"
    rows = [
        Row(f"{n:,} runs started: wall, serve vs the bare program", ours["all_placed_s"], base["wall_s"], "s", goal),
        Row("CPU a run started: serve vs the bare program", ours["cpu_s_per_run_ms"], base["cpu_ms_per_run"], "ms"),
    ]
    print(f"{n:,} runs started (serve: {ours['peak_threads']:,} threads; bare: {args.clients} threads)")
    print(f"{'figure':<56}{'ours':>10}{'baseline':>10}{'ratio':>8}")
    for r in rows:
        print(f"{r.figure:<56}{r.ours:>10.2f}{r.baseline:>10.2f}{r.ratio:>8.2f}")
    emit("start_bare", rows)


if __name__ == "__main__":
    run_main("start_bare", main)
