"""`jr2-actors top`: a running orchestrator at a glance, read from its `/metrics` (open, no token).

    jr2-actors top [--server URL] [--once] [--interval SECONDS]

Which actor kind is falling behind (mailbox depth, the oldest waiting message, processing time), the
busiest few actors (by kind and the run they serve), the one watch's state, the live runs with their
Workspaces and open waits, and the store and the cluster client. `/metrics` holds nothing a workflow's
author wrote: with the Instance token (`JR2_INSTANCE_TOKEN` or `--token-file`) it also counts the live runs
by workflow state, from `GET /runs`. Live (`rich`), refreshed every `--interval` seconds
until Ctrl-C, with per-second rates once two scrapes are in; `--once` prints one view and exits, for
scripts and tests. A server that cannot be read is one line on stderr and exit 2; once live, a failed
refresh is shown in place and the next one tried. The view is `topview.py`, loaded only when `top` runs:
every other command starts without `rich` and the metric modules.
"""

from __future__ import annotations

import argparse
import os
import threading
from typing import Any

from jr2_actors.commands.common import positive_seconds

DEFAULT_SERVER = "http://127.0.0.1:8080"
TIMEOUT = (3.0, 10.0)
PLAIN_WIDTH = 132  # when stdout is not a terminal (`--once` into a file or a pipe)


def add_parser(sub: Any) -> None:
    top = sub.add_parser("top", help="a live view of a running orchestrator, read from its /metrics",
                         description="A live view of a running orchestrator, read from its /metrics. "
                                     "Example: jr2-actors top --server http://127.0.0.1:8080")
    top.add_argument("--server", default=os.environ.get("JR2_SERVER", DEFAULT_SERVER),
                     help=f"the orchestrator's API (default: $JR2_SERVER, else {DEFAULT_SERVER})")
    top.add_argument("--once", action="store_true",
                     help="print one view and exit, for scripts and tests (default: live until Ctrl-C)")
    top.add_argument("--token-file",
                     help="a file holding the Instance token, to count the runs by state from GET /runs "
                          "(default: $JR2_INSTANCE_TOKEN; without one, the states are not shown)")
    top.add_argument("--interval", type=positive_seconds, default=2.0,
                     help="seconds between refreshes when live (default: 2)")


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    from jr2_actors.commands import topview

    return topview.run(args, stop)
