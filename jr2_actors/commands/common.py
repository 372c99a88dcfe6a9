"""What every command shares: one-line usage errors, option types, secrets from env or file, waiting for a stop."""

from __future__ import annotations

import argparse
import math
import os
import queue
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, NoReturn, TypeVar

if TYPE_CHECKING:
    from jr2_actors.kube.access import ClusterAccess

T = TypeVar("T")

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_SECRET_BYTES = 64 * 1024


class UsageError(Exception):
    """The user's input cannot be used: one line on stderr, exit 2."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM while a command waited: it leaves at once, exit 130 (128 + SIGINT)."""


EXIT_INTERRUPTED = 130


def interruptible(call: Callable[[], T], stop: threading.Event) -> T:
    """`call()` on a daemon thread, waited for until it returns or `stop` is set: a request to a slow server
    never holds Ctrl-C (the signal handler only sets `stop`). What `call` raises is raised here."""
    box: list[object] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append(call())
        except BaseException as e:  # handed over whole: the command reports it as its own
            box.append(_Raised(e))
        done.set()

    threading.Thread(target=run, name="jr2-call", daemon=True).start()
    while not done.wait(STOP_POLL_SECONDS):
        if stop.is_set():
            raise Interrupted()
    if stop.is_set():
        raise Interrupted()
    (got,) = box
    if isinstance(got, _Raised):
        raise got.error
    return got  # type: ignore[return-value]


class _Raised:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class Parser(argparse.ArgumentParser):
    """An argparse parser whose every mistake is one line on stderr and exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def namespace_name(text: str) -> str:
    """A namespace as the API server takes it: a DNS-1123 label, at most 63 characters."""
    if len(text) > 63 or not _NAMESPACE.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid namespace (lower case letters, digits and '-', "
                                         "starting and ending with a letter or digit, at most 63 characters)")
    return text


def http_url(text: str) -> str:
    """An http(s) URL with a host: what a service's address must be (a typo would only fail much later)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL (like http://jr2-harness:8080)")
    return text


def image_reference(text: str) -> str:
    """A container image reference: not empty, no whitespace (the kubelet would refuse it only at pull)."""
    if not text or any(c.isspace() for c in text) or len(text) > 512:
        raise argparse.ArgumentTypeError(f"{text!r} is not an image reference (like ghcr.io/jr2/sandbox:1.4)")
    return text


def positive_seconds(text: str) -> float:
    """A duration in seconds: finite and above zero (zero would spin, a negative one means nothing)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds above zero")
    return value


_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ms|s|m|h)")
_DURATION_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def timeout_duration(text: str) -> float:
    """A timeout as kubectl's `--timeout` takes it (Go's durations: `30s`, `5m`, `1h30m`, `500ms`), or bare
    seconds; 0 means look once and do not wait. A negative one is refused rather than read as a week."""
    t = text.strip()
    if re.fullmatch(r"[0-9]+(?:\.[0-9]*)?", t):
        seconds = float(t)
    elif t and len(t) <= 64 and _DURATION_PART.sub("", t) == "":
        seconds = sum(float(n) * _DURATION_UNIT[unit] for n, unit in _DURATION_PART.findall(t))
    else:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (like 30s, 5m, 1h30m or 90; 0: look once)")
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"{text!r} is too long a duration")
    return seconds


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is out of range (0-65535; 0 picks a free port)")
    return value


def secret_from(env: str, path: str | None, what: str) -> bytes:
    """A secret from its file (when named) or its environment variable; never from a flag's value, so it
    shows in no process listing. Surrounding whitespace (a file's newline) is not part of it."""
    if path:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_SECRET_BYTES + 1)
        except OSError as e:
            raise UsageError(f"{what}: cannot read {path}: {e.strerror or e}") from None
        if len(data) > MAX_SECRET_BYTES:
            raise UsageError(f"{what}: {path} is over {MAX_SECRET_BYTES} bytes")
        value = data.strip()
    else:
        value = os.environ.get(env, "").strip().encode()
    if not value:
        source = f"the file {path}" if path else f"${env}"
        raise UsageError(f"{what} is missing: set {env} or name a file (it is empty in {source})")
    return value


def cluster_access(args: argparse.Namespace) -> ClusterAccess:
    """This process's way to the API server, by T107's precedence (`--kubeconfig` > `KUBECONFIG` > in cluster >
    `~/.kube/config`); what cannot be used raises `ClusterAccessError`, one line naming what was tried."""
    from jr2_actors.kube.access import LocalFiles, resolve

    return resolve(os.environ, LocalFiles(), home=os.environ.get("HOME"), explicit_path=args.kubeconfig,
                   context=args.context)


def until_signalled(stop: threading.Event) -> None:
    """Block until SIGINT or SIGTERM (noted in `stop`); both are a clean stop."""
    while not stop.wait(1.0):
        pass


_END = object()
STOP_POLL_SECONDS = 0.2  # how soon a command reading a quiet stream notices Ctrl-C


def until_stopped(items: Iterable[T], stop: threading.Event) -> Iterator[T]:
    """`items`, read on a daemon thread, until they end or `stop` is set: a command following a stream that
    is quiet for minutes (a feed between heartbeats) still leaves at once on Ctrl-C or SIGTERM. What the
    reader raises is raised here."""
    handoff: queue.Queue[object] = queue.Queue(maxsize=64)

    def read() -> None:
        try:
            for item in items:
                handoff.put(item)
        except BaseException as e:  # handed over whole: the command reports it as its own
            handoff.put(e)
            return
        handoff.put(_END)

    threading.Thread(target=read, name="jr2-stream-reader", daemon=True).start()
    while not stop.is_set():
        try:
            got = handoff.get(timeout=STOP_POLL_SECONDS)
        except queue.Empty:
            continue
        if got is _END:
            return
        if isinstance(got, BaseException):
            raise got
        yield got  # type: ignore[misc]


def read_file(path: str) -> object:
    """A workflow file's document, read capped: a larger file is refused, never read whole. (The commands
    read files; values/ does no I/O.) A `WorkflowError` when it cannot be read or is not a document."""
    from jr2_actors.values.workflow import MAX_WORKFLOW_BYTES, WorkflowError, read_document  # when a file is read

    try:
        with open(path, "rb") as f:
            text = f.read(MAX_WORKFLOW_BYTES + 1)
    except OSError as e:
        raise WorkflowError("", e.strerror or str(e)) from None
    return read_document(text)
