"""SIGTERM with N runs mid-Turn: how long `serve` takes to exit, and does a restart bring every run back.

The fake cluster runs in this process; `serve` is a child on its kubeconfig with `--instance-harness` set to
the fake's Instance Harness. Each run is one Menu-only Agent whose Turn the fake holds for ever (`Hang`), so
at the SIGTERM every run has a RunActor, a seat, the seat's reader in a long-poll and, for the last ones
submitted, jobs still queued on the seats' pool. Per size: submit to all admitted, SIGTERM to exit (and
serve's own "stopped in" figure), its exit code, tracebacks in its log, then a restart on the same state
folder: how many runs it lists live again, its own SIGTERM while the restored runs re-admit their Turns, and a
third start that lets every Turn end (the fake's next Turn for the agent picks `routed`): how many of the
submitted runs end `done`. The ratio is the big size's stop per run
against the small one's, measured in the same run: a stop whose cost grows with the live runs has a ratio
of 1 and takes `runs × per-run` seconds; a stop within one budget has a ratio well under 1.

    python bench/stop_load.py [--small 200] [--big 1000] [--deadline 600] [--log-dir DIR] [--no-supervise]

`serve` runs under its supervisor (`--supervise`) as the manifests run it; the exit measured is the
supervisor's, and `serve_gone_s` when serve itself had ended (a container ends with its last process).

Everything it writes is under one temp folder, removed at the end (each serve's log is kept in `--log-dir`).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pykka
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import serve_runs
from bench.report import Row, emit
from bench.serve_runs import KEY, TOKEN
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick
from jr2_actors.testing.processes import children, ended
from jr2_actors.values.constants import SERVE_STOP_SECONDS

WORKFLOW = {
    "name": "menu-turn",
    "agents": {"triage": {"instructions": "You route work.", "access": "none"}},
    "start": "route",
    "states": {"route": {"turn": {"agent": "triage", "prompt": "Route it."}, "on": {"routed": "done"}},
               "done": {"final": "done"}},
}


SUPERVISE: tuple[str, ...] = ("--supervise",)  # as the manifests run it; `--no-supervise` empties it


def serve(tmp: Path, kubeconfig: str, harness: str,
          wait: float = 120.0) -> tuple[subprocess.Popen[str], str, list[str]]:
    return serve_runs.serve(tmp, kubeconfig, extra=("--instance-harness", harness, *SUPERVISE), wait=wait)


def sigterm(proc: subprocess.Popen[str], lines: list[str]) -> dict[str, Any]:
    start = len(lines)
    served = children(proc.pid) if SUPERVISE else [proc.pid]  # serve itself: the supervisor's child
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code: int | None = proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    took = time.monotonic() - t0
    while not all(ended(pid) for pid in served) and time.monotonic() - t0 < 120:
        time.sleep(0.05)  # a container ends once every process in it has: serve's own end counts too
    gone = time.monotonic() - t0
    time.sleep(0.5)  # the reader's last lines
    log = "".join(lines[start:])
    said = re.search(r"stopped in ([\d.]+)s", log)
    return {"exit_s": round(took, 2), "serve_gone_s": round(gone, 2), "code": code,
            "said_s": float(said.group(1)) if said else None, "ended_at_budget": "did not stop within" in log,
            "tracebacks": log.count("Traceback"), "errors": len(re.findall(r" ERROR ", log))}


def live(session: requests.Session, url: str) -> int:
    """The live runs listed, or -1 when serve does not answer in time (it is busy: asked again)."""
    try:
        r = session.get(url + "/runs", timeout=60)
    except requests.RequestException:
        return -1
    return len(r.json()["runs"]) if r.status_code == 200 else -1


def done(session: requests.Session, url: str, ids: set[str]) -> int:
    """How many of `ids` ended `done`: one listing per first hex digit, each under the finished list's cap."""
    count = 0
    for digit in "0123456789abcdef":
        try:  # a serve busy re-admitting thousands of Turns may answer late: not known yet, asked again
            r = session.get(url + "/runs", params={"all": "true", "prefix": f"r-{digit}"}, timeout=60)
        except requests.RequestException:
            return -1
        if r.status_code != 200:
            return -1
        count += sum(row.get("runId") in ids and row.get("status") == "done" for row in r.json()["runs"])
    return count


def admissions(cluster: FakeCluster) -> int:
    """The admissions the fake's Harness took, or -1 when its actor, busy with thousands of long-polls, does not
    answer in time (asked again)."""
    try:
        return len(cluster.admissions())
    except pykka.Timeout:
        return -1


def keep(log_dir: str | None, name: str, lines: list[str]) -> None:
    if log_dir:
        Path(log_dir, name).write_text("".join(lines))


