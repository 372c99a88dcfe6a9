"""`jr2-actors serve` (CONTRACTS.md §6): the orchestrator pod's process.

    jr2-actors serve --namespace NS --state-dir DIR [--kubeconfig F] [--context C] [--listen HOST:PORT]
                     [--sandbox-image IMG] [--instance-harness URL] [--token-file F] [--signing-key-file F]

The Instance token comes from `JR2_INSTANCE_TOKEN` or `--token-file`, the signing key (Harness and Sandbox
tokens) from `JR2_SIGNING_KEY` or `--signing-key-file` — never from a flag's value, so neither shows in a
process listing. Every missing or bad input is one line and exit 2. It logs where it listens and which
cluster it watches. SIGTERM (or SIGINT) stops accepting, stops the runs' actors (Turn readers end, Sandboxes
are left for the next start), lets the store finish what it was asked, and exits 0 within 10 s; a start on
the same state directory restores every live run.

`serve --fake-cluster` is the dev server in one command (as `temporal server start-dev` is): an embedded fake
cluster whose agents pick the first Allowed pick, a free port on loopback, a generated token and key unless
given, and every file in a fresh temp folder (removed at the stop) unless `--state-dir` names one. It prints
the URL and where the token is, and writes `env` in the state folder once it serves — `JR2_SERVER` and
`JR2_INSTANCE_TOKEN` for the client commands — removed again at its stop (with the token's file), so a script
waits for that file. Its cluster ends with it: a start on a kept `--state-dir` keeps the finished runs, and a
live run whose Workspace was placed restores to fail (its Sandbox is gone), which the stop says;
`fake-cluster` started apart and `serve --kubeconfig` keep them across a restart of serve.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

from jr2_actors.commands.common import (
    UsageError,
    http_url,
    image_reference,
    namespace_name,
    positive_seconds,
    until_signalled,
)
from jr2_actors.commands.serve_access import cluster_access_waited, sandboxes_access, secrets_checked
from jr2_actors.shell.switch_interval import switch_interval
from jr2_actors.values.constants import (
    API_SHUTDOWN_SECONDS,
    SERVE_KUBECONFIG_WAIT_SECONDS,
    SERVE_STOP_SECONDS,
    SERVE_SWITCH_INTERVAL_SECONDS,
)

log = logging.getLogger("jr2_actors.serve")

DEFAULT_LISTEN = "127.0.0.1:8080"
FAKE_LISTEN = "127.0.0.1:0"  # the dev server's default: a free port, so two on one machine never collide
ENV_FILE = "env"  # in the state folder: what the client commands need, written once it serves
TOKEN_FILE = "token"  # noqa: S105 - a file name


def add_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve", help="the orchestrator: the API, the watch, the runs (until SIGTERM)",
        description="The orchestrator: the API, the watch, the runs, until SIGTERM. Examples: "
                    "jr2-actors serve --namespace jr2 --state-dir /var/lib/jr2 --listen 0.0.0.0:8080; "
                    "jr2-actors serve --fake-cluster (a dev server on an embedded fake cluster)")
    serve.add_argument("--fake-cluster", action="store_true",
                       help="a dev server in one command: an embedded fake cluster whose agents pick the first "
                            f"Allowed pick, on {FAKE_LISTEN} (a free port) unless --listen, a generated token "
                            "and key unless given, files in a fresh temp folder unless --state-dir; prints the "
                            "URL and where the token is (default: a real cluster)")
    serve.add_argument("--namespace", type=namespace_name, default=None,
                       help="the namespace whose Sandboxes this orchestrator owns (required, but jr2 with "
                            "--fake-cluster)")
    serve.add_argument("--state-dir", default=None,
                       help="where state.db lives; a start on the same folder restores every live run (required, "
                            "but a fresh temp folder with --fake-cluster, whose cluster ends with it: a live run "
                            "placed on it then restores to fail)")
    serve.add_argument("--kubeconfig", help="the kubeconfig file (default: --kubeconfig > $KUBECONFIG > in "
                                            "cluster > ~/.kube/config)")
    serve.add_argument("--kubeconfig-wait", type=positive_seconds, default=SERVE_KUBECONFIG_WAIT_SECONDS,
                       metavar="SECONDS",
                       help="wait this long for a --kubeconfig that is not there yet, as one that "
                            f"fake-cluster is writing (default: {SERVE_KUBECONFIG_WAIT_SECONDS:g})")
    serve.add_argument("--context", help="the kubeconfig context (default: its current-context)")
    serve.add_argument("--listen", default=None, type=listen_address,
                       help=f"HOST:PORT the API listens on, port 0 a free one (default: {DEFAULT_LISTEN}, "
                            f"{FAKE_LISTEN} with --fake-cluster; in a pod 0.0.0.0:8080)")
    serve.add_argument("--probe-listen", default=None, type=listen_address, metavar="HOST:PORT",
                       help="answer kubelet's GET /healthz here too, from a small process of its own that serve "
                            "tells its health every second, so a probe never waits behind serve's load "
                            "(default: none; in a pod 0.0.0.0:8081)")
    serve.add_argument("--sandbox-image", default=None, type=image_reference,
                       help="the Sandbox image for Workspaces whose workflow names none "
                            "(default: ghcr.io/jr2/sandbox:latest)")
    serve.add_argument("--instance-harness", default=None, type=http_url,
                       help="the Instance Harness's URL, for Menu-only agents (default: none)")
    serve.add_argument("--max-memory", metavar="SIZE",
                       help="admit runs while serve's projected memory stays under 85%% of SIZE; past it POST /runs "
                            "answers 503 with Retry-After (default: $JR2_MAX_MEMORY, else the pod's cgroup limit)")
    serve.add_argument("--max-threads", metavar="N",
                       help="the same for threads (default: $JR2_MAX_THREADS, else the cgroup's pids.max)")
    serve.add_argument("--max-runs", metavar="N",
                       help="at most N live runs (default: $JR2_MAX_RUNS, else no bound of its own)")
    serve.add_argument("--supervise", action="store_true",
                       help="run serve as the child of a one-thread supervisor (the container's PID 1) that passes "
                            "SIGTERM and SIGINT on, reaps, and ends serve at its 10 s stop budget if serve has not "
                            "stopped by then (exit 0): a stop bounded even when serve's own threads cannot run "
                            "(default: off; the manifests turn it on)")
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
    if args.supervise:
        from jr2_actors.shell import supervisor

        if os.environ.get(supervisor.SUPERVISED_ENV) != "1":  # not in the child it starts
            if args.fake_cluster:
                raise UsageError("--supervise is for the pod's serve; the dev server (--fake-cluster) would leave "
                                 "its temp folder behind a kill")
            # -P: the working directory (the state volume in the image) is not put on the child's import path.
            return supervisor.supervise([sys.executable, "-P", "-m", "jr2_actors", *args.argv], stopped=stop.is_set)
    if args.fake_cluster:
        return _run_fake(args, stop)
    for flag, value in (("--namespace", args.namespace), ("--state-dir", args.state_dir)):
        if value is None:
            raise UsageError(f"{flag} is required (or --fake-cluster, the dev server)")
    from jr2_actors.kube.client import KubeClient
    from jr2_actors.orchestrator import DEFAULT_SANDBOX_IMAGE

    token, key = secrets_checked(args, generate=False)
    access = cluster_access_waited(args, stop)
    if access is None:
        return 0
    client = KubeClient(sandboxes_access(access, args))
    try:
        return _serve(args, stop, client, token=token, key=key, state_dir=os.path.abspath(args.state_dir),
                      namespace=args.namespace, listen=args.listen or listen_address(DEFAULT_LISTEN),
                      sandbox_image=args.sandbox_image or DEFAULT_SANDBOX_IMAGE,
                      instance_harness=args.instance_harness or "",
                      watching=f"{access.server} ({access.source})")
    finally:
        client.close()


def _run_fake(args: argparse.Namespace, stop: threading.Event) -> int:
    """The dev server: the fake cluster in this process, serve on it; the folder it made is removed at the stop."""
    from jr2_actors.fake.cluster import FakeCluster

    for flag, value in (("--kubeconfig", args.kubeconfig), ("--context", args.context),
                        ("--instance-harness", args.instance_harness)):
        if value is not None:
            raise UsageError(f"{flag} has no meaning with --fake-cluster (it is the cluster)")
    token, key = secrets_checked(args, generate=True)
    namespace = args.namespace or "jr2"
    made = None if args.state_dir else tempfile.mkdtemp(prefix="jr2-dev-")
    state_dir = os.path.abspath(args.state_dir or made or "")
    try:
        with FakeCluster(namespace=namespace, signing_key=key, bookmark_interval=None) as cluster:
            cluster.harness(lambda core: core.pick_first_allowed(True))  # its agents walk a workflow to an end
            client = cluster.client()
            try:
                return _serve(args, stop, client, token=token, key=key, state_dir=state_dir, namespace=namespace,
                              listen=args.listen or listen_address(FAKE_LISTEN),
                              sandbox_image=args.sandbox_image or "jr2-sandbox:dev",
                              instance_harness=cluster.instance_harness_url,
                              watching=f"the embedded fake cluster {cluster.url}", dev=True,
                              state_kept=made is None)
            finally:
                client.close()
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


@switch_interval(SERVE_SWITCH_INTERVAL_SECONDS)  # thousands of threads wait for the interpreter lock
def _serve(args: argparse.Namespace, stop: threading.Event, client: Any, *, token: str, key: bytes, state_dir: str,
           namespace: str, listen: tuple[str, int], sandbox_image: str, instance_harness: str, watching: str,
           dev: bool = False, state_kept: bool = True) -> int:
    from jr2_actors.api.app import Api
    from jr2_actors.api.budget import Budget, BudgetError, configured_limits
    from jr2_actors.api.server import ApiServer
    from jr2_actors.orchestrator import Orchestrator
    from jr2_actors.shell.watchdog import past_budget

    try:
        limits = configured_limits({"memory": args.max_memory, "threads": args.max_threads, "runs": args.max_runs})
    except BudgetError as e:
        raise UsageError(str(e)) from None
    orchestrator = Orchestrator(client, state_dir=state_dir, signing_key=key, namespace=namespace,
                                sandbox_image=sandbox_image, instance_harness=instance_harness)
    budget = Budget(limits, live=lambda: len(orchestrator.run_table), registry=orchestrator.telemetry.registry)
    server = ApiServer(Api(orchestrator, token, budget=budget), *listen)
    env_file = os.path.join(state_dir, ENV_FILE)
    probes = watchdog = None
    try:
        try:
            server.start()
        except OSError as e:
            raise UsageError(f"--listen {listen[0]}:{listen[1]}: cannot listen there: {e.strerror or e}") from None
        if args.probe_listen is not None:
            probes = _probe_listener(args.probe_listen, orchestrator.health)
        _writable_dir(state_dir)  # only now: a start refused before this leaves nothing behind
        if dev:
            _remove(env_file)  # a stale one (a port of an earlier start) is never read as this one's
        if stop.is_set():
            return 0
        orchestrator.start()
        if probes is not None:
            probes.publish_now()  # ready as soon as the watch has listed, not a second after
        # What the process built at start (imports, the restored runs) lives as long as it does;
        # frozen out of the collector's full scans, as `jr2-actors watch` does (docs/benchmarks.md).
        gc.collect()
        gc.freeze()
        log.info("serving the API on %s; watching Sandboxes in namespace %s of %s; state in %s",
                    server.url, namespace, watching, state_dir)
        log.info("budget: %s", budget.describe())
        if dev:
            _announce_dev(server.url, token, state_dir, env_file)
        until_signalled(stop)
        stopping = time.monotonic()
        if not dev:  # first, before any line; the dev server's temp folder goes in the finally: never ended past it
            watchdog = past_budget(SERVE_STOP_SECONDS, hard=True)
        log.info("stopping: no new requests; the runs' actors stop, their Sandboxes stay for the next start")
    finally:
        try:
            if dev:  # both name this start's port and generated token: no later reader may take them as live
                _remove(env_file)
                if not args.token_file or os.path.abspath(args.token_file) != os.path.join(state_dir, TOKEN_FILE):
                    _remove(os.path.join(state_dir, TOKEN_FILE))
        finally:
            if probes is not None:
                probes.close()  # first: a probe during the stop is refused, and the pod is taken out of its Service
            _stop_together(server, orchestrator)
            if watchdog is not None:
                watchdog.cancel()  # stopped within the budget (in a test's process, the process goes on)
    if state_kept and dev:  # the cluster's Sandboxes lived in this process: the runs on them cannot come back
        log.info("stopped in %.1fs; the embedded fake cluster went with it, so a start on %s keeps the finished "
                 "runs, but a live run whose Workspace was placed ends failed (its Sandbox is gone); to restart "
                 "serve and keep its runs, run the cluster apart: jr2-actors fake-cluster --pick-first "
                 "--kubeconfig-out F, then serve --kubeconfig F", time.monotonic() - stopping, state_dir)
    elif state_kept:
        log.info("stopped in %.1fs; a start on %s restores every live run", time.monotonic() - stopping, state_dir)
    else:  # the dev server's own temp folder: it goes now, and the embedded cluster with it
        log.info("stopped in %.1fs; its temp folder %s goes with it", time.monotonic() - stopping, state_dir)
    return 0


def _probe_listener(listen: tuple[str, int], health: Any) -> Any:
    from jr2_actors.api.probe import ProbeError, ProbeProcess

    try:
        probes = ProbeProcess(listen, health)
    except ProbeError as e:
        raise UsageError(f"--probe-listen {listen[0]}:{listen[1]}: {e}") from None
    log.info("answering probes (GET /healthz) on http://%s from a process of its own", probes.address)
    return probes


def _stop_together(server: Any, orchestrator: Any) -> None:
    """SIGTERM's one budget: the listener (its event streams end first, then the requests in flight) and the
    orchestrator stop side by side, each within its own bound, so the two never add up past 10 s."""
    closing = threading.Thread(target=server.stop, name="jr2-api-stop", daemon=True)
    closing.start()
    try:
        orchestrator.stop()
    finally:
        closing.join(API_SHUTDOWN_SECONDS + 1)


def _announce_dev(url: str, token: str, state_dir: str, env_file: str) -> None:
    """Where a person (and a script) finds the dev server: the URL, the token's file, the env file."""
    token_file = os.path.join(state_dir, TOKEN_FILE)
    _write_private(token_file, token + "\n")
    _write_private(env_file, f"export JR2_SERVER={url}\nexport JR2_INSTANCE_TOKEN={token}\n")
    print(f"jr2-actors dev server on a fake cluster (its agents pick the first Allowed pick)\n"
          f"  API    {url}\n"
          f"  token  {token_file}\n"
          f"  env    . {env_file}   # JR2_SERVER and JR2_INSTANCE_TOKEN for submit, runs, status, ...\n"
          f"  state  {state_dir}\n"
          f"Ctrl-C stops it.", file=sys.stdout, flush=True)


def _write_private(path: str, text: str) -> None:
    """Mode 0600, atomically (a temp file, then os.replace): a script waiting for it never reads half."""
    part = f"{path}.{os.getpid()}.part"
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(part, path)


def _remove(path: str) -> None:
    """Gone, or never there: a state dir under a file (`NotADirectoryError`) has none to remove either."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        os.remove(path)


def _writable_dir(path: str) -> None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--state-dir {path}: cannot create it: {e.strerror or e}") from None
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--state-dir {path}: not a folder this process can write")
