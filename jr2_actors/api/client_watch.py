"""The event streams' client watch: one thread that sees at once when a follower closes its connection, so
its stream gives its slot back now, not at the next failed heartbeat."""

from __future__ import annotations

import selectors
import socket
import threading
from collections.abc import Callable
from contextlib import suppress

from jr2_actors.values.constants import API_SHUTDOWN_SECONDS


class ClientWatch:
    """One thread that watches the sockets of open event streams (a worker holds each, blocked in its feed
    wait) and calls a stream's `close` the moment its client closes or resets the connection."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._wake, self._waker = socket.socketpair()
        self._selector.register(self._wake, selectors.EVENT_READ)
        self._thread: threading.Thread | None = None
        self._stopped = False

    def watch(self, sock: socket.socket, gone: Callable[[], None]) -> Callable[[], None]:
        """Call `gone` once when `sock`'s client closes; the function returned stops the watch."""
        with self._lock:
            if self._stopped:
                return lambda: None
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="jr2-api-watch", daemon=True)
                self._thread.start()
            self._selector.register(sock, selectors.EVENT_READ, gone)
        return lambda: self._forget(sock)

    def _forget(self, sock: socket.socket) -> None:
        with self._lock, suppress(KeyError, ValueError):
            self._selector.unregister(sock)

    def _run(self) -> None:
        while True:
            for key, _ in self._selector.select():
                if key.fileobj is self._wake:
                    return
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                self._forget(sock)  # readable: gone, or sending — neither is watched again (no busy loop)
                if _closed_by_peer(sock):
                    key.data()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            thread = self._thread
        self._waker.send(b"x")
        if thread is not None:
            thread.join(API_SHUTDOWN_SECONDS)
        self._selector.close()
        self._wake.close()
        self._waker.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    """A readable socket whose next read is its end (or a reset). MSG_DONTWAIT, not a timeout of 0: the
    worker that holds the socket may be writing on it, and the timeout is the socket's, shared."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
