"""How long a client command takes to start and leave: wall time of 10 runs of each command, each in a fresh
interpreter, against a server that is not there (so what is timed is the start, not a server), beside
`python -c pass` (the interpreter's own start). The goal is under 0.3 s.

    python bench/cli_startup.py [--runs 10] [--tree PATH]   # --tree: time another checkout (a "before")

`python -X importtime -c 'import jr2_actors.cli'` shows where the import time goes.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time


def timed(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=False)
        took.append(time.perf_counter() - start)
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tree", help="a checkout to time instead of the installed package")
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = dict(os.environ, JR2_INSTANCE_TOKEN="bench-token")  # noqa: S106 - any token: no server answers
    if args.tree:
        env["PYTHONPATH"] = args.tree
    commands = {"runs --help": ["runs", "--help"], "status RUN (no server)": ["status", "r-0123", "--server", dead],
                "submit FILE (a missing file)": ["submit", "/no/such.yaml", "--server", dead]}
    for name, argv in commands.items():
        took = timed([sys.executable, "-m", "jr2_actors", *argv], args.runs, env)
        print(f"{name:30} median {statistics.median(took):.3f} s  min {min(took):.3f}  max {max(took):.3f}")
    took = timed([sys.executable, "-c", "pass"], args.runs, env)
    print(f"{'python -c pass':30} median {statistics.median(took):.3f} s")


if __name__ == "__main__":
    main()
