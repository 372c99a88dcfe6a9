"""How a command leaves when its user does: Ctrl-C during `top`'s first scrape of a server that never answers
is 130 at once, and a reader that closes the pipe (`events RUN | head -1`) ends any command quietly with 141
(128 + SIGPIPE, as SIGPIPE ends kubectl, head or grep), never a traceback."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from tests.support.cli_process import clean_env
from tests.support.slow_server import SlowServer

pytestmark = pytest.mark.slow
WAIT = 30.0  # longer than top's own read timeout (10 s): only leaving on the signal passes
EXIT_BROKEN_PIPE = 141


def start(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "jr2_actors", *args], stdout=stdout, stderr=subprocess.PIPE,
                            text=True, env=clean_env(JR2_INSTANCE_TOKEN="leaving-test-token-0123456789"))


@pytest.mark.parametrize("once", [False, True], ids=["live", "once"])
def test_top_leaves_at_once_on_ctrl_c_while_the_server_holds_its_answer(once: bool) -> None:
    server = SlowServer("hold")
    try:
        top = start("top", "--server", server.url, *(["--once"] if once else []))
        assert server.got_request.wait(WAIT), "top never asked"
        top.send_signal(signal.SIGINT)
        _, err = top.communicate(timeout=WAIT)
    finally:
        server.close()
    assert top.returncode == 130 and err == "", (top.returncode, err)


def closed_pipe() -> int:
    """The write end of a pipe whose reader has already gone."""
    read, write = os.pipe()
    os.close(read)
    return write


def test_a_command_writing_into_a_closed_pipe_leaves_quietly() -> None:
    write = closed_pipe()
    try:
        out = subprocess.run([sys.executable, "-m", "jr2_actors", "completion", "bash"], stdout=write,
                             stderr=subprocess.PIPE, text=True, env=clean_env(), timeout=WAIT, check=False)
    finally:
        os.close(write)
    assert out.returncode == EXIT_BROKEN_PIPE and out.stderr == "", out


class Feed(http.server.BaseHTTPRequestHandler):
    """A run's feed: one line, then (once the test's reader has left) the rest."""

    second = threading.Event()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(self._event(1, {"kind": "said", "agent": "coder", "turn": 1, "text": "first"}))
        self.wfile.write(b":" + b" " * 1024 + b"\n")  # a keepalive comment: the client reads 512-byte chunks
        self.wfile.flush()
        if self.second.wait(WAIT):
            for i in range(2, 50):
                self.wfile.write(self._event(i, {"kind": "said", "agent": "coder", "turn": 1, "text": "more"}))
            self.wfile.write(self._event(50, {"kind": "ended", "status": "done"}))
            self.wfile.flush()

    @staticmethod
    def _event(i: int, doc: dict[str, object]) -> bytes:
        return f"id: {i}\nevent: {doc['kind']}\ndata: {json.dumps({'id': i, **doc})}\n\n".encode()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def feed() -> Iterator[str]:
    Feed.second = threading.Event()
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Feed) as peer:
        threading.Thread(target=peer.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{peer.server_address[1]}"
        finally:
            Feed.second.set()
            peer.shutdown()


def test_events_into_a_reader_that_took_one_line_leaves_quietly(feed: str) -> None:
    follower = start("events", "r-0123456789ab", "--server", feed)
    assert follower.stdout is not None and follower.stderr is not None
    assert "first" in follower.stdout.readline()  # `| head -1`: one line, then the reader goes
    follower.stdout.close()
    Feed.second.set()
    follower.wait(WAIT)
    err = follower.stderr.read()
    follower.stderr.close()
    assert follower.returncode == EXIT_BROKEN_PIPE and err == "", (follower.returncode, err)
