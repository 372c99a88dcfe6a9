"""A Lease renewal's cost to serve at N live Workspaces, against two baselines measured in the same run.

- serve: `jr2-actors serve` as a process holding N runs (one Workspace each, held an hour), the fake cluster
  in this process (`serve_runs.bench` with its steady window): once every first renewal is over, serve's CPU
  (from /proc) over `--window` seconds, over the renewal PATCHes the fake logged meanwhile — serve's whole
  steady CPU, as issue 33 measured it. The first renewals fall within a fifth of the interval of each attach
  and the second ones 4–6 minutes later, so the window (300 s by default) must take in that second wave. At
  the real interval N Workspaces renew N/300 times a second: the share of a core is that cost × N / 300.
- bare pykka: a child process, as small as an actor program doing the same renewals can be: 2N plain
  `pykka.ThreadingActor`s parked (serve's threads: a RunActor and a WorkspaceActor a run), N Sandboxes of its
  own, and one timer thread that tells an actor "renew" when its renewal falls due — at serve's rate (N/300 a
  second) over the same window —, the actor sending the same merge patch on one shared `KubeClient`. Its CPU
  over the window (less its idle CPU) over the renewals.
- bare call: the same merge patch from one thread, back to back (that thread's CPU per call).

    python bench/renewal_cost.py [--n 5000] [--window 300]

Everything it writes is under temp folders, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
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
from bench.lease_patch import per_call_ms
from bench.report import Row, emit
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.values.constants import LEASE_INTERVAL_SECONDS
from jr2_actors.workspace.manifest import lease_patch

GOAL_SHARE = 0.02  # issue 33: renewals at ≤ 2 % of a core at 5,000 live Workspaces


def bare_child(kubeconfig: str, n: int, window: float) -> dict[str, Any]:
    """In the child: 2N parked actors, N of which renew at serve's rate over `window`."""
    import pykka

    from jr2_actors.kube.access import LocalFiles, load_kubeconfig
    from jr2_actors.kube.client import KubeClient

    client = KubeClient(load_kubeconfig(kubeconfig, LocalFiles()))

    def made(i: int) -> tuple[str, str]:
        name = f"ws-bare-{i}"
        obj = client.create(SANDBOX, {"metadata": {"name": name}, "spec": {"image": "jr2-sandbox:dev", "port": 8080}})
        return name, obj["metadata"]["uid"]

    with ThreadPoolExecutor(8) as pool:
        sandboxes = list(pool.map(made, range(n)))
    done = threading.Semaphore(0)

    class Renewer(pykka.ThreadingActor):
        def __init__(self, name: str, uid: str) -> None:
            super().__init__()
            self.name, self.uid = name, uid

        def on_receive(self, message: Any) -> None:
            if self.name:
                client.merge_patch(SANDBOX, self.name, lease_patch(time.time(), self.uid))
                done.release()

    renewers = [Renewer.start(name, uid) for name, uid in sandboxes]
    for _ in range(n):  # the runs' actors: parked, never told
        Renewer.start("", "")
    time.sleep(5.0)
    c0, t0 = time.process_time(), time.monotonic()
    time.sleep(5.0)
    idle_share = (time.process_time() - c0) / (time.monotonic() - t0)
    count = min(n, int(window * n / LEASE_INTERVAL_SECONDS))
    c0, t0 = time.process_time(), time.monotonic()
    for i in range(count):  # the one timer thread: each renewal told when it falls due
        time.sleep(max(0.0, t0 + window * i / count - time.monotonic()))
        renewers[i].tell("renew")
    for _ in range(count):
        done.acquire(timeout=60)
    used, spent = time.process_time() - c0, time.monotonic() - t0
    pykka.ActorRegistry.stop_all()
    client.close()
    return {"renewals": count, "idle_share": round(idle_share, 4),
            "cpu_ms_per_renewal": round(1000 * (used - idle_share * spent) / count, 3), "threads": 2 * n}


