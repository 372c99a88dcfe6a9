"""The API's listener: cheroot's threaded WSGI server (CherryPy's), not `http.server`, with a gate in front.

Why cheroot: a fixed pool of worker threads, HTTP/1.1 keep-alive, a selector that parks idle keep-alive
connections without a worker, and a clean `stop()` that drains the pool — in one small pure-Python package.

What cheroot does not bound (LIBRARY-NOTES "cheroot"): it hands every new connection to a worker
at once, and the worker reads the request with blocking reads whose timeout is per read — so 16 sockets that
send nothing, or a byte a second, hold all 16 workers; its header and body sizes are unlimited by default; and
after an answer it drains whatever body the client declared. So, by cheroot's own hooks:

- **The gate** (`_Server.process_conn`, the hook every connection passes through, from the selector thread
  for a new or newly readable one): it takes what the socket has without blocking, and hands the connection
  to a worker only once the whole head (request line and headers) has arrived. Until then the connection is
  parked in cheroot's selector (`ConnectionManager.put`), with its `last_used` set so that cheroot's own
  expiry closes it at the head's deadline (`header_seconds`; a 408 if it had begun). A head over
  `max_header_bytes` is a 431, a bad or doubled `Content-Length` a 400, one over `max_body_bytes` a 413 —
  before a byte of the body is read; a chunked body is a 411 (a body needs its length). Idle and trickling
  clients cost a parked socket, never a worker.
- **Per-peer and total connection caps** (429 and 503), counted from the gate's first sight of a connection
  to its `close()`. At the total cap a new connection first **sheds the oldest one without a complete request**
  (a head still arriving, or idle between requests: its socket is shut). With nothing to shed, `PROBE_RESERVE`
  more are let in for probes only (any other request on one is a 503).
- **Probes answered by the gate**: a whole `GET /healthz` head with `Connection: close` (a kubelet's probe) is
  answered on the selector thread (`Api.probe` reads published state): it needs no worker, waits for none.
- **A body, and an answer, at a minimum rate**: the connection's reader (`_Inlet`, the socket's read side)
  serves the bytes the gate took first, then reads the socket with each read's timeout cut to the time the
  next byte is due (`start + grace + bytes moved / rate`): a trickled body is a 408 within its grace. Each
  write of an answer is paced the same way (`_Outlet`), so a client that stops reading is cut, where
  cheroot's timeout per send would hold the worker as long as a byte is taken now and then.
- **No drain of an unread body**: an answer given without reading the body (a 401, a 404) takes what has
  already arrived and closes the connection, rather than wait in a worker for the rest.
- `max_request_header_size` and `max_request_body_size` are set too, as cheroot's own backstops.
An event stream registers its close with `environ["jr2.watch_client"]` (`client_watch.ClientWatch`): a
client's close frees the stream's slot at once, not at the next failed heartbeat.
"""

from __future__ import annotations

import functools
import io
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from typing import Any

from cheroot import server as cheroot_server
from cheroot import wsgi
from cheroot.makefile import MakeFile, StreamReader, StreamWriter

from jr2_actors.api.client_watch import ClientWatch
from jr2_actors.api.framing import Refused, check_framing, head_end
from jr2_actors.api.pacing import Pace, Unread, timeout_of
from jr2_actors.values.constants import (
    API_HEADER_SECONDS,
    API_MAX_BODY_BYTES,
    API_MAX_CONNECTIONS,
    API_MAX_CONNECTIONS_PER_PEER,
    API_MAX_HEADER_BYTES,
    API_MIN_BYTES_PER_SECOND,
    API_PACE_GRACE_SECONDS,
    API_SHUTDOWN_SECONDS,
    API_SOCKET_TIMEOUT_SECONDS,
    API_UNREAD_SECONDS,
)

log = logging.getLogger(__name__)

