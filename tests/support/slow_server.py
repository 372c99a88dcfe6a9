"""A loopback HTTP peer that is slow on purpose: it holds an answer, or trickles it a byte at a time.

The pauses are the peer's own behaviour (a Harness trickling its answer), never a test waiting for logic:
tests wait on its events (`got_request`, `trickling`, `closed`) with a timeout.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import Literal

Mode = Literal["hold", "trickle-headers", "trickle-body"]
BYTE_PAUSE = 0.02
TRICKLE_BYTES = 100_000  # at one byte a pause, far longer than any test waits


class SlowServer:
    def __init__(self, mode: Mode, *, body: bytes = b'{"kills": []}') -> None:
        self.mode = mode
        self.body = body
        self.got_request = threading.Event()
        self.trickling = threading.Event()
        self.closed = threading.Event()  # the client ended the connection before the answer was whole
        self.done = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._serve, name="slow-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def close(self) -> None:
        self.done.set()
        with contextlib.suppress(OSError):
            self._sock.close()
        self._thread.join(5)

    def _serve(self) -> None:
        try:
            conn, _ = self._sock.accept()
        except OSError:
            return
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                request += chunk
            self.got_request.set()
            if self.mode == "hold":
                while not self.done.is_set() and not self._wait_for_close(conn, 0.1):
                    pass
            elif self.mode == "trickle-headers":
                self._trickle(conn, b"HTTP/1.1 200 OK\r\n" + b"x-slow: " + b"a" * TRICKLE_BYTES)
            else:
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {TRICKLE_BYTES}\r\n\r\n".encode()
                conn.sendall(head)
                self._trickle(conn, b" " * TRICKLE_BYTES)

    def _trickle(self, conn: socket.socket, data: bytes) -> None:
        for i in range(len(data)):
            try:
                conn.sendall(data[i:i + 1])
            except OSError:
                self.closed.set()
                return
            self.trickling.set()
            if self._wait_for_close(conn, BYTE_PAUSE):
                return

    def _wait_for_close(self, conn: socket.socket, seconds: float) -> bool:
        """Wait up to `seconds`; True (and `closed` set) when the client ended the connection."""
        if self.done.is_set():
            return True
        readable, _, _ = select.select([conn], [], [], seconds)
        if readable:
            try:
                data = conn.recv(1)
            except OSError:
                data = b""
            if not data:
                self.closed.set()
                return True
        return False
