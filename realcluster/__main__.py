"""`python -m realcluster`: the real control plane from the checkout (run in the repository's root).

    python -m realcluster build                 # build it (cached outside the checkout); prints its path
    python -m realcluster up [--namespace NS] [--kubeconfig-out F] [--admin-kubeconfig-out F]
                                                # start it on loopback until Ctrl-C or SIGTERM
    python -m realcluster fidelity [--verbose]  # the corpus on the fake and the real server: the score

Every usage error is one line and exit 2; no Go is one line and exit 2 too (nothing to run); Ctrl-C ends
with 130 and leaves no process and no temp folder behind (the cluster's stop runs on the way out).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType

from jr2_actors.commands.common import Parser, namespace_name
from realcluster.build import BuildFailed, GoMissing, build


def _writable(text: str) -> str:
    """A file path whose folder exists and is writable: found now, not after a minute's start."""
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK) or os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be written (its folder is missing or not writable)")
    return text


def _parser() -> Parser:
    p = Parser(prog="python -m realcluster", description="The real control plane for jr2-actors' real tier.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    sub.add_parser("build", help="build etcd + kube-apiserver (cached by a hash of go.mod, go.sum, main.go)")
    up = sub.add_parser("up", help="start it on 127.0.0.1 until Ctrl-C")
    up.add_argument("--namespace", type=namespace_name, default="jr2", help="the orchestrator's (default jr2)")
    up.add_argument("--kubeconfig-out", type=_writable, help="write the orchestrator's kubeconfig here")
    up.add_argument("--admin-kubeconfig-out", type=_writable, help="write an admin (system:masters) kubeconfig here")
    fid = sub.add_parser("fidelity", help="the fidelity corpus on the fake and the real server; prints the score")
    fid.add_argument("--verbose", action="store_true", help="show every difference, the known ones too")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            built = build()
            how = "cached" if built.cached else f"built in {built.seconds:.1f} s"
            print(f"{built.path} ({how})")
            return 0
        if args.command == "fidelity":
            from realcluster.fidelity import main as fidelity_main

            return fidelity_main(verbose=args.verbose)
        return _up(args.namespace, args.kubeconfig_out, args.admin_kubeconfig_out)
    except GoMissing as e:
        print(f"realcluster: {e}", file=sys.stderr)
        return 2
    except BuildFailed as e:
        print(f"realcluster: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _up(namespace: str, kubeconfig: str | None, admin_kubeconfig: str | None) -> int:
    from realcluster.cluster import RealCluster

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        stop.set()  # SIGTERM: a clean stop, exit 0 (SIGINT is Python's KeyboardInterrupt: exit 130)

    signal.signal(signal.SIGTERM, on_signal)
    with RealCluster(namespace=namespace) as cluster:
        assert cluster.admin is not None
        for path, who in ((kubeconfig, cluster.orchestrator), (admin_kubeconfig, cluster.admin)):
            if path:
                cluster.write_kubeconfig(path, who)
        print(f"realcluster: {cluster.url} (namespace {namespace}); ready in {cluster.ready_seconds:.1f} s, "
              f"set up in {cluster.start_seconds:.1f} s; folder {cluster.dir}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
