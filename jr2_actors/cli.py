"""The `jr2-actors` command line (CONTRACTS.md §6)."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from jr2_actors import __version__
from jr2_actors.commands import client, completion, demo, examples, lint, serve, sim, top
from jr2_actors.commands.common import (
    EXIT_INTERRUPTED,
    Interrupted,
    Parser,
    UsageError,
    cluster_access,
    namespace_name,
    port_number,
    positive_seconds,
    until_signalled,
)
from jr2_actors.shell import logs
from jr2_actors.values.constants import STALL_BOUND_SECONDS
from jr2_actors.values.errors import Jr2Error

log = logging.getLogger("jr2_actors")

LOG_LEVELS = ("debug", "info", "warning", "error")
FIRST_LIST_POLL_SECONDS = 0.2  # `watch` asks its actor this often until the first list has answered
# A closed pipe ends a command as SIGPIPE ends kubectl, head or grep: silently, with 128 + SIGPIPE as the shell
# shows it, so `set -o pipefail` still tells a truncated listing from a whole one (0 would hide it).
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
CLIENT_COMMANDS = ("submit", "resubmit", "wait", "runs", "status", "events", "cancel")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="jr2-actors", description="The jr2 Orchestrator's cluster-facing core.")
    parser.add_argument("--version", action="version", version=f"jr2-actors {__version__}")
    parser.add_argument("--log-level", default=None, type=str.lower, choices=LOG_LEVELS,
                        help="how much to log on stderr (default: info for serve, whose start and stop are INFO "
                             "lines; warning for the rest)")
    parser.add_argument("--log-format", default="text", type=str.lower, choices=logs.FORMATS,
                        help="text for people, or json: one object per line with the run, Workspace, agent and "
                             "actor it is about (default: text)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    watch = sub.add_parser("watch", help="the WatchActor alone: one JSON line per delivery and per termination",
                           description="The Sandbox watch alone, one JSON line per delivery and per termination. "
                                       "Example: jr2-actors watch --namespace jr2 --kubeconfig ~/.kube/config")
    watch.add_argument("--namespace", required=True, type=namespace_name,
                       help="the namespace whose Sandboxes to watch (required)")
    watch.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG, else in cluster, "
                                            "else ~/.kube/config)")
    watch.add_argument("--context", help="the kubeconfig context (default: its current-context)")
    watch.add_argument("--stall-seconds", type=positive_seconds, default=None,
                       help=f"a watch silent this long is re-listed (default: {STALL_BOUND_SECONDS:g})")

    serve.add_parser(sub)
    demo.add_parser(sub)
    top.add_parser(sub)
    sim.add_parser(sub)
    client.add_parsers(sub)
    lint.add_parsers(sub)
    examples.add_parser(sub)
    completion.add_parser(sub)

    fake = sub.add_parser("fake-cluster", help="the fake cluster alone, on loopback, until interrupted",
                          description="The fake cluster alone, on loopback, until interrupted. Example: "
                                      "jr2-actors fake-cluster --pick-first --kubeconfig-out /tmp/k; then "
                                      "jr2-actors serve --namespace jr2 --state-dir /tmp/s --kubeconfig /tmp/k")
    fake.add_argument("--port", type=port_number, default=0,
                      help="the API server's port on 127.0.0.1 (default: 0, a free one)")
    fake.add_argument("--namespace", type=namespace_name, default="jr2",
                      help="the namespace created beside 'default' (default: jr2)")
    fake.add_argument("--kubeconfig-out", required=True,
                      help="where to write a kubeconfig for kubectl and clients (required)")
    fake.add_argument("--bookmark-seconds", type=positive_seconds, default=60.0,
                      help="the interval of watch bookmarks (default: 60)")
    fake.add_argument("--faults", metavar="FILE",
                      help="play this fault schedule (JSON or YAML: a list of {at, fault, ...parameters}; "
                           "docs/fake-cluster.md, 'Faults') once the cluster is up (default: none)")
    fake.add_argument("--pick-first", action="store_true",
                      help="the fake Harness's agents pick the first Allowed pick, so a workflow served against it "
                           "walks to an end (default: they say 'Done.' and settle without a pick)")
    fake.add_argument("--harness-mode", choices=("lenient", "strict"), default="lenient",
                      help="strict: the fake Harness does only what the contract promises (a restart keeps the "
                           "conversations and never settles the old container's Submissions); lenient: a restart "
                           "loses the conversations (default: lenient)")
    for command in sub.choices.values():  # also after the command: the image's entry point is `jr2-actors serve`
        command.add_argument("--log-level", default=argparse.SUPPRESS, type=str.lower, choices=LOG_LEVELS,
                             help="as --log-level before the command (default: that one's)")
        command.add_argument("--log-format", default=argparse.SUPPRESS, type=str.lower, choices=logs.FORMATS,
                             help="as --log-format before the command (default: that one's)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # A stop asked for at any point, even while starting, is taken once what is starting can be stopped:
    # the handlers only note it, so nothing is left half made (no temp folder with keys, no thread).
    stop = threading.Event()
    caught: list[int] = []

    def note(sig: int, _frame: object) -> None:
        caught.append(sig)
        stop.set()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # Python takes signals on the main thread only
        previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    installed: tuple[logging.Handler, int] | None = None
    pykka_level: int | None = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # what `serve --supervise` starts its child with
        level = args.log_level or ("info" if args.command == "serve" else "warning")
        installed = logs.install(sys.stderr, level=level, fmt=args.log_format)
        if level == "info":  # pykka logs each exception an actor answers its asker at INFO: the asker's to tell
            pykka_level = _quiet("pykka", logging.WARNING)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        code = _dispatch(parser, args, stop)
        # Ctrl-C leaves every command with 130, the long-running ones (serve, fake-cluster,
        # watch) too once they have stopped cleanly; SIGTERM stays their clean stop, 0, as Kubernetes expects
        # of a pod it stops.
        return EXIT_INTERRUPTED if code == 0 and signal.SIGINT in caught else code
    except Interrupted:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `jr2-actors events RUN | head -1`: the reader left, and so do we, quietly
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    except (UsageError, Jr2Error) as e:
        print(f"jr2-actors: {e}", file=sys.stderr)
        return 2
    finally:
        if installed is not None:
            logs.uninstall(installed)
        if pykka_level is not None:
            logging.getLogger("pykka").setLevel(pykka_level)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def entry() -> None:
    """The process's entry (`jr2-actors`, `python -m jr2_actors`): `main`, then the exit. Actors a stop left past
    its budget are daemon threads still stopping, and the interpreter's own exit takes the GIL after each of them
    (about 1 ms apiece: seconds past a SIGTERM at thousands of runs); what they had to write is written (the
    stop waited for the store), so the process then ends at once."""
    code = main()
    stops = sys.modules.get("jr2_actors.shell.stopping")  # loaded by a stop only: a client command never is
    if stops is not None and stops.left_behind():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace, stop: threading.Event) -> int:
    if args.command == "watch":
        return run_watch(args, stop)
    if args.command == "fake-cluster":
        return run_fake_cluster(args, stop)
    if args.command == "serve":
        return serve.run(args, stop)
    if args.command == "demo":
        return demo.run(args, stop)
    if args.command == "top":
        return top.run(args, stop)
    if args.command == "sim":
        return sim.run(args, stop)
    if args.command == "completion":
        print(completion.script(parser, args.shell))
        return 0
    if args.command in ("lint", "graph"):
        return lint.run(args)
    if args.command == "examples":
        return examples.run(args)
    if args.command in CLIENT_COMMANDS:
        return client.run(args, stop)
    parser.error(f"unknown command {args.command}")


def _stdout_to_devnull() -> None:
    """What is still buffered for a closed pipe goes nowhere: the interpreter's flush at exit would otherwise
    fail again and print 'Exception ignored … BrokenPipeError' (Python's own recipe, docs: signal, SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a stdout with no file descriptor (captured): nothing buffered
        pass


def _quiet(name: str, level: int) -> int:
    """Raise a library logger's level for this command; what it was, to put back."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(max(level, before))
    return before


# json.dumps's quoting of a string (ensure_ascii), without building an encoder per line (the tap).
_quote: Callable[[str], str] = json.encoder.encode_basestring_ascii


class JsonLines:
    """Prints the WatchActor's deliveries and terminations, one JSON object per line.

    The watch's types are imported once, here (the command's start stays light: cli.py imports the watch
    only for `watch`), not on every call (the imports were a sixth of the tap's cost per event)."""

    def __init__(self, out: TextIO) -> None:
        from jr2_actors.watch.deliveries import SandboxGone, SandboxSeen, WatchFailed
        from jr2_actors.watch.messages import WatchReport
        from jr2_actors.watch.stream import Terminated

        self._out = out
        self._lock = threading.Lock()
        self._seen, self._gone, self._failed, self._report, self._terminated = (
            SandboxSeen, SandboxGone, WatchFailed, WatchReport, Terminated)

    def tell(self, message: Any) -> None:
        doc: dict[str, Any] | None = None
        if isinstance(message, self._seen):  # the line per event: json.dumps's own text for these four strings
            sandbox = message.sandbox
            self._write(f'{{"delivery": "seen", "name": {_quote(sandbox.name)}, "uid": {_quote(sandbox.uid)}, '
                        f'"resourceVersion": {_quote(sandbox.resource_version)}, "phase": {_quote(sandbox.phase)}}}\n')
            return
        if isinstance(message, self._gone):
            doc = {"delivery": "gone", "name": message.name, "uid": message.uid, "resourceVersion": None,
                   "phase": None, "reason": message.reason}
        elif isinstance(message, self._failed):
            doc = {"delivery": "failed", "name": None, "uid": None, "resourceVersion": None, "phase": None,
                   "termination": message.termination.value, "message": message.message}
        elif isinstance(message, self._report) and isinstance(message.report, self._terminated):
            r = message.report
            doc = {"termination": r.termination.value, "action": r.action, "resourceVersion": r.resource_version,
                   "detail": r.detail}
        if doc is not None:
            self._write(json.dumps(doc) + "\n")

    def _write(self, line: str) -> None:
        with self._lock:
            self._out.write(line)
            self._out.flush()


def run_watch(args: argparse.Namespace, stop: threading.Event) -> int:
    from jr2_actors.kube.client import KubeClient
    from jr2_actors.watch.actor import WatchActor

    access = cluster_access(args)
    client = KubeClient(access)
    try:
        if stop.is_set():
            return 0
        stall = args.stall_seconds if args.stall_seconds is not None else STALL_BOUND_SECONDS
        ref = WatchActor.start(client, namespace=args.namespace, stall_bound=stall, tap=JsonLines(sys.stdout))
        # What the command imported and built at start lives as long as it does; frozen out of the
        # collector's full scans, which cost a burst of events about 20 ms each (docs/benchmarks.md).
        gc.collect()
        gc.freeze()
        log.warning("watching Sandboxes in namespace %s of %s (%s)", args.namespace, access.server, access.source)
        try:
            _announce_first_list(ref, stop)
            until_signalled(stop)
        finally:
            ref.stop(block=True, timeout=10)
    finally:
        client.close()
    return 0


def _announce_first_list(ref: Any, stop: threading.Event) -> None:
    """One line when the first list answers (a wrong token or no route shows as the watch's warnings)."""
    from jr2_actors.watch.messages import Health, WatchHealth

    while not stop.wait(FIRST_LIST_POLL_SECONDS):
        health = ref.ask(Health(), timeout=10)
        if isinstance(health, WatchHealth) and health.listed:
            log.warning("the first list answered with %d Sandbox(es), at resourceVersion %s", health.tracked,
                        health.resource_version)
            return


def run_fake_cluster(args: argparse.Namespace, stop: threading.Event) -> int:
    from jr2_actors.fake.cluster import FakeCluster

    out = os.path.abspath(args.kubeconfig_out)
    if os.path.isdir(out) or not os.path.isdir(os.path.dirname(out)):
        raise UsageError(f"--kubeconfig-out {args.kubeconfig_out}: not a file in an existing folder")
    schedule = _fault_schedule(args.faults) if args.faults else []
    with FakeCluster(namespace=args.namespace, port=args.port, bookmark_interval=args.bookmark_seconds,
                     harness_mode=args.harness_mode) as cluster:
        if stop.is_set():
            return 0
        if args.pick_first:
            cluster.harness(lambda core: core.pick_first_allowed(True))
        try:
            cluster.write_kubeconfig(out)
        except OSError as e:
            raise UsageError(f"--kubeconfig-out {args.kubeconfig_out}: cannot write it: {e.strerror or e}") from None
        print(f"fake cluster: API server {cluster.url} (namespace {args.namespace}), Harness "
              f"{cluster.harness_url}; kubeconfig written to {args.kubeconfig_out}", file=sys.stderr, flush=True)
        if schedule:
            cluster.faults.play(schedule, stop=stop)
            print(f"fake cluster: playing {len(schedule)} fault(s) from {args.faults}", file=sys.stderr, flush=True)
        until_signalled(stop)
    return 0


def _fault_schedule(path: str) -> list[Any]:
    """`--faults FILE`: read and checked whole before the cluster starts (one line naming what is wrong)."""
    import yaml

    from jr2_actors.fake.faults import Faults, FaultScheduleError

    try:
        with open(path, "rb") as f:
            raw = f.read(1024 * 1024 + 1)
    except OSError as e:
        raise UsageError(f"--faults {path}: cannot read it: {e.strerror or e}") from None
    if len(raw) > 1024 * 1024:
        raise UsageError(f"--faults {path}: over 1 MiB")
    try:
        doc = yaml.safe_load(raw)
        return Faults.load(doc)
    except (yaml.YAMLError, RecursionError) as e:
        raise UsageError(f"--faults {path}: not JSON or YAML ({type(e).__name__})") from None
    except FaultScheduleError as e:
        raise UsageError(f"--faults {path}: {e}") from None


if __name__ == "__main__":
    sys.exit(main())