THREADS = 16
# The listen backlog: connections the kernel holds before the selector accepts them (one per wake-up).
BACKLOG = 128
PROBE_RESERVE = 16  # connections past the cap, for probes only
PROBE = b"get /healthz "
_REASONS = {200: "OK", 400: "Bad Request", 408: "Request Timeout", 411: "Length Required", 413: "Payload Too Large",
            429: "Too Many Requests", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


@dataclass(frozen=True)
class ApiLimits:
    """What a client may cost the listener before the app sees its request (docs/operations.md)."""

    header_seconds: float = API_HEADER_SECONDS
    max_header_bytes: int = API_MAX_HEADER_BYTES
    max_body_bytes: int = API_MAX_BODY_BYTES
    pace_grace_seconds: float = API_PACE_GRACE_SECONDS
    min_bytes_per_second: float = API_MIN_BYTES_PER_SECOND
    max_connections_per_peer: int = API_MAX_CONNECTIONS_PER_PEER
    max_connections: int = API_MAX_CONNECTIONS
    unread_seconds: float = API_UNREAD_SECONDS


class ApiServer:
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *, threads: int = THREADS,
                 timeout: float = API_SOCKET_TIMEOUT_SECONDS, limits: ApiLimits = ApiLimits()) -> None:
        self._server = _Server((host, port), app, limits, numthreads=threads, timeout=int(max(timeout, 1)),
                               shutdown_timeout=int(API_SHUTDOWN_SECONDS), request_queue_size=BACKLOG,
                               server_name="jr2-actors")
        self._thread: threading.Thread | None = None
        self._app = app

    def start(self) -> None:
        """Bind and listen now (an address in use raises OSError here), then serve on a thread."""
        self._server.prepare()
        self._thread = threading.Thread(target=self._serve, name="jr2-api", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._server.serve()
        except Exception:
            log.exception("the API server stopped on an error")

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.bind_addr[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    def stop(self) -> None:
        """End the event streams (an app with `close()`), stop accepting, let requests in flight finish."""
        close = getattr(self._app, "close", None)
        if callable(close):
            close()
        self._server.stop()
        if self._thread is not None:
            self._thread.join(API_SHUTDOWN_SECONDS + 1)


# -- the pieces, in the order a request meets them ------------------------------------------------------


class _Server(wsgi.Server):
    def __init__(self, bind_addr: tuple[str, int], app: Any, limits: ApiLimits, **kw: Any) -> None:
        super().__init__(bind_addr, app, **kw)
        self.limits = limits
        self.gateway = _Gateway
        self.ConnectionClass = _Connection
        self.max_request_header_size = limits.max_header_bytes
        self.max_request_body_size = limits.max_body_bytes
        # cheroot counts the parked heads among its kept-alive connections (default 10, then every answer
        # closes its connection); the connection caps bound them all instead.
        self.keep_alive_conn_limit = limits.max_connections
        self._peers: dict[str, int] = {}
        self._open = 0
        self._count_lock = threading.Lock()
        self._parked: dict[_Connection, None] = {}  # in the selector without a complete request
        self._park_lock = threading.RLock()  # a worker parks, the selector thread takes back and sheds
        self.client_watch = ClientWatch()

    def stop(self) -> None:
        super().stop()
        self.client_watch.stop()

    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        """cheroot's messages into our log (it writes to stderr); a client's reset or timeout is DEBUG."""
        log.log(level if level >= logging.WARNING else logging.DEBUG, "cheroot: %s", msg, exc_info=traceback)

    def process_conn(self, conn: Any) -> None:
        """The gate: a connection reaches a worker only with its whole head in hand (see the module)."""
        if not isinstance(conn, _Connection):  # pragma: no cover - every connection is ours
            super().process_conn(conn)
            return
        with self._park_lock:
            self._parked.pop(conn, None)
        try:
            if not conn.admitted:
                self._admit(conn)
            if self._head_complete(conn):
                head = bytes(conn.inlet.head[:head_end(bytes(conn.inlet.head))[0]]).lower()  # this request's
                if head.startswith(PROBE) and (conn.reserved or b"\r\nconnection: close\r\n" in head):
                    conn.refuse(*self.wsgi_app.probe())  # answered here, then closed, as the probe asked
                    return
                if conn.reserved:
                    raise Refused(503, f"more than {self.limits.max_connections} connections are open")
                super().process_conn(conn)
            else:
                deadline = conn.head_deadline
                self._park(conn)  # in cheroot's selector until it is readable again
                if deadline is not None:
                    conn.last_used = deadline - self.timeout  # cheroot's expiry closes it at the deadline
        except Refused as refusal:
            conn.refuse(refusal.status, str(refusal))
        except OSError:
            conn.close()

    def put_conn(self, conn: Any) -> None:
        """A kept-alive connection back from its worker: one whose next request the gate already holds goes
        through the gate now (cheroot would wait for the socket to be readable)."""
        if self.ready and isinstance(conn, _Connection) and conn.inlet.head:
            self.process_conn(conn)
        elif isinstance(conn, _Connection):
            self._park(conn)
        else:  # pragma: no cover - every connection is ours
            super().put_conn(conn)

    def _park(self, conn: _Connection) -> None:
        with self._park_lock:  # listed before the selector can hand it back (put_conn may, at once)
            self._parked[conn] = None
            super().put_conn(conn)

    def _shed(self) -> bool:
        """Shut the oldest parked connection's socket (the gate then closes it as a client gone), if any."""
        with self._park_lock:
            if not self._parked:
                return False
            oldest = min(self._parked, key=lambda c: c.accepted_at)
            del self._parked[oldest]
        log.info("shed the oldest connection without a request (from %s) at the cap", oldest.remote_addr)
        with suppress(OSError):
            oldest.socket.shutdown(socket.SHUT_RDWR)
        return True

    def _admit(self, conn: _Connection) -> None:
        peer = str(conn.remote_addr or "")
        full = self._open >= self.limits.max_connections
        if full and not self._shed():
            conn.reserved = True  # a probe's: any other request on it is refused once its head is whole
        with self._count_lock:
            if self._peers.get(peer, 0) >= self.limits.max_connections_per_peer:
                raise Refused(429, f"more than {self.limits.max_connections_per_peer} connections from {peer}")
            if self._open >= self.limits.max_connections + PROBE_RESERVE:
                raise Refused(503, f"more than {self.limits.max_connections} connections are open")
            self._peers[peer] = self._peers.get(peer, 0) + 1
            self._open += 1
            conn.admitted = True

    def release(self, conn: _Connection) -> None:
        peer = str(conn.remote_addr or "")
        with self._park_lock:
            self._parked.pop(conn, None)  # closed by cheroot's expiry, or at the stop
        with self._count_lock:
            self._open -= 1
            left = self._peers.get(peer, 1) - 1
            if left > 0:
                self._peers[peer] = left
            else:
                self._peers.pop(peer, None)

    def _head_complete(self, conn: _Connection) -> bool:
        """Take what the socket has, without blocking; True once the head is whole (and within bounds)."""
        limits = self.limits
        inlet = conn.inlet
        if conn.head_deadline is None:  # a new request: its head is due within header_seconds
            conn.head_deadline = time.time() + limits.header_seconds
            if conn.rfile.has_data():  # a pipelined request, already in the reader's buffer
                inlet.head[:0] = conn.rfile.read(len(conn.rfile.peek(0)))
        gone = inlet.pull(limits.max_header_bytes)
        head = bytes(inlet.head)
        end, size = head_end(head)
        if end < 0:
            if gone and head:  # a client that half-closed may still read why
                raise Refused(400, "the connection ended before the request line and headers did")
            if gone:
                raise OSError("the client left before it began a request")
            if len(head) >= limits.max_header_bytes:
                raise Refused(431, f"the request line and headers are over {limits.max_header_bytes} bytes")
            if time.time() >= conn.head_deadline:
                raise Refused(408, f"the request line and headers took over {limits.header_seconds:g} s")
            return False
        if size > limits.max_header_bytes:
            raise Refused(431, f"the request line and headers are over {limits.max_header_bytes} bytes")
        check_framing(head[:end], limits.max_body_bytes)
        conn.head_deadline = None
        return True


class _Inlet(socket.SocketIO):
    """A connection's read side: the bytes the gate already took (`head`) come first, then the socket —
    with a body's reads paced (`pace`) and a non-blocking mode for taking only what has arrived."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        super().__init__(sock, "rb")
        self.sock = sock
        self.timeout = timeout
        self.head = bytearray()
        self.pace: Pace | None = None
        self.nonblocking = False

    def readinto(self, b: Any) -> int | None:
        if self.head:
            n = min(len(b), len(self.head))
            b[:n] = self.head[:n]
            del self.head[:n]
            return n
        if self.nonblocking:
            with self.timeout_of(0.0):
                return super().readinto(b)  # None when nothing has arrived
        if self.pace is None:
            return super().readinto(b)
        with self.timeout_of(min(self.timeout, self.pace.left())):
            got = super().readinto(b)
        self.pace.moved += got or 0
        return got

    def timeout_of(self, seconds: float) -> AbstractContextManager[None]:
        return timeout_of(self.sock, seconds, self.timeout)

    def pull(self, cap: int) -> bool:
        """Append what the socket has (up to `cap` bytes of head) without blocking; True at its end."""
        with self.timeout_of(0.0):
            while len(self.head) < cap:
                try:
                    data = self.sock.recv(cap - len(self.head))
                except BlockingIOError:
                    return False
                if not data:
                    return True
                self.head += data
        return False

    def drain_reader(self, reader: Any, limit: int) -> int:
        """Read and discard up to `limit` bytes of a body that have arrived (in `reader`'s buffer, then the
        socket's), without blocking; how many."""
        taken = 0
        self.nonblocking = True
        try:
            while taken < limit:
                data = reader.read1(min(65536, limit - taken))
                if not data:
                    break
                taken += len(data)
        except OSError:
            pass
        finally:
            self.nonblocking = False
        return taken

    def drain(self, limit: int) -> int:
        """Discard up to `limit` bytes that have already arrived on the socket; how many."""
        taken = 0
        with self.timeout_of(0.0):
            while taken < limit:
                try:
                    data = self.sock.recv(min(65536, limit - taken))
                except (BlockingIOError, OSError):
                    break
                if not data:
                    break
                taken += len(data)
        return taken


class _Outlet(socket.SocketIO):
    """A connection's write side, each write of an answer paced (a client that stops reading is cut within
    the grace, not held for a socket timeout per send that every trickled byte renews), and cut once what it
    was sent has waited unread past a bound (`pacing.Unread`: a quiet stream's follower that never reads)."""

    def __init__(self, sock: socket.socket, timeout: float, unread_seconds: float) -> None:
        super().__init__(sock, "wb")
        self.sock = sock
        self.timeout = timeout
        self.pace: Pace | None = None
        self.unread = Unread(unread_seconds)

    def write(self, b: Any) -> int | None:
        self.unread.check(self.sock)
        if self.pace is None:
            sent = super().write(b)
        else:
            with timeout_of(self.sock, min(self.timeout, self.pace.left()), self.timeout):
                sent = super().write(b)
            self.pace.moved += sent or 0
        self.unread.sent += sent or 0
        return sent


class _Writer(StreamWriter):
    """cheroot's socket writer over an `_Outlet`; each `write` (a head, a chunk, an event) is paced."""

    def __init__(self, outlet: _Outlet, bufsize: int, limits: ApiLimits) -> None:
        super(StreamWriter, self).__init__(outlet, bufsize)
        self.bytes_written = 0
        self._outlet = outlet
        self._limits = limits

    def write(self, b: Any) -> Any:
        self._outlet.pace = Pace(time.monotonic(), self._limits.pace_grace_seconds,
                                  self._limits.min_bytes_per_second)
        try:
            return super().write(b)  # type: ignore[no-untyped-call]  # cheroot's stub leaves it untyped
        finally:
            self._outlet.pace = None


class _Reader(StreamReader):
    """cheroot's socket reader over an `_Inlet` instead of a bare `socket.SocketIO` (the same buffered
    reader `StreamReader.__init__` builds, with another raw stream)."""

    def __init__(self, inlet: _Inlet, bufsize: int) -> None:
        super(StreamReader, self).__init__(inlet, bufsize)
        self.bytes_read = 0


class _Connection(cheroot_server.HTTPConnection):
    def __init__(self, server: _Server, sock: socket.socket, makefile: Callable[..., Any] = MakeFile) -> None:
        del makefile  # cheroot's; ours wraps the socket in an _Inlet and an _Outlet
        self.inlet = _Inlet(sock, float(server.timeout))
        self.outlet = _Outlet(sock, float(server.timeout), server.limits.unread_seconds)
        super().__init__(server, sock, self._makefile)
        self.admitted = False
        self.reserved = False
        self.accepted_at = time.monotonic()
        self.head_deadline: float | None = time.time() + server.limits.header_seconds  # from the accept
        self._closed = False

    def _makefile(self, sock: socket.socket, mode: str = "r", bufsize: int = io.DEFAULT_BUFFER_SIZE) -> Any:
        if "r" in mode:
            return _Reader(self.inlet, bufsize)
        return _Writer(self.outlet, bufsize, self.server.limits)

    def refuse(self, status: int, error: str | dict[str, Any]) -> None:
        """Answer the gate's refusal (or a probe's document), then close."""
        self._say(status, error)
        self.close()

    def _say(self, status: int, error: str | dict[str, Any]) -> None:
        """Answer without blocking (a short answer fits the socket's buffer), having taken what the client
        sent: closing on unread bytes would reset the connection and could lose the answer."""
        body = json.dumps(error if isinstance(error, dict) else {"error": error}, separators=(",", ":")).encode()
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        log.debug("answered %s with %d at the gate: %s", self.remote_addr, status, error)
        self.inlet.drain(self.server.limits.max_header_bytes + self.server.limits.max_body_bytes)
        with self.inlet.timeout_of(0.0), suppress(OSError):
            self.socket.send(head + body)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.head_deadline is not None and self.inlet.head and time.time() >= self.head_deadline:
            # cheroot's expiry, closing a parked connection whose head began and never finished: say why
            self._say(408, f"the request line and headers took over {self.server.limits.header_seconds:g} s")
        if self.admitted:
            self.server.release(self)
        super().close()


class _Request(cheroot_server.HTTPRequest):
    def respond(self) -> None:
        """The body's reads are paced from here: a trickled body is cut within its grace."""
        limits = self.server.limits
        inlet = self.conn.inlet
        inlet.pace = Pace(time.monotonic(), limits.pace_grace_seconds, limits.min_bytes_per_second)
        try:
            super().respond()
        finally:
            inlet.pace = None

    def send_headers(self) -> None:
        """An answer given without reading the whole body takes what has arrived of it, and closes the
        connection if that is not all (cheroot would wait in this worker for the rest)."""
        if any(k.lower() == b"connection" and v.lower() == b"close" for k, v in self.outheaders):
            self.close_connection = True  # the app's word (cheroot only honours it on a 413)
        body = self.rfile
        remaining = int(getattr(body, "remaining", 0) or 0)
        if remaining > 0:
            body.remaining = remaining - self.conn.inlet.drain_reader(self.conn.rfile, remaining)
            if body.remaining > 0:
                self.close_connection = True
        super().send_headers()


_Connection.RequestHandlerClass = _Request


class _Gateway(wsgi.Gateway_10):
    def __init__(self, req: Any) -> None:
        super().__init__(req)
        self.env["jr2.watch_client"] = functools.partial(req.server.client_watch.watch, req.conn.socket)
