"""An API server with a small worker pool and a quiet backend, and raw loopback sockets against it: for the
tests of the API's bounds, where a client that misbehaves must be seen byte by byte."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiLimits, ApiServer
from jr2_actors.run.feed.hub import FeedRead
from jr2_actors.values.run_ids import Keyed
from jr2_actors.values.workflow import parse_workflow
from tests.support.backends import QuietBackend

TOKEN = "t0ken-for-the-bounds-tests-0123456789"
SOURCES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")  # the hostile sockets' addresses
GENEROUS = 10.0


class Live(QuietBackend):
    """A healthy Backend with one live run, `r-1`, whose feed has nothing new (each wait runs out)."""

    def __init__(self, metrics: str = "") -> None:
        self._closing = threading.Event()
        self._metrics = metrics

    def submit(self, document: object, run_input: Mapping[str, Any] | None, *,
               keyed: Keyed | None = None) -> str:
        parse_workflow(document)  # as the Orchestrator does: the workflow's bounds are the parser's
        return "r-2"

    def status(self, run_id: str) -> dict[str, Any] | None:
        return {"runId": run_id} if run_id == "r-1" else None

    def runs_encoded(self, prefix: str = "") -> list[dict[str, Any]]:
        return [{"runId": "r-1"}]

    def feed(self, run_id: str, after: int, wait: float) -> FeedRead | None:
        if run_id != "r-1":
            return None
        self._closing.wait(wait)
        return FeedRead([], False)

    def metrics(self) -> str:
        return self._metrics

    def interrupt_feeds(self) -> None:
        self._closing.set()


@contextmanager
def served(limits: ApiLimits | None = None, *, threads: int = 2, timeout: float = 30.0,
           max_streams: int = 8, heartbeat: float = 60.0, backend: Live | None = None) -> Iterator[ApiServer]:
    server = ApiServer(Api(backend or Live(), TOKEN, heartbeat=heartbeat, max_streams=max_streams), threads=threads,
                       timeout=timeout, limits=limits or ApiLimits())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def connect(server: ApiServer, source: str = "127.0.0.1", receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:  # before the connect: it sets the window the client offers
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(GENEROUS)
    sock.bind((source, 0))
    sock.connect(server.address)
    return sock


def crowd(stack: ExitStack, server: ApiServer, count: int) -> list[socket.socket]:
    """`count` connections spread over SOURCES, closed when `stack` closes."""
    return [stack.enter_context(connect(server, SOURCES[i % len(SOURCES)])) for i in range(count)]


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset after its answer included)."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    return got


def status_of(raw: bytes) -> int:
    assert raw.startswith(b"HTTP/1.1 "), raw[:200]
    return int(raw.split(b" ", 2)[1])


def still_open(sock: socket.socket) -> bool:
    """The server has neither closed nor answered this connection yet."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
        sock.settimeout(GENEROUS)
    return False
