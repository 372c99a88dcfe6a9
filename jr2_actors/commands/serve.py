"""`jr2-actors serve` (CONTRACTS.md §6): the orchestrator pod's process.

    jr2-actors serve --namespace NS --state-dir DIR [--kubeconfig F] [--context C] [--listen HOST:PORT]
                     [--sandbox-image IMG] [--instance-harness URL] [--token-file F] [--signing-key-file F]

The Instance token comes from `JR2_INSTANCE_TOKEN` or `--token-file`, the signing key (Harness and Sandbox
tokens) from `JR2_SIGNING_KEY` or `--signing-key-file` — never from a flag's value, so neither shows in a
process listing. Every missing or bad input is one line and exit 2. It logs where it listens and which
cluster it watches. SIGTERM (or SIGINT) stops accepting, stops the runs' actors (Turn readers end, Sandboxes
are left for the next start), lets the store finish what it was asked, and exits 0 within 10 s; a start on
the same state directory restores every live run.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from typing import Any

from jr2_actors.commands.common import (
    UsageError,
    cluster_access,
    http_url,
    image_reference,
    namespace_name,
    secret_from,
    until_signalled,
)

log = logging.getLogger("jr2_actors.serve")

DEFAULT_LISTEN = "127.0.0.1:8080"
MIN_TOKEN_CHARS = 16
MIN_KEY_BYTES = 32


def add_parser(sub: Any) -> None:
    serve = sub.add_parser("serve", help="the orchestrator: the API, the watch, the runs (until SIGTERM)")
    serve.add_argument("--namespace", required=True, type=namespace_name,
                       help="the namespace whose Sandboxes this orchestrator owns (required)")
    serve.add_argument("--state-dir", required=True,
                       help="where state.db lives; a start on the same folder restores every live run (required)")
    serve.add_argument("--kubeconfig", help="the kubeconfig file (default: --kubeconfig > $KUBECONFIG > in "
                                            "cluster > ~/.kube/config)")
    serve.add_argument("--context", help="the kubeconfig context (default: its current-context)")
    serve.add_argument("--listen", default=DEFAULT_LISTEN, type=listen_address,
                       help=f"HOST:PORT the API listens on (default: {DEFAULT_LISTEN}; in a pod 0.0.0.0:8080)")
    serve.add_argument("--sandbox-image", default=None, type=image_reference,
                       help="the Sandbox image for Workspaces whose workflow names none "
                            "(default: ghcr.io/jr2/sandbox:latest)")
    serve.add_argument("--instance-harness", default=None, type=http_url,
                       help="the Instance Harness's URL, for Menu-only agents (default: none)")
    serve.add_argument("--token-file", help="a file holding the Instance token (default: $JR2_INSTANCE_TOKEN)")
    serve.add_argument("--signing-key-file", help="a file holding the signing key (default: $JR2_SIGNING_KEY)")


def listen_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or `:PORT` (all interfaces)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (a port from 0 to 65535)")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 - ':PORT' asks for every interface, explicitly
    return host, int(port)


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    from jr2_actors.api.app import Api
    from jr2_actors.api.server import ApiServer
    from jr2_actors.kube.client import KubeClient
    from jr2_actors.orchestrator import DEFAULT_SANDBOX_IMAGE, Orchestrator

    token = secret_from("JR2_INSTANCE_TOKEN", args.token_file, "the Instance token").decode("utf-8", "replace")
    if len(token) < MIN_TOKEN_CHARS:
        raise UsageError(f"the Instance token is shorter than {MIN_TOKEN_CHARS} characters")
    key = secret_from("JR2_SIGNING_KEY", args.signing_key_file, "the signing key")
    if len(key) < MIN_KEY_BYTES:
        raise UsageError(f"the signing key is shorter than {MIN_KEY_BYTES} bytes")
    state_dir = os.path.abspath(args.state_dir)
    access = cluster_access(args)
    client = KubeClient(access)
    orchestrator = Orchestrator(client, state_dir=state_dir, signing_key=key, namespace=args.namespace,
                                sandbox_image=args.sandbox_image or DEFAULT_SANDBOX_IMAGE,
                                instance_harness=args.instance_harness or "")
    server = ApiServer(Api(orchestrator, token), *args.listen)
    try:
        try:
            server.start()
        except OSError as e:
            raise UsageError(f"--listen {args.listen[0]}:{args.listen[1]}: cannot listen there: "
                             f"{e.strerror or e}") from None
        _writable_dir(state_dir)  # only now: a start refused before this leaves nothing behind
        if stop.is_set():
            return 0
        orchestrator.start()
        log.warning("serving the API on %s; watching Sandboxes in namespace %s of %s (%s); state in %s",
                    server.url, args.namespace, access.server, access.source, state_dir)
        until_signalled(stop)
        log.warning("stopping: no new requests; the runs' actors stop, their Sandboxes stay for the next start")
    finally:
        server.stop()  # its event streams end first, so a follower cannot hold a worker
        orchestrator.stop()
        client.close()
    return 0


def _writable_dir(path: str) -> None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--state-dir {path}: cannot create it: {e.strerror or e}") from None
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--state-dir {path}: not a folder this process can write")
