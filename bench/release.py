"""A release: N one-Turn runs submitted at once to `jr2-actors serve`, until every one is final.

The fake cluster runs in a process of its own (this script, `--fake-child`), so its threads are not serve's
and serve's CPU is its own; serve runs as a child on its kubeconfig, with `--max-memory` (default 1Gi, the
pod's limit in manifests/) as its budget. Two Harness layouts: `one` (every Sandbox's Harness at one
address, as the fake serves them by default and as an Instance Harness serves every Menu-only Agent) and
`own` (each Sandbox's at an address of its own: the fake listens on N ports).

Sixteen client threads submit the N runs (each refused one — 503 + Retry-After — again after its
Retry-After); meanwhile, one point a second: the runs final (accepted − serve's `jr2_runs_live`), serve's RSS
and threads, `POST /runs` refusals so far, and the slowest `GET /healthz` of the second (asked every 0.25 s
on a connection of its own). Figures: the drain's per-run rate (runs / seconds from the first submit to the
last final) and its ratio to the 1,000 release's in the same layout (goal ≥ 0.8 for 5,000), `/healthz`'s
worst (goal < 100 ms), peak RSS and threads, refusals, the Harness connections the fake accepted, and the
"Connection pool is full" lines in serve's log.

    python -m bench.release --runs 1000 [--runs 5000] [--layout one,own] [--deadline 900] [--plot F.png]

Everything it writes is under one temp folder, removed at the end (`--plot`, `--series` excepted).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
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

from bench.release_plot import plot
from bench.report import Row, emit
from bench.serve_runs import KEY, TOKEN, Sampler, metric_sum, serve

WORKFLOW = {
    "name": "one-turn",
    "workspaces": {"W": {"size": {"cpu": "10m", "memory": "16Mi"}}},
    "agents": {"worker": {"instructions": "You work.", "workspace": "W", "access": "write"}},
    "start": "work",
    "states": {"work": {"holds": ["W"], "turn": {"agent": "worker", "prompt": "Work."}, "on": {"finish": "done"}},
               "done": {"final": "done"}},
}
SUBMITTERS = 16
STOPPING = threading.Event()  # Ctrl-C: the submitters stop at once (the pool's threads would hold the exit)


def fake_child(ports: int, kubeconfig: str) -> None:
    """The fake cluster's process: up until its stdin closes; a `stats` line asks for its connection counts.
    A Ctrl-C is the bench's to handle (it closes this process's stdin)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from jr2_actors.fake.cluster import FakeCluster
    from jr2_actors.fake.operator.core import Node

    nodes = [Node(f"n{i}", 10_000_000, 2**44) for i in range(4)]
    with FakeCluster(nodes=nodes, start_seconds=0.05, bookmark_interval=None, quota=None,
                     signing_key=bytes.fromhex(KEY), harness_ports=ports) as cluster:
        cluster.harness(lambda core: core.pick_first_allowed(True))
        cluster.write_kubeconfig(kubeconfig)
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "stats":
                print(json.dumps({"accepted": cluster.accepted(), "connections": cluster.connections()}), flush=True)


PROBES = re.compile(r"answering probes \(GET /healthz\) on (http://\S+)")


