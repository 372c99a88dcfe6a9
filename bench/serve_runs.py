"""N concurrent runs through `jr2-actors serve` as a real process on the fake cluster (issue 18 item 2).

The fake cluster runs in this process (its threads are not serve's); serve runs as a child on its kubeconfig.
Each run holds one Workspace in a state that waits an hour (`after`), so every run stays live with its
RunActor and its WorkspaceActor (placed, attached, its Lease renewed) and no Turn. Figures for the serve
process alone, read from /proc: peak RSS, threads and fds, CPU-seconds per run (submit to every run
placed), `GET /runs` p50/p99 over sequential calls once all are live, and how many actors died (its log).

    python bench/serve_runs.py --runs 200 [--runs 1000 ...] [--deadline 600]

Everything it writes is under one temp folder, removed at the end.
"""

from __future__ import annotations

import argparse
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node

TOKEN = secrets.token_hex(16)  # this run's own: serve reads it from its environment
KEY = secrets.token_hex(32)
WORKFLOW = {
    "name": "hold",
    "workspaces": {"W": {"size": {"cpu": "10m", "memory": "16Mi"}}},
    "agents": {"worker": {"instructions": "You work.", "workspace": "W", "access": "write"}},
    "start": "hold",
    "states": {"hold": {"holds": ["W"], "after": {"seconds": 3600, "to": "done"}}, "done": {"final": "done"}},
}
TICK = os.sysconf("SC_CLK_TCK")


class Sampler:
    """Serve's RSS, threads, fds and CPU from /proc, sampled every 0.2 s on a thread; peaks kept."""

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
        threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
        fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        return {"rss_mib": rss, "threads": threads, "fds": fds}

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                now = self.sample()
            except (OSError, AttributeError):
                return
            for k, v in now.items():
                self.peak[k] = max(self.peak[k], v)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


def serve(tmp: Path, kubeconfig: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")}
    env.update({"JR2_INSTANCE_TOKEN": TOKEN, "JR2_SIGNING_KEY": KEY, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp)})
    proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", "--log-level", "info", "serve", "--namespace", "jr2",
                             "--state-dir", str(tmp / "state"), "--kubeconfig", kubeconfig,
                             "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, env=env)
    lines: list[str] = []
    ready = threading.Event()
    url: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            found = re.search(r"serving the API on (http://\S+);", line)
            if found:
                url.append(found.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(60) or not url:
        proc.kill()
        raise SystemExit("serve did not start:\n" + "".join(lines[-20:]))
    return proc, url[0], lines


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


def bench(n: int, deadline: float, profile: str = "") -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="jr2-bench-serve-"))
    nodes = [Node(f"n{i}", 10_000_000, 2**44) for i in range(4)]
    try:
        with FakeCluster(nodes=nodes, start_seconds=0.05, bookmark_interval=None, quota=None) as cluster:
            proc, url, lines = serve(tmp, cluster.write_kubeconfig(str(tmp / "kubeconfig")))
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {TOKEN}"
            sampler = Sampler(proc.pid)
            cpu0 = sampler.cpu()
            t0 = time.monotonic()
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
            profiled = profile_listing(session, url, proc.pid, profile) if profile else 0
            idle_cpu = idle_share(sampler)
            latencies = []
            for _ in range(200):
                s = time.monotonic()
                r = session.get(url + "/runs", timeout=60)
                latencies.append(time.monotonic() - s)
                assert r.status_code == 200, r.text
            small = []  # the same call for the runs of one id prefix (about 1/256 of them): the fixed cost
            for _ in range(50):
                s = time.monotonic()
                session.get(url + "/runs", params={"prefix": "r-00"}, timeout=60)
                small.append(time.monotonic() - s)
            health = session.get(url + "/healthz", timeout=30)
            now = sampler.sample()
            sampler.stop()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
            log = "".join(lines)
            latencies.sort()
            return {
                "runs": n, "submitted_s": round(submitted, 1),
                "all_placed_s": None if placed_at is None else round(placed_at, 1),
                "submit_errors": len(submit_errors), "first_error": submit_errors[:1],
                "cpu_s_per_run_ms": round(1000 * cpu_placed / n, 1),
                "peak_rss_mib": round(sampler.peak["rss_mib"]), "peak_threads": sampler.peak["threads"],
                "peak_fds": sampler.peak["fds"], "threads_live": now["threads"], "fds_live": now["fds"],
                "runs_p50_ms": round(1000 * statistics.median(latencies), 1),
                "runs_p99_ms": round(1000 * latencies[int(0.99 * len(latencies)) - 1], 1),
                "prefix_p50_ms": round(1000 * statistics.median(small), 1),
                "idle_cpu_share": round(idle_cpu, 3), "profiled_calls": profiled,
                "runs_max_while_placing_ms": round(1000 * max(polls), 1) if polls else None,
                "actors_died": len(re.findall(r"its actor died", log)),
                "timeouts_in_log": len(re.findall(r"Timeout", log)),
                "healthz": health.status_code,
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, action="append", help="concurrent runs (repeatable; default 200)")
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds to wait for every run placed")
    parser.add_argument("--profile", default="", help="py-spy raw stacks of serve while GET /runs is called")
    args = parser.parse_args()
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for n in args.runs or [200]:
        print(bench(n, args.deadline, f"{args.profile}.{n}" if args.profile else ""), flush=True)


if __name__ == "__main__":
    main()