def bare(n: int, window: float) -> dict[str, Any]:
    """The bare call in this process, then the bare pykka program as a child, on one fake cluster."""
    tmp = Path(tempfile.mkdtemp(prefix="jr2-bench-renewal-"))
    nodes = [Node(f"n{i}", 10_000_000, 2**44) for i in range(4)]
    try:
        with FakeCluster(nodes=nodes, start_seconds=0.05, bookmark_interval=None, quota=None) as cluster:
            client = cluster.client()
            obj = client.create(SANDBOX, {"metadata": {"name": "ws-bare-call"},
                                          "spec": {"image": "jr2-sandbox:dev", "port": 8080}})
            uid = obj["metadata"]["uid"]

            def patch() -> object:
                return client.merge_patch(SANDBOX, "ws-bare-call", lease_patch(time.time(), uid))

            per_call_ms(patch, 50)  # warm: the connection made, the code paths hot
            call_ms = sorted(per_call_ms(patch, 300) for _ in range(5))[2]
            client.close()
            kubeconfig = cluster.write_kubeconfig(str(tmp / "kubeconfig"))
            out = subprocess.run([sys.executable, __file__, "--bare-child", kubeconfig, "--n", str(n),
                                  "--window", str(window)], capture_output=True, text=True, timeout=1800)
            if out.returncode != 0:
                raise SystemExit(f"the bare pykka program failed:\n{out.stderr[-2000:]}")
            child = json.loads(out.stdout.strip().splitlines()[-1])
        return {"call_ms": round(call_ms, 3), **{f"pykka_{k}": v for k, v in child.items()}}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="live Workspaces (one run each)")
    parser.add_argument("--window", type=float, default=300.0, help="seconds the steady renewals are counted over")
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds to wait for every run placed")
    parser.add_argument("--bare-child", default="", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.n < 1 or args.window <= 0:
        parser.error("--n must be at least 1 and --window positive")
    if args.bare_child:
        print(json.dumps(bare_child(args.bare_child, args.n, args.window)), flush=True)
        return
    base = bare(args.n, args.window)
    print(base, flush=True)
    served = serve_runs.bench(args.n, args.deadline, steady_seconds=args.window)
    served.pop("series", None)
    print(served, flush=True)
    per = served.get("steady_cpu_ms_per_renewal")
    if not per:
        raise SystemExit("serve sent no renewal in the window: no figure")
    share = per / 1000 * args.n / LEASE_INTERVAL_SECONDS
    pykka_ms, call_ms = base["pykka_cpu_ms_per_renewal"], base["call_ms"]
    print(f"\n{args.n} live Workspaces, {served['steady_renewals']} renewals in serve's {args.window:.0f} s window "
          f"({served['peak_threads']} threads):")
    print(f"{'figure':52}{'ours':>10}{'baseline':>10}{'ratio':>8}")
    print(f"{'serve CPU ms a renewal vs a bare pykka program':52}{per:10.3f}{pykka_ms:10.3f}{per / pykka_ms:8.2f}")
    print(f"{'serve CPU ms a renewal vs the bare merge patch':52}{per:10.3f}{call_ms:10.3f}{per / call_ms:8.2f}")
    print(f"{'share of a core at 5 min vs the 2 % goal':52}{100 * share:9.2f}%{100 * GOAL_SHARE:9.2f}%"
          f"{share / GOAL_SHARE:8.2f}")
    emit("renewal_cost", [
        Row(f"{args.n} Workspaces: serve's CPU a renewal vs a bare pykka program (2N actors)", per, pykka_ms,
            "ms", "≤ 1"),
        Row(f"{args.n} Workspaces: serve's CPU a renewal vs the bare merge patch", per, call_ms, "ms"),
        Row(f"{args.n} Workspaces: renewals' share of a core at 5 min vs the 2 % goal", share, GOAL_SHARE, "",
            "≤ 1"),
    ])


if __name__ == "__main__":
    main()
