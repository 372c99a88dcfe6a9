"""N concurrent runs through `jr2-actors serve` as a real process on the fake cluster.

The fake cluster runs in this process (its threads are not serve's); serve runs as a child on its kubeconfig.
Each run holds one Workspace in a state that waits an hour (`after`), so every run stays live with its
RunActor and its WorkspaceActor (placed, attached, its Lease renewed) and no Turn. Figures for the serve
process alone, read from /proc: peak RSS, threads and fds, CPU-seconds per run (submit to every run
placed), `GET /runs` p50/p99 over sequential calls once all are live, and how many actors died (its log).

And a series while the runs accumulate, one point every `--every` seconds from the first
submit until every run is placed: the live runs and running Workspaces as serve's own `/metrics` counts them
(`jr2_runs_live`, `jr2_workspaces{phase="running"}`), serve's RSS now (VmRSS), its threads and fds. `--plot
FILE.png` draws RSS and threads against live runs (two y-axes) for the last `--runs`, `--series FILE.json`
keeps every point; run by `python -m bench`, the series goes to its plot in the run's folder or docs/bench/.

    python bench/serve_runs.py --runs 200 [--runs 1000 ...] [--deadline 600] [--plot F.png] [--series F.json]

Everything it writes is under one temp folder, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import Row, emit, run_main, series_png
from bench.thread_kinds import THREAD_NAMES, print_kinds, run_time_by_kind
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node
from jr2_actors.sim.serve_process import ServeProcess
from jr2_actors.values.constants import LEASE_INTERVAL_SECONDS

TOKEN = secrets.token_hex(16)  # this run's own: serve reads it from its environment
KEY = secrets.token_hex(32)
WORKFLOW = {
    "name": "hold",
    "workspaces": {"W": {"size": {"cpu": "10m", "memory": "16Mi"}}},
    "agents": {"worker": {"instructions": "You work.", "workspace": "W", "access": "write"}},
    "start": "hold",
    "states": {"hold": {"holds": ["W"], "after": {"seconds": 3600, "to": "done"}}, "done": {"final": "done"}},
}
BENCH_LOG_LINES = 200_000  # a bench reads serve's whole log (what ended, what failed); a bound all the same
TICK = os.sysconf("SC_CLK_TCK")


class Sampler:
    """Serve's RSS, threads, fds and CPU from /proc, sampled every 0.2 s on a thread; peaks kept (the RSS's
    is the kernel's high-water mark, VmHWM; `sample()`'s `rss_now_mib` is VmRSS)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = {"rss_mib": 0.0, "threads": 0, "fds": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def sample(self) -> dict[str, float]:
        status = Path(f"/proc/{self.pid}/status").read_text()
        rss = int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
        now = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
        threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
        fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        return {"rss_mib": rss, "rss_now_mib": now, "threads": threads, "fds": fds}

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                now = self.sample()
            except (OSError, AttributeError):
                return
            for k in self.peak:
                self.peak[k] = max(self.peak[k], now[k])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


def metric_sum(text: str, name: str, labels: str = "") -> float:
    """The sum of a Prometheus text exposition's samples of `name` whose labels contain `labels`."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, value = line.rpartition(" ")
            if labels in head:
                total += float(value)
    return total


class Series:
    """One point every `every` seconds on a thread until stopped: the live runs and running Workspaces as
    serve's `/metrics` counts them, and serve's RSS now, threads and fds (`Sampler.sample`)."""

    def __init__(self, url: str, sampler: Sampler, every: float) -> None:
        self.url, self.sampler, self.every = url, sampler, every
        self.points: list[dict[str, float]] = []
        self._session = requests.Session()  # a connection of its own, beside the submits'
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def point(self) -> None:
        text = self._session.get(self.url + "/metrics", timeout=60).text
        now = self.sampler.sample()
        self.points.append({"t_s": round(time.monotonic() - self._t0, 2),
                            "live_runs": metric_sum(text, "jr2_runs_live"),
                            "running_workspaces": metric_sum(text, "jr2_workspaces", 'phase="running"'),
                            "rss_mib": round(now["rss_now_mib"], 1), "threads": now["threads"], "fds": now["fds"]})

    def _run(self) -> None:
        while True:
            try:
                self.point()
            except (OSError, AttributeError, requests.RequestException):
                return
            if self._stop.wait(self.every):
                return

    def stop(self) -> list[dict[str, float]]:
        self._stop.set()
        self._thread.join(60)
        self.point()  # the last, once every run is placed
        return self.points


def plot_series(points: list[dict[str, float]], n: int, path: Path) -> Path:
    """RSS (left) and threads and fds (right) against live runs."""
    return series_png(f"serve with {n:,} runs holding a Workspace: RSS and threads against live runs",
                      as_series(points, n), path)


def as_series(points: list[dict[str, float]], n: int) -> dict[str, Any]:
    """The points in bench.report's series shape."""
    return {"x": [p["live_runs"] for p in points], "xlabel": f"live runs (serve's /metrics; {n:,} submitted)",
            "y": {"RSS MiB (VmRSS)": [p["rss_mib"] for p in points]}, "ylabel": "MiB",
            "y2": {"threads": [p["threads"] for p in points], "fds": [p["fds"] for p in points]},
            "y2label": "threads, fds"}


def serve(tmp: Path, kubeconfig: str, *, extra: Sequence[str] = (), env: Mapping[str, str] | None = None,
          wait: float = 60.0) -> tuple[subprocess.Popen[str], str, list[str]]:
    """`serve` as a child on `kubeconfig` (`ServeProcess`, as the crash trials start it), its state under
    `tmp`; its whole log kept (up to `BENCH_LOG_LINES`), read for what a bench counts."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")}
    environment.update({"JR2_INSTANCE_TOKEN": TOKEN, "JR2_SIGNING_KEY": KEY, "PYTHONUNBUFFERED": "1",
                        "TMPDIR": str(tmp), **(env or {})})
    child = ServeProcess(kubeconfig, str(tmp / "state"), env=environment, extra=extra, keep=BENCH_LOG_LINES)
    if not child.ready(wait):  # a restart restores every live run before it serves
        child.proc.kill()
        raise SystemExit("serve did not start:\n" + "".join(child.lines[-20:]))
    return child.proc, child.url, child.lines


def profile_listing(session: requests.Session, url: str, pid: int, out: str) -> int:
    """`py-spy record --gil --threads -r 50` on serve for 20 s while `GET /runs` is called back to back; the
    raw (collapsed) stacks go to `out`. Returns how many calls were made meanwhile."""
    errors = open(out + ".log", "w")  # noqa: SIM115  # py-spy's own lines (samples, errors), beside its stacks
    spy = subprocess.Popen([shutil.which("py-spy") or "py-spy", "record", "--gil", "--threads", "-r", "50", "-d", "20",
                            "-f", "raw", "-o", out, "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=errors)
    calls = 0
    while spy.poll() is None:
        session.get(url + "/runs", timeout=60)
        calls += 1
    errors.close()
    return calls


def idle_share(sampler: Sampler, seconds: float = 10.0) -> float:
    """Serve's CPU as a share of one core over `seconds` while nothing calls it: the live runs' steady cost."""
    cpu0, t0 = sampler.cpu(), time.monotonic()
    time.sleep(seconds)
    return (sampler.cpu() - cpu0) / (time.monotonic() - t0)


def renewal_patches(cluster: FakeCluster) -> int:
    """The Lease renewals (merge patches) the fake logged since the last call (its log keeps 10,000)."""
    return sum(1 for r in cluster.requests(clear=True)
               if r.get("method") == "PATCH" and "merge-patch" in str(r.get("contentType") or ""))


def listing_latencies(session: requests.Session, url: str, calls: int = 200) -> list[float]:
    latencies = []
    for _ in range(calls):
        s = time.monotonic()
        r = session.get(url + "/runs", timeout=60)
        latencies.append(time.monotonic() - s)
        assert r.status_code == 200, r.text
    return sorted(latencies)


def p99(latencies: list[float]) -> float:
    return round(1000 * latencies[int(0.99 * len(latencies)) - 1], 1)


def steady(cluster: FakeCluster, sampler: Sampler, session: requests.Session, url: str, placed_at: float,
           seconds: float) -> dict[str, Any]:
    """Once every first renewal is over (each within a fifth of the interval of its Workspace's attach), serve's
    CPU over `seconds` and the renewals sent meanwhile: the steady cost of the live runs, nearly all of it their
    Lease renewals (`LEASE_INTERVAL_SECONDS` apart, ± `LEASE_JITTER`); then `GET /runs` again, at that steady state."""
    time.sleep(max(0.0, placed_at + LEASE_INTERVAL_SECONDS / 5 + 30 - time.monotonic()))  # + the last attaches
    renewal_patches(cluster)
    cpu0, t0, renewed = sampler.cpu(), time.monotonic(), 0
    while time.monotonic() - t0 < seconds:
        time.sleep(min(30.0, seconds - (time.monotonic() - t0)))
        renewed += renewal_patches(cluster)  # the log is bounded: read it at least every 30 s
    used, spent = sampler.cpu() - cpu0, time.monotonic() - t0
    latencies = listing_latencies(session, url)
    return {"steady_s": round(spent), "steady_share": round(used / spent, 4), "steady_renewals": renewed,
            "steady_cpu_ms_per_renewal": round(1000 * used / renewed, 2) if renewed else None,
            "steady_runs_p50_ms": round(1000 * statistics.median(latencies), 1), "steady_runs_p99_ms": p99(latencies)}


def bench(n: int, deadline: float, profile: str = "", every: float = 0.5,
          steady_seconds: float = 0.0, threads_cpu: bool = False) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="jr2-bench-serve-"))
    nodes = [Node(f"n{i}", 10_000_000, 2**44) for i in range(4)]
    try:
        with FakeCluster(nodes=nodes, start_seconds=0.05, bookmark_interval=None, quota=None) as cluster:
            named = {"PYTHONPATH": os.pathsep.join(filter(None, [str(THREAD_NAMES), os.environ.get("PYTHONPATH")]))}
            proc, url, lines = serve(tmp, cluster.write_kubeconfig(str(tmp / "kubeconfig")),
                                     env=named if threads_cpu else None)
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {TOKEN}"
            sampler = Sampler(proc.pid)
            cpu0 = sampler.cpu()
            t0 = time.monotonic()
            series = Series(url, sampler, every)
            submit_errors: list[str] = []

            def submit(_: int) -> None:
                r = session.post(url + "/runs", json={"workflow": WORKFLOW}, timeout=120)
                if r.status_code != 201:
                    submit_errors.append(f"{r.status_code} {r.text[:120]}")

            with ThreadPoolExecutor(8) as pool:
                list(pool.map(submit, range(n)))
            submitted = time.monotonic() - t0
            placed_at = None
            polls: list[float] = []
            while time.monotonic() - t0 < deadline:
                s = time.monotonic()
                r = session.get(url + "/runs", timeout=60)
                polls.append(time.monotonic() - s)
                runs = r.json()["runs"] if r.status_code == 200 else []
                if len(runs) >= n and not any("placing" in run for run in runs):
                    placed_at = time.monotonic() - t0
                    break
                time.sleep(1.0)
            cpu_placed = sampler.cpu() - cpu0
            kinds = run_time_by_kind(proc.pid) if threads_cpu else {}
            points = series.stop()
            profiled = profile_listing(session, url, proc.pid, profile) if profile else 0
            idle_cpu = idle_share(sampler)
            latencies = listing_latencies(session, url)
            small = []  # the same call for the runs of one id prefix (about 1/256 of them): the fixed cost
            for _ in range(50):
                s = time.monotonic()
                session.get(url + "/runs", params={"prefix": "r-00"}, timeout=60)
                small.append(time.monotonic() - s)
            placed = t0 + (placed_at or submitted)
            later = steady(cluster, sampler, session, url, placed, steady_seconds) if steady_seconds else {}
            health = session.get(url + "/healthz", timeout=30)
            now = sampler.sample()
            sampler.stop()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
            log = "".join(lines)
            return {
                "runs": n, "submitted_s": round(submitted, 1),
                "all_placed_s": None if placed_at is None else round(placed_at, 1),
                "submit_errors": len(submit_errors), "first_error": submit_errors[:1],
                "cpu_s_per_run_ms": round(1000 * cpu_placed / n, 1),
                "peak_rss_mib": round(sampler.peak["rss_mib"]), "peak_threads": sampler.peak["threads"],
                "peak_fds": sampler.peak["fds"], "threads_live": now["threads"], "fds_live": now["fds"],
                "runs_p50_ms": round(1000 * statistics.median(latencies), 1),
                "runs_p99_ms": p99(latencies),
                "prefix_p50_ms": round(1000 * statistics.median(small), 1),
                "idle_cpu_share": round(idle_cpu, 3), "profiled_calls": profiled,
                "runs_max_while_placing_ms": round(1000 * max(polls), 1) if polls else None,
                "actors_died": len(re.findall(r"its actor died", log)),
                "timeouts_in_log": len(re.findall(r"Timeout", log)),
                "healthz": health.status_code, **later, "series": points, "kinds": kinds,
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, action="append", help="concurrent runs (repeatable; default 200)")
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds to wait for every run placed")
    parser.add_argument("--profile", default="", help="py-spy raw stacks of serve while GET /runs is called")
    parser.add_argument("--steady", type=float, default=0.0, metavar="SECONDS",
                        help="after the first renewals, serve's CPU and renewals over SECONDS, then GET /runs again")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between the series' points")
    parser.add_argument("--plot", default="", help="PNG of the last --runs' RSS and threads against live runs")
    parser.add_argument("--series", default="", help="JSON of every --runs' series")
    parser.add_argument("--threads-cpu", action="store_true",
                        help="name serve's OS threads by kind (bench/thread_names) and print each kind's CPU")
    args = parser.parse_args()
    if any(n < 1 for n in args.runs or []) or args.deadline <= 0 or args.every <= 0 or args.steady < 0:
        parser.error("--runs must be at least 1, --deadline and --every positive, --steady not negative")
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    results = []
    for n in args.runs or [200]:
        out = bench(n, args.deadline, f"{args.profile}.{n}" if args.profile else "", args.every, args.steady,
                    args.threads_cpu)
        results.append(out)
        print({k: v for k, v in out.items() if k not in ("series", "kinds")}, flush=True)
        if out["kinds"]:
            print_kinds(out["kinds"], n)
        print(f"  series: {len(out['series'])} points; load average "
              + ", ".join(f"{x:.1f}" for x in os.getloadavg()), flush=True)
    if args.series:
        Path(args.series).write_text(json.dumps({str(r["runs"]): r["series"] for r in results}, indent=0))
    last = results[-1]
    if args.plot:
        print("plot:", plot_series(last["series"], last["runs"], Path(args.plot)))
    n = last["runs"]
    emit("serve_runs", [
        Row(f"threads at {n:,} live runs vs one per actor (2 a run)", last["threads_live"], 2 * n, "",
            "≈ 1 (plus a fixed few)"),
        Row(f"peak RSS at {n:,} live runs", last["peak_rss_mib"], 0, "MiB"),
        Row(f"peak fds at {n:,} live runs", last["peak_fds"], 0, ""),
        Row(f"submit → all {n:,} placed", last["all_placed_s"] or float("nan"), 0, "s"),
        Row(f"GET /runs p99 at {n:,} live runs", last["runs_p99_ms"], 0, "ms", "< 50 ms at 5,000"),
        Row(f"actors died of {n:,}", last["actors_died"], 0, "", "0"),
    ], series={"RSS and threads against live runs": as_series(last["series"], n)})

if __name__ == "__main__":
    run_main("serve_runs", main)