class Health:
    """`GET /healthz` every 0.25 s as a kubelet probes: a new connection each time, `Connection: close` (the
    listener's gate answers such a probe itself, api/server.py). Each latency (ms) and answer, stamped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.samples: list[tuple[float, float, int]] = []  # (monotonic, ms, status)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            began = time.monotonic()
            try:
                status = requests.get(self.url, headers={"Connection": "close"}, timeout=30).status_code
            except requests.RequestException:
                status = 0
            self.samples.append((began, 1000 * (time.monotonic() - began), status))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(35)


CONTROL = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the bench's to handle: it stops this process
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def start_control() -> tuple[subprocess.Popen[str], str]:
    """A process that answers every GET at once and does nothing else: its latency, probed beside serve's
    /healthz, is what the machine alone adds (a CPU shared with other work), serve's latency above it is
    serve's own."""
    proc = subprocess.Popen([sys.executable, "-c", CONTROL], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{proc.stdout.readline().strip()}"


def cpu_of(pid: int) -> float:
    """A process's CPU seconds so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def release(n: int, layout: str, deadline: float, max_memory: str) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="jr2-bench-release-"))
    kubeconfig = str(tmp / "kubeconfig")
    ports = n + 8 if layout == "own" else 1
    fake = subprocess.Popen([sys.executable, "-m", "bench.release", "--fake-child", "--ports", str(ports),
                             "--kubeconfig", kubeconfig], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=str(Path(__file__).resolve().parent.parent))
    children: list[subprocess.Popen[str]] = []  # serve and the control, stopped whatever ends the release
    try:
        assert fake.stdout is not None and fake.stdin is not None
        if fake.stdout.readline().strip() != "ready":
            raise SystemExit("the fake cluster did not start")
        # serve as the manifests start it: its probe listener (`--probe-listen`) is what a kubelet asks.
        proc, url, lines = serve(tmp, kubeconfig, extra=("--probe-listen", "127.0.0.1:0"),
                                 env={"JR2_MAX_MEMORY": max_memory}, wait=120.0)
        probes_url = next(m.group(1) for line in lines if (m := PROBES.search(line)))
        children.append(proc)
        controller, control_url = start_control()
        children.append(controller)
        sampler = Sampler(proc.pid)
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {TOKEN}"
        session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=SUBMITTERS + 4))
        accepted, refusals, errors = [0], [0], []
        lock = threading.Lock()
        # The API port's own /healthz (api_health) answers the same document, on serve's interpreter lock.
        health, control, api_health = (Health(u + "/healthz") for u in (probes_url, control_url, url))
        t0 = time.monotonic()
        cpu0, fake_cpu0 = sampler.cpu(), cpu_of(fake.pid)
        last_cpu = (t0, cpu0, fake_cpu0)

        def submit(_: int) -> None:
            while time.monotonic() - t0 < deadline and not STOPPING.is_set():
                try:
                    r = session.post(url + "/runs", json={"workflow": WORKFLOW}, timeout=120)
                except requests.RequestException as e:
                    errors.append(str(e)[:120])
                    return
                if r.status_code == 201:
                    with lock:
                        accepted[0] += 1
                    return
                if r.status_code == 503 and r.headers.get("Retry-After", "").isdigit():
                    with lock:
                        refusals[0] += 1
                    STOPPING.wait(int(r.headers["Retry-After"]))
                    continue
                errors.append(f"{r.status_code} {r.text[:120]}")
                return

        pool = ThreadPoolExecutor(SUBMITTERS)
        submitting = [pool.submit(submit, i) for i in range(n)]
        points: list[dict[str, float]] = []
        metrics = requests.Session()
        drained = None
        while time.monotonic() - t0 < deadline:
            time.sleep(1.0)
            try:
                live = metric_sum(metrics.get(url + "/metrics", timeout=10).text, "jr2_runs_live")
            except requests.RequestException:
                continue
            now, at = sampler.sample(), time.monotonic() - t0
            second = [ms for t, ms, _ in health.samples if t >= t0 + at - 1.0]
            beside = [ms for t, ms, _ in control.samples if t >= t0 + at - 1.0]
            cpu_now = (time.monotonic(), sampler.cpu(), cpu_of(fake.pid))
            span = max(cpu_now[0] - last_cpu[0], 1e-3)
            serve_share, fake_share = ((cpu_now[i] - last_cpu[i]) / span for i in (1, 2))
            last_cpu = cpu_now
            with lock:
                final = max(accepted[0] - live, 0)  # a run posted whose 201 is still on its way is live
                # Runs final a second, over the last 10 s (one point a second is too coarse for a rate).
                before = next((p for p in reversed(points) if p["t_s"] <= at - 10), None)
                rate = (final - before["final"]) / (at - before["t_s"]) if before else final / max(at, 1e-3)
                points.append({"t_s": round(at, 1), "final": final, "final_per_s": round(rate, 2),
                               "accepted": accepted[0], "refused": refusals[0],
                               "rss_mib": round(now["rss_now_mib"], 1), "threads": now["threads"],
                               "healthz_ms": round(max(second), 1) if second else 0.0,
                               "control_ms": round(max(beside), 1) if beside else 0.0,
                               "serve_cpu": round(serve_share, 2), "fake_cpu": round(fake_share, 2)})
            if all(f.done() for f in submitting) and accepted[0] + len(errors) >= n and live == 0:
                drained = at
                break
        cpu, fake_cpu = sampler.cpu() - cpu0, cpu_of(fake.pid) - fake_cpu0
        try:
            exposition = metrics.get(url + "/metrics", timeout=60).text
        except requests.RequestException:
            exposition = ""
        pools = {k: metric_sum(exposition, f"jr2_harness_{k}") for k in
                 ("pools", "pool_evictions_total", "pool_connections", "pool_connections_opened_total",
                  "pool_full_total")}
        pool.shutdown(wait=False, cancel_futures=True)
        for sampler_ in (health, api_health, control):
            sampler_.stop()
        fake.stdin.write("stats\n")
        fake.stdin.flush()
        stats = json.loads(fake.stdout.readline())
        sampler.stop()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log = "".join(lines)
        controller.kill()
        controller.wait(10)
        latencies = sorted(ms for _, ms, _ in health.samples)
        beside = sorted(ms for _, ms, _ in control.samples)
        on_api = sorted(ms for _, ms, _ in api_health.samples)
        return {
            "runs": n, "layout": layout, "drained_s": None if drained is None else round(drained, 1),
            "final": points[-1]["final"] if points else 0, "runs_per_s": round(n / drained, 2) if drained else None,
            "cpu_s": round(cpu, 1), "fake_cpu_s": round(fake_cpu, 1),
            "serve_cpu_busy": sum(1 for p in points if p["serve_cpu"] >= 0.9),
            "fake_cpu_busy": sum(1 for p in points if p["fake_cpu"] >= 0.9), "pools": pools,
            "refused": refusals[0], "submit_errors": len(errors), "first_error": errors[:1],
            "peak_rss_mib": round(sampler.peak["rss_mib"]), "peak_threads": sampler.peak["threads"],
            "healthz_max_ms": round(latencies[-1], 1) if latencies else None,
            "healthz_p99_ms": round(latencies[int(0.99 * len(latencies)) - 1], 1) if latencies else None,
            "healthz_over_100ms": sum(1 for x in latencies if x > 100), "healthz_samples": len(latencies),
            "healthz_not_200": sum(1 for _, _, s in health.samples if s != 200),
            "control_max_ms": round(beside[-1], 1) if beside else None,
            "control_p99_ms": round(beside[int(0.99 * len(beside)) - 1], 1) if beside else None,
            "control_over_100ms": sum(1 for x in beside if x > 100),
            "api_healthz_p99_ms": round(on_api[int(0.99 * len(on_api)) - 1], 1) if on_api else None,
            "api_healthz_max_ms": round(on_api[-1], 1) if on_api else None,
            "harness_accepted": stats["accepted"].get("harness"), "api_accepted": stats["accepted"].get("api"),
            "pool_full_lines": log.count("pool is full"), "tracebacks": log.count("Traceback"),
            "pool_full_first": [x.strip()[:200] for x in lines if "pool is full" in x][:1],
            "series": points,
        }
    finally:
        STOPPING.set()
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(60)
                except subprocess.TimeoutExpired:
                    child.kill()
        if fake.stdin is not None:
            fake.stdin.close()
        try:
            fake.wait(30)
        except subprocess.TimeoutExpired:
            fake.kill()
            fake.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def timeline(r: dict[str, Any], rows: int = 12) -> str:
    """The series at about `rows` evenly spaced seconds: what the plot draws, as text."""
    series = r["series"]
    if not series:
        return ""
    picks = sorted({round(i * (len(series) - 1) / (rows - 1)) for i in range(rows)})
    out = [f"{'t s':>7} {'final':>6} {'final/s':>8} {'accepted':>8} {'refused':>7} {'RSS MiB':>8} {'threads':>7} "
           f"{'healthz ms':>10} {'control ms':>10} {'serve cpu':>9} {'fake cpu':>8}"]
    for p in (series[i] for i in picks):
        out.append(f"{p['t_s']:>7} {p['final']:>6.0f} {p['final_per_s']:>8} {p['accepted']:>8} {p['refused']:>7} "
                   f"{p['rss_mib']:>8} {p['threads']:>7} {p['healthz_ms']:>10} {p.get('control_ms', 0):>10} "
                   f"{p['serve_cpu']:>9} {p['fake_cpu']:>8}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, action="append", help="runs released at once (repeatable; 1000)")
    parser.add_argument("--layout", default="one,own", help="one, own or one,own: the Harness addresses")
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds a release may take to drain")
    parser.add_argument("--max-memory", default="1Gi", help="serve's memory budget (JR2_MAX_MEMORY; the pod's)")
    parser.add_argument("--plot", default="", help="PNG of every release's series")
    parser.add_argument("--series", default="", help="JSON of every release's figures and series")
    parser.add_argument("--replot", default="", metavar="JSON,...",
                        help="draw --plot from earlier --series files (comma-separated), running nothing")
    parser.add_argument("--fake-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ports", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fake_child:
        fake_child(args.ports, args.kubeconfig)
        return
    if args.replot:
        try:
            earlier = [r for f in args.replot.split(",") for r in json.loads(Path(f).read_text())]
        except (OSError, ValueError) as e:
            parser.exit(2, f"release: --replot: {e}\n")
        print("plot:", plot(earlier, Path(args.plot or "release.png")))
        return
    layouts = [x for x in args.layout.split(",") if x]
    if not layouts or set(layouts) - {"one", "own"}:
        parser.error("--layout is one, own or one,own")
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          + ", ".join(f"{x:.1f}" for x in os.getloadavg()), flush=True)
    results = []
    for layout in layouts:
        for n in sorted(args.runs or [1000]):
            try:
                out = release(n, layout, args.deadline, args.max_memory)
            except KeyboardInterrupt:
                print("interrupted: serve, the fake and the temp folder are gone", file=sys.stderr)
                raise SystemExit(130) from None
            STOPPING.clear()
            results.append(out)
            print({k: v for k, v in out.items() if k != "series"}, flush=True)
            print(timeline(out), flush=True)
    if args.series:
        Path(args.series).write_text(json.dumps(results, indent=0))
    if args.plot:
        print("plot:", plot(results, Path(args.plot)))
    rows = []
    for layout in layouts:
        mine = sorted((r for r in results if r["layout"] == layout), key=lambda r: r["runs"])
        base = mine[0]
        for r in mine:
            label = f"{r['runs']:,} runs, {layout} address{'es' if layout == 'own' else ''}"
            if r is not base and r["runs_per_s"] and base["runs_per_s"]:
                rows.append(Row(f"{label}: drain rate vs {base['runs']:,}'s (runs/s)", r["runs_per_s"],
                                base["runs_per_s"], "runs/s", "≥ 0.8"))
            rows.append(Row(f"{label}: slowest GET /healthz", r["healthz_max_ms"] or float("nan"), 0, "ms", "< 100"))
            rows.append(Row(f"{label}: GET /healthz p99, probe listener vs the API port's", r["healthz_p99_ms"]
                            or float("nan"), r.get("api_healthz_p99_ms") or 0, "ms"))
            rows.append(Row(f"{label}: drained in", r["drained_s"] or float("nan"), 0, "s"))
    for row in rows:
        ratio = f"{row.ratio:.2f}" if row.baseline else ""
        print(f"{row.figure:<70} {row.ours:>9.4g} {row.baseline:>9.4g} {ratio:>6} {row.goal}")
    emit("release", rows)


if __name__ == "__main__":
    main()
