"""The probes' own listener: a small process apart that answers kubelet's `GET /healthz` from the finding serve
publishes to it once a second, so a probe never waits for serve's interpreter lock.

Why a process: serve answers `/healthz` from published state already (no mailbox is asked), yet at thousands of
live runs a probe still waits for the interpreter lock behind the collector's full passes (each holds it for
as long as it walks the heap: 100–230 ms measured in a release of 2,000 runs) and behind every thread that
wants it. A process of its own has its own lock: its answer costs what the machine's scheduler adds, not what
serve's heap does. It reads the same document serve's `/healthz` gives (`Api.probe`) and adds one rule: a
finding older than `PROBE_STALE_SECONDS` is a 503 ("serve has not published its health for N s"), because a
serve that cannot publish once in that long has stopped making progress, which is what a probe asks.

Serve's side (`ProbeProcess`) starts it (`python -m jr2_actors.api.probe --listen HOST:PORT`) in a session of
its own (a terminal's Ctrl-C is serve's to handle), reads its first line (`listening HOST:PORT`, or one
line saying why not), then writes one JSON line a second to its stdin from a daemon thread. The child ends
when its stdin does: at serve's stop (which closes it) and at serve's death, SIGKILL included (the kernel
closes it), so it never outlives serve. It logs nothing per probe; anything but `GET /healthz` is a 404.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any

from jr2_actors import __version__
from jr2_actors.values.constants import PROBE_PUBLISH_SECONDS, PROBE_STALE_SECONDS, PROBE_START_SECONDS

log = logging.getLogger(__name__)

LINE_LIMIT = 8192  # a finding's line: a reason is one sentence; anything longer is not ours


@dataclass(frozen=True)
class Finding:
    at: float  # time.monotonic() in serve when it was read: one clock for every process of the machine
    ok: bool
    reason: str


def encode(finding: Finding) -> bytes:
    return json.dumps({"at": finding.at, "ok": finding.ok, "reason": finding.reason}).encode() + b"\n"


def decode(line: bytes) -> Finding:
    """One line from serve; a ValueError says what is wrong with it (the child keeps its last good finding)."""
    if len(line) > LINE_LIMIT:
        raise ValueError(f"a finding of {len(line)} bytes (at most {LINE_LIMIT})")
    doc = json.loads(line)
    if not isinstance(doc, dict):
        raise ValueError("a finding is a JSON object")
    at, ok, reason = doc.get("at"), doc.get("ok"), doc.get("reason", "")
    if not isinstance(at, int | float) or isinstance(at, bool) or not isinstance(ok, bool) \
            or not isinstance(reason, str):
        raise ValueError("a finding is {at: number, ok: boolean, reason: string}")
    return Finding(float(at), ok, reason)


def answer(finding: Finding | None, now: float, stale: float = PROBE_STALE_SECONDS) -> tuple[int, dict[str, Any]]:
    """`GET /healthz`'s status and document from the last finding (pure)."""
    if finding is None:
        return 503, {"ok": False, "reason": "serve has not published its health yet"}
    if now - finding.at > stale:
        return 503, {"ok": False, "reason": f"serve has not published its health for {now - finding.at:.0f}s"}
    if finding.ok:
        return 200, {"ok": True, "version": __version__}
    return 503, {"ok": False, "reason": finding.reason}


# -- the child -------------------------------------------------------------------------------------------


class _Board:
    def __init__(self) -> None:
        self.finding: Finding | None = None  # replaced whole by the reader: read without a lock


def _read(stream: IO[bytes], board: _Board, done: Callable[[], None]) -> None:
    """Serve's findings until its end of the pipe closes; then the child ends."""
    try:
        while line := stream.readline(LINE_LIMIT + 1):
            try:
                board.finding = decode(line)
            except ValueError as e:  # serve's bug: said once per line, the last good finding stays (and ages)
                print(f"jr2-actors probe: an unreadable finding from serve: {e}", file=sys.stderr, flush=True)
    finally:
        done()


