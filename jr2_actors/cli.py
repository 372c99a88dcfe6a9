"""The `jr2-actors` command line (CONTRACTS.md §6)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, TextIO

from jr2_actors import __version__
from jr2_actors.errors import ClusterAccessError

log = logging.getLogger("jr2_actors")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jr2-actors", description="The jr2 Orchestrator's cluster-facing core.")
    parser.add_argument("--version", action="version", version=f"jr2-actors {__version__}")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    watch = sub.add_parser("watch", help="the WatchActor alone: one JSON line per delivery and per termination")
    watch.add_argument("--namespace", required=True)
    watch.add_argument("--kubeconfig")
    watch.add_argument("--context")
    watch.add_argument("--stall-seconds", type=float, default=None)

    fake = sub.add_parser("fake-cluster", help="the fake cluster alone, on loopback, until interrupted")
    fake.add_argument("--port", type=int, default=0)
    fake.add_argument("--namespace", default="jr2")
    fake.add_argument("--kubeconfig-out", required=True)
    fake.add_argument("--bookmark-seconds", type=float, default=60.0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        if args.command == "watch":
            return run_watch(args)
        if args.command == "fake-cluster":
            return run_fake_cluster(args)
    except ClusterAccessError as e:
        print(f"jr2-actors: {e}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command}")


def until_signalled() -> None:
    """Block until SIGINT or SIGTERM; both are a clean stop."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass


class JsonLines:
    """Prints the WatchActor's deliveries and terminations, one JSON object per line."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def tell(self, message: Any) -> None:
        from jr2_actors.watch.actor import SandboxGone, SandboxSeen, WatchFailed, WatchReport
        from jr2_actors.watch.core import Terminated

        doc: dict[str, Any] | None = None
        if isinstance(message, SandboxSeen):
            doc = {"delivery": "seen", "name": message.sandbox.name, "uid": message.sandbox.uid,
                   "resourceVersion": message.sandbox.resource_version, "phase": message.sandbox.phase}
        elif isinstance(message, SandboxGone):
            doc = {"delivery": "gone", "name": message.name, "uid": message.uid, "resourceVersion": None,
                   "phase": None, "reason": message.reason}
        elif isinstance(message, WatchFailed):
            doc = {"delivery": "failed", "name": None, "uid": None, "resourceVersion": None, "phase": None,
                   "termination": message.termination.value, "message": message.message}
        elif isinstance(message, WatchReport) and isinstance(message.report, Terminated):
            r = message.report
            doc = {"termination": r.termination.value, "action": r.action, "resourceVersion": r.resource_version,
                   "detail": r.detail}
        if doc is not None:
            with self._lock:
                self._out.write(json.dumps(doc) + "\n")
                self._out.flush()


def run_watch(args: argparse.Namespace) -> int:
    from jr2_actors.constants import STALL_BOUND_SECONDS
    from jr2_actors.kube.access import LocalFiles, resolve
    from jr2_actors.kube.client import KubeClient
    from jr2_actors.watch.actor import WatchActor

    access = resolve(os.environ, LocalFiles(), home=os.environ.get("HOME"), explicit_path=args.kubeconfig,
                     context=args.context)
    client = KubeClient(access)
    stall = args.stall_seconds if args.stall_seconds is not None else STALL_BOUND_SECONDS
    ref = WatchActor.start(client, namespace=args.namespace, stall_bound=stall, tap=JsonLines(sys.stdout))
    try:
        until_signalled()
    finally:
        ref.stop(block=True, timeout=10)
        client.close()
    return 0


def run_fake_cluster(args: argparse.Namespace) -> int:
    from jr2_actors.fake.cluster import FakeCluster

    with FakeCluster(namespace=args.namespace, port=args.port, bookmark_interval=args.bookmark_seconds) as cluster:
        cluster.write_kubeconfig(args.kubeconfig_out)
        print(f"fake cluster: API server {cluster.url} (namespace {args.namespace}), Harness "
              f"{cluster.harness_url}; kubeconfig written to {args.kubeconfig_out}", file=sys.stderr, flush=True)
        until_signalled()
    return 0


if __name__ == "__main__":
    sys.exit(main())
