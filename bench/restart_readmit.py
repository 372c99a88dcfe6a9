"""After a kernel kill mid-Turn, how soon the next Turn of that conversation is admitted to the new Harness
process, through `serve` as a process on the strict fake (CONTRACTS.md §3: the new process settles none of
the old Submissions). The run cannot act before the watch shows the kill, so the baseline measured in the
same round is the watch's own lag: the figure is the admission's delay after the new process began, and
the ratio says how much of it the Orchestrator added. within 5 s of the new Harness answering.

    python bench/restart_readmit.py [--rounds 5] [--watch-lag 0.5]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests

from bench.report import Row, emit, run_main
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick, Say
from jr2_actors.sim.serve_process import ServeProcess
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.identity import sandbox_name

TOKEN = "bench-instance-token-0123456789abcdef"  # noqa: S105 (a bench's own, on loopback)
KEY = "bench-signing-key-0123456789abcdef-0123456789abcdef"
WORKFLOW = """
name: restart
workspaces:
  F-1: {size: {cpu: "1", memory: "2Gi"}}
agents:
  coder: {instructions: "You fix.", workspace: F-1, access: write}
start: code
states:
  code:
    holds: [F-1]
    turn: {agent: coder, prompt: "Fix it."}
    on: {finish: done, agent.fault: again}
  again:
    holds: [F-1]
    turn: {agent: coder, prompt: "Fix it again."}
    on: {finish: done}
  done: {final: done}
"""


def wait(what: str, done: Any, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"restart_readmit: {what} did not happen within {seconds:g}s")
        time.sleep(0.02)


def one_round(lag: float, folder: Path) -> float:
    """Seconds from the new Harness process's start to the next Turn's admission to it."""
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None, signing_key=KEY.encode(),
                     harness_mode="strict") as cluster:
        cluster.script("coder", [Say("working"), Hang()], [Pick("finish")])
        kubeconfig = cluster.write_kubeconfig(str(folder / "kubeconfig"))
        env = {**os.environ, "JR2_INSTANCE_TOKEN": TOKEN, "JR2_SIGNING_KEY": KEY, "TMPDIR": str(folder)}
        serve = ServeProcess(kubeconfig, str(folder / "state"), env=env)
        try:
            if not serve.ready(30):
                raise SystemExit("restart_readmit: serve did not start:\n" + "".join(serve.lines[-20:]))
            answer = requests.post(serve.url + "/runs", json={"workflow": read_document(WORKFLOW)}, timeout=10,
                                   headers={"Authorization": f"Bearer {TOKEN}"})
            name = sandbox_name(answer.json()["runId"], "F-1")

            def coder() -> list[dict[str, Any]]:
                return [a for a in cluster.admissions() if a["agent"] == "coder"]

            wait("the first admission", lambda: len(coder()) == 1)
            cluster.faults.kernel_oom(name, watch_lag=lag)
            wait("the next Turn's admission", lambda: len(coder()) == 2)
            boots = cluster.harness_read(lambda core: list(core.boots))
            began = next(b["began"] for b in boots if b["bootId"] == coder()[1]["bootId"])
            return float(coder()[1]["at"]) - float(began)
        finally:
            serve.proc.send_signal(signal.SIGTERM)
            serve.proc.wait(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--watch-lag", type=float, default=0.5, help="seconds the watch shows the kill late")
    args = parser.parse_args()
    if args.rounds < 1 or not 0 < args.watch_lag <= 10:
        parser.error("--rounds must be at least 1 and --watch-lag within (0, 10]")
    delays = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="jr2-bench-restart-") as folder:
            delays.append(one_round(args.watch_lag, Path(folder)))
    median = statistics.median(delays)
    print(f"next Turn admitted after the new Harness began: median {median:.2f}s, max {max(delays):.2f}s "
          f"over {args.rounds} rounds (the watch's lag {args.watch_lag:g}s: {median / args.watch_lag:.2f}x)")
    emit("restart_readmit", [Row("next Turn after a kernel kill", median, args.watch_lag, "s", "≤ 5 s")],
         samples={"delays": delays})


if __name__ == "__main__":
    run_main("restart_readmit", main)