def bench(n: int, deadline: float, log_dir: str | None = None) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="jr2-bench-stop-"))
    proc: subprocess.Popen[str] | None = None
    try:
        with FakeCluster(start_seconds=0.05, bookmark_interval=None, signing_key=KEY.encode()) as cluster:
            # The first Turns and the restored ones hang; once every run is back, each next Turn ends its run.
            cluster.script("triage", *([Hang()] for _ in range(2 * n)))
            kubeconfig = cluster.write_kubeconfig(str(tmp / "kubeconfig"))
            proc, url, lines = serve(tmp, kubeconfig, cluster.instance_harness_url)
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {TOKEN}"
            t0 = time.monotonic()

            def submit(_: int) -> str:
                try:  # serve sheds connections near its cap and refuses past its budget: counted as refused
                    r = session.post(url + "/runs", json={"workflow": WORKFLOW}, timeout=120)
                except requests.RequestException:
                    return ""
                return str(r.json()["runId"]) if r.status_code == 201 else ""

            with ThreadPoolExecutor(8) as pool:
                ids = set(pool.map(submit, range(n))) - {""}
            refused = n - len(ids)
            # Every live run's Turn admitted (an admission that failed ends its run: it is not listed).
            # A listing serve did not answer in time (-1) is not known yet: asked again, never read as "all in".
            while time.monotonic() - t0 < deadline:
                admitted = admissions(cluster)
                listed = len(ids) if admitted >= len(ids) else live(session, url)
                if admitted >= listed >= 0:
                    break
                time.sleep(0.5)
            first = sigterm(proc, lines)
            print(f"# {n}: first SIGTERM {first}", flush=True)
            keep(log_dir, f"stop-{n}-first.log", lines)
            proc, url, lines = serve(tmp, kubeconfig, cluster.instance_harness_url, deadline)
            t1 = time.monotonic()
            restored = live(session, url)
            while restored < listed and time.monotonic() - t1 < deadline:
                time.sleep(0.5)
                restored = live(session, url)
            second = sigterm(proc, lines)
            print(f"# {n}: restored {restored} of {listed}; the restart's SIGTERM {second}", flush=True)
            keep(log_dir, f"stop-{n}-second.log", lines)
            # A restored Turn aborts its old Submission and is admitted again: this time it picks and its run ends.
            cluster.harness(lambda core: core.script("triage", [[Pick("routed")] for _ in range(2 * n)], replace=True))
            proc, url, lines = serve(tmp, kubeconfig, cluster.instance_harness_url, deadline)
            t2 = time.monotonic()
            ended = done(session, url, ids)
            while ended < len(ids) and time.monotonic() - t2 < deadline:
                time.sleep(2)
                ended = done(session, url, ids)
            finish_s = round(time.monotonic() - t2, 1)
            third = sigterm(proc, lines)
            keep(log_dir, f"stop-{n}-third.log", lines)
            return {"runs": n, "refused": refused, "admitted": admitted, "live_at_sigterm": listed,
                    "restored": restored, "first": first, "second": second, "done_after_restart": ended,
                    "finish_s": finish_s, "third": third}
    finally:
        if proc is not None and proc.poll() is None:  # a failure on the way leaves no serve behind
            proc.kill()
            proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=200, help="runs mid-Turn for the baseline")
    parser.add_argument("--big", type=int, nargs="+", default=[1000], help="runs mid-Turn measured against it")
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds to wait for every run admitted")
    parser.add_argument("--log-dir", help="keep each serve's log here (outside the checkout)")
    parser.add_argument("--supervise", action=argparse.BooleanOptionalAction, default=True,
                        help="run serve under its supervisor, as the manifests do (default: yes)")
    args = parser.parse_args()
    global SUPERVISE
    SUPERVISE = ("--supervise",) if args.supervise else ()
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    small = bench(args.small, args.deadline, args.log_dir)
    print(small, flush=True)
    rows: list[Row] = []
    for size in args.big:
        big = bench(size, args.deadline, args.log_dir)
        print(big, flush=True)
        rows += _rows(small, big)
    emit("stop_load", rows)


def _rows(small: dict[str, Any], big: dict[str, Any]) -> list[Row]:
    per_small = small["first"]["exit_s"] / small["runs"]
    per_big = big["first"]["exit_s"] / big["runs"]
    nb, ns = big["runs"], small["runs"]
    print(f"{'figure':<58}{'ours':>10}{'baseline':>10}")
    print(f"{f'SIGTERM exit at {nb:,} mid-Turn, s':<58}{big['first']['exit_s']:>10}{SERVE_STOP_SECONDS:>10}")
    print(f"{f'stop ms per run ratio {nb:,} vs {ns:,}':<58}{1000 * per_big:>10.3f}{1000 * per_small:>10.3f}"
          f"  ratio {per_big / per_small:.2f}", flush=True)
    return [
        Row(f"SIGTERM → exit at {nb:,} runs mid-Turn vs the 10 s promise", big["first"]["exit_s"],
            SERVE_STOP_SECONDS, "s", "< 1"),
        Row(f"stop per run at {nb:,} vs at {ns:,} mid-Turn", 1000 * per_big, 1000 * per_small,
            "ms", "< 1 (one budget, not a cost per run)"),
        Row(f"tracebacks in the stop's log at {nb:,}", big["first"]["tracebacks"], 0, "", "0"),
        Row(f"runs restored of {big['live_at_sigterm']:,} live", big["restored"], big["live_at_sigterm"], "", "1"),
        Row(f"runs done after the restarts, of {nb - big['refused']:,} submitted", big["done_after_restart"],
            nb - big["refused"], "", "1"),
    ]


if __name__ == "__main__":
    main()