def _handler(board: _Board, stale: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 5  # a client that sends no whole request in this long is cut (a probe sends one at once)
        def version_string(self) -> str:
            return "jr2-probe"

        def do_GET(self) -> None:
            if self.path != "/healthz":
                self._send(404, {"ok": False, "reason": "only GET /healthz is answered here"})
                return
            self._send(*answer(board.finding, time.monotonic(), stale))

        def _send(self, status: int, doc: dict[str, Any]) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a probe every few seconds is no news

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jr2_actors.api.probe",
                                     description="serve's probe listener (serve starts it; not for hand use)")
    parser.add_argument("--listen", required=True, help="HOST:PORT, port 0 a free one")
    parser.add_argument("--stale", type=float, default=PROBE_STALE_SECONDS,
                        help="a finding older than this many seconds is a 503")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    board = _Board()
    try:
        server = ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), _handler(board, args.stale))  # noqa: S104
    except (OSError, ValueError) as e:
        print(f"cannot listen there: {getattr(e, 'strerror', None) or e}", flush=True)
        return 2
    server.daemon_threads = True
    bound_host, bound_port = server.server_address[:2]
    print(f"listening {bound_host!s}:{bound_port}", flush=True)
    threading.Thread(target=_read, args=(sys.stdin.buffer, board, server.shutdown), name="jr2-probe-read",
                     daemon=True).start()
    server.serve_forever(poll_interval=0.5)
    server.server_close()
    return 0


# -- serve's side ----------------------------------------------------------------------------------------


class ProbeError(Exception):
    """The probe listener could not start (its one line says why)."""


class ProbeProcess:
    """The child, and the thread that publishes `read()`'s finding to it every `PROBE_PUBLISH_SECONDS`."""

    def __init__(self, listen: tuple[str, int], read: Callable[[], tuple[bool, str]], *,
                 every: float = PROBE_PUBLISH_SECONDS, stale: float = PROBE_STALE_SECONDS) -> None:
        self._read, self._every = read, every
        self._stop = threading.Event()
        self._now = threading.Event()  # `publish_now`: the next finding goes at once, not at the next second
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "jr2_actors.api.probe", "--listen", f"{listen[0]}:{listen[1]}",
             "--stale", str(stale)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True, env={**os.environ})
        assert self._proc.stdin is not None and self._proc.stdout is not None
        first = _first_line(self._proc.stdout, PROBE_START_SECONDS)
        if not first.startswith("listening "):
            self.close()
            raise ProbeError(first or f"the probe listener did not start in {PROBE_START_SECONDS:g}s")
        self.address = first.removeprefix("listening ")
        self.pid = self._proc.pid
        self._publisher = threading.Thread(target=self._publish, name="jr2-probe-publish", daemon=True)
        self._publisher.start()

    def _publish(self) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        while not self._stop.is_set():
            try:
                ok, reason = self._read()
            except Exception as e:  # our bug: said as the finding (kubelet sees it), and logged with its cause
                log.exception("reading serve's health for the probe listener failed")
                ok, reason = False, f"serve's health could not be read: {e}"
            try:
                stdin.write(encode(Finding(time.monotonic(), ok, reason)))
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError):  # the child is gone: its probes fail, kubelet acts
                if not self._stop.is_set():
                    log.error("the probe listener on %s ended (exit %s): kubelet's probes go unanswered",
                              self.address, self._proc.poll())
                return
            self._now.wait(self._every)
            self._now.clear()

    def publish_now(self) -> None:
        """Publish the finding at once (serve has just started: probes need not wait a second to hear it)."""
        self._now.set()

    def close(self, timeout: float = 2.0) -> None:
        """Stop publishing and end the child (its stdin closed; killed if it has not ended in `timeout`)."""
        self._stop.set()
        self._now.set()
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def _first_line(stream: IO[bytes], timeout: float) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline(LINE_LIMIT).decode("utf-8", "replace").strip() if ready else ""


if __name__ == "__main__":
    sys.exit(main())
