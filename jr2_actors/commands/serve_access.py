"""What serve reads before it starts: its secrets (the Instance token, the signing key), each checked, and its
cluster access (after a bounded wait for a kubeconfig being written), with the Sandboxes' namespace."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from jr2_actors.commands.common import UsageError, cluster_access, secret_from

if TYPE_CHECKING:
    from jr2_actors.kube.access import ClusterAccess

log = logging.getLogger("jr2_actors.serve")

MIN_TOKEN_CHARS = 16
MIN_KEY_BYTES = 32
KUBECONFIG_POLL_SECONDS = 0.1


def secrets_checked(args: argparse.Namespace, *, generate: bool) -> tuple[str, bytes]:
    """The Instance token and the signing key, each checked; the dev server makes whichever is not given."""
    if generate and not (os.environ.get("JR2_INSTANCE_TOKEN", "").strip() or args.token_file):
        token = secrets.token_urlsafe(24)
    else:
        token = secret_from("JR2_INSTANCE_TOKEN", args.token_file, "the Instance token").decode(
            "utf-8", "replace")
    if len(token) < MIN_TOKEN_CHARS:
        raise UsageError(f"the Instance token is shorter than {MIN_TOKEN_CHARS} characters")
    if generate and not (os.environ.get("JR2_SIGNING_KEY", "").strip() or args.signing_key_file):
        key = secrets.token_bytes(MIN_KEY_BYTES)
    else:
        key = secret_from("JR2_SIGNING_KEY", args.signing_key_file, "the signing key")
    if len(key) < MIN_KEY_BYTES:
        raise UsageError(f"the signing key is shorter than {MIN_KEY_BYTES} bytes")
    return token, key


def sandboxes_access(access: ClusterAccess, args: argparse.Namespace) -> ClusterAccess:
    """The access with `--namespace` as the client's namespace: in cluster, the access names the pod's own
    namespace (the orchestrator's, apart from the Sandboxes' so that its Role there reaches no Secret beside
    the signing key: manifests/), and no request of this process belongs there."""
    return replace(access, namespace=args.namespace)


def cluster_access_waited(args: argparse.Namespace, stop: threading.Event) -> ClusterAccess | None:
    """`cluster_access`, after a bounded wait for a `--kubeconfig` that is not there yet (a `fake-cluster`
    started beside this one writes it a moment later, atomically, so it is never read half written); a path
    in no folder is nothing being written, refused at once. None: stopped while waiting."""
    path = args.kubeconfig
    if path and not os.path.exists(path) and os.path.isdir(os.path.dirname(os.path.abspath(path))):
        log.warning("waiting up to %gs for --kubeconfig %s to be written", args.kubeconfig_wait, path)
        deadline = time.monotonic() + args.kubeconfig_wait
        while not os.path.exists(path) and time.monotonic() < deadline:
            if stop.wait(KUBECONFIG_POLL_SECONDS):
                return None
    return cluster_access(args)
