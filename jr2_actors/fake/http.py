"""The one loopback HTTP server of the fake cluster: the API server, the Harness and raw test servers.

Each answer leaves in one write with `TCP_NODELAY` set: `http.server` writes headers and body in separate
sends without it, and each small answer then waits about 40 ms on the client's delayed ACK
(LIBRARY-NOTES.md, "Threads, the GIL and small messages"). A streamed answer (a watch) is chunked, one
write per chunk.

An `App` answers requests: `handle(request)` runs on the connection's own thread and answers through the
`Request`'s methods. The server binds at construction (so its URL is known before it serves) and a port
that cannot be had is a `ListenError` naming it, never a hang.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import selectors
import socket
import ssl
import threading
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from jr2_actors.values.errors import Jr2Error

log = logging.getLogger(__name__)

Headers = tuple[tuple[str, str], ...]


class ListenError(Jr2Error):
    """The server could not listen where it was asked to (the caller's port is taken or out of range)."""


class App(Protocol):
    def handle(self, request: Request) -> None: ...


class Request(BaseHTTPRequestHandler):
    """One HTTP/1.1 request; what an `App` reads and answers with."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s: " + format, self.server.name, *args)

    def do_GET(self) -> None:
        self.server.app.handle(self)

    do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

    # -- reading ----------------------------------------------------------------------------------------

    @property
    def url_path(self) -> str:
        return urlsplit(self.path).path

    @property
    def query(self) -> dict[str, str]:
        """The query's parameters, one value each: the first of a repeated name, as the API server's
        conversion of a query into options takes it (apimachinery Convert_Slice_string_To_string)."""
        return {k: v[0] for k, v in parse_qs(urlsplit(self.path).query, keep_blank_values=True).items()}

    def content_length(self) -> int:
        try:
            return max(int(self.headers.get("Content-Length") or 0), 0)
        except ValueError:
            return 0

    def read_body(self, limit: int) -> bytes | None:
        """The body, or None when it is larger than `limit` (then drained, within reason, and the
        connection is closed after the answer)."""
        length = self.content_length()
        if length > limit:
            remaining = length
            while 0 < remaining <= 16 * limit:
                chunk = self.rfile.read(min(remaining, 65536))
                if not chunk:
                    break
                remaining -= len(chunk)
            self.close_connection = True
            return None
        return self.rfile.read(length) if length else b""

    def peer_gone(self, wait: float = 0.0) -> bool:
        """Whether a client that never writes on its connection (a watcher) has left, waiting up to `wait`
        for it: anything readable (a FIN, a TLS close) means it went."""
        try:
            readable, _, _ = select.select([self.connection], [], [], wait)
        except (OSError, ValueError):
            return True
        return bool(readable)

    # -- answering --------------------------------------------------------------------------------------

    def respond(self, code: int, body: bytes, content_type: str | None = "application/json",
                headers: Headers = ()) -> None:
        """The whole answer in one write."""
        lines = [self._status_line(code)]
        if content_type is not None:
            lines.append(f"Content-Type: {content_type}")
        lines.append(f"Content-Length: {len(body)}")
        lines += [f"{k}: {v}" for k, v in headers]
        self._write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def respond_json(self, code: int, doc: Any, headers: Headers = ()) -> None:
        if isinstance(doc, str):
            self.respond(code, doc.encode(), "text/plain", headers)
        elif code == 204:
            self.respond(code, b"", None, headers)
        else:
            self.respond(code, json.dumps(doc).encode(), "application/json", headers)

    def start_chunked(self, content_type: str = "application/json") -> None:
        self._write((f"{self._status_line(200)}\r\nContent-Type: {content_type}\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n").encode("latin-1"))

    def chunk(self, data: bytes) -> None:
        self._write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunked(self) -> None:
        self._write(b"0\r\n\r\n")

    def _status_line(self, code: int) -> str:
        self.log_request(code)
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = ""
        return f"{self.protocol_version} {code} {phrase}"

    def _write(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, app: App, *, host: str, port: int, name: str) -> None:
        self.app = app
        self.name = name
        self.closing = threading.Event()
        if not 0 <= port <= 65535:
            raise ListenError(f"{name}: port {port} is out of range (0-65535)")
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self._peak = 0  # the most connections open at once since the last `connections(reset_peak=True)`
        self.accepted = 0  # connections taken, ever: what shows a client keeping its connections alive
        try:
            super().__init__((host, port), Request)
        except OSError as e:
            raise ListenError(f"{name}: cannot listen on {host}:{port}: {e.strerror or e}") from e

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
            self._peak = max(self._peak, len(self._open))
            self.accepted += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def connections(self, *, reset_peak: bool = False) -> tuple[int, int]:
        """(open now, the most open at once): a bench's count of a client's connections, exact where a
        sample of /proc would miss a short one (a `kubectl` call's). `reset_peak` starts the next peak from
        the connections open now."""
        with self._open_lock:
            now, peak = len(self._open), self._peak
            if reset_peak:
                self._peak = now
        return now, peak

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its connection mid-request (or mid-handshake) is a client's business, as
        it is to a real server: logged for whoever debugs, never a traceback on stderr."""
        log.debug("%s: a connection from %s ended in error", self.name, client_address, exc_info=True)

    def close_connections(self) -> None:
        """A stopping server closes its connections, as a real one does: a client's idle keep-alive
        connection would otherwise hold its handler thread after the stop."""
        with self._open_lock:
            open_now = list(self._open)
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class HttpServer:
    """A `LoopbackServer` on its own thread; `tls` wraps it in HTTPS (the handshake runs on the
    connection's thread at its first read, not in the accept loop)."""

    def __init__(self, app: App, *, host: str = "127.0.0.1", port: int = 0, name: str = "fake-http",
                 tls: ssl.SSLContext | None = None) -> None:
        self._server = LoopbackServer(app, host=host, port=port, name=name)
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True,
                                                  do_handshake_on_connect=False)
        self._scheme = "https" if tls is not None else "http"
        self._host = host
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=name, daemon=True)
        self._started = False
        self._more: list[socket.socket] = []  # `listen_more`'s sockets, served by the same server
        self._more_thread: threading.Thread | None = None

    def listen_more(self, count: int) -> list[str]:
        """Listen on `count` more free ports of the same host (before `start`): their connections are served
        as the first port's are (one accept thread for them all). Their URLs, in order: a fake whose every
        Sandbox has its own Harness address uses one each."""
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, 0))
            sock.listen(128)
            sock.setblocking(False)
            self._more.append(sock)
        return [f"{self._scheme}://{self._host}:{s.getsockname()[1]}" for s in self._more[-count:]]

    def _accept_more(self) -> None:
        with selectors.DefaultSelector() as selector:
            for sock in self._more:
                selector.register(sock, selectors.EVENT_READ)
            while not self._server.closing.is_set():
                for key, _ in selector.select(0.05):
                    with contextlib.suppress(BlockingIOError, OSError):
                        conn, peer = key.fileobj.accept()  # type: ignore[union-attr]
                        conn.setblocking(True)
                        self._server.process_request(conn, peer)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"{self._scheme}://{self._host}:{self.port}"

    @property
    def accepted(self) -> int:
        """How many connections the server has taken since it started."""
        return self._server.accepted

    @property
    def closing(self) -> threading.Event:
        """Set once the server stops: streams and long-polls end."""
        return self._server.closing

    def connections(self, *, reset_peak: bool = False) -> tuple[int, int]:
        """(open now, peak): `LoopbackServer.connections`."""
        return self._server.connections(reset_peak=reset_peak)

    def start(self) -> None:
        self._started = True
        self._thread.start()
        if self._more:
            self._more_thread = threading.Thread(target=self._accept_more, name=f"{self._server.name}-more",
                                                 daemon=True)
            self._more_thread.start()

    def stop(self) -> None:
        self._server.closing.set()
        if self._started:
            self._server.shutdown()
            self._thread.join(5)
        if self._more_thread is not None:
            self._more_thread.join(5)
        for sock in self._more:
            sock.close()
        self._server.server_close()
        self._server.close_connections()


def json_args(body: bytes) -> Mapping[str, Any]:
    """A control route's JSON object body (empty is `{}`); anything else is the caller's ValueError."""
    if not body.strip():
        return {}
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"the body is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError("the body must be a JSON object")
    return doc


class HttpFront:
    """What a fake's listener says of itself, read off the `HttpServer` it wraps (the API server's and the
    Harness's both)."""

    _http: HttpServer

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        return self._http.url

    def connections(self, *, reset_peak: bool = False) -> tuple[int, int]:
        """Clients' connections: (open now, the most open at once), `HttpServer.connections`."""
        return self._http.connections(reset_peak=reset_peak)

    @property
    def accepted(self) -> int:
        """Connections taken, ever (`HttpServer.accepted`)."""
        return self._http.accepted
