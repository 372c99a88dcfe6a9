"""A watch's reads that wait for bytes apart from taking them, for a driven VirtualClock (`WatchStream.
wait_before_reads`, kube/watch_stream.py).

The clock counts a reader parked on a watch as work while bytes wait for it. A reader blocked in the
socket's own read takes the bytes as it wakes, then may wait for the GIL before it hands them on: a clock
that looked then read "nothing waiting" and jumped past a watch's end before the watch saw it (its stall
bound fired on a fed watch). Here the reader waits for the socket without taking from it (`Parking.waiting`),
and takes only once it is at work again.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Callable
from typing import Protocol


class Readable(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...


class Parking:
    """Whether the reader is in its wait, having taken nothing from the socket."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = False


def waited_read(reader: Readable, sock: socket.socket, parking: Parking) -> Callable[[int], bytes]:
    """`reader.read1` after a wait for `sock` that takes nothing from it. The first read takes, without
    waiting, what the buffered reader holds: body bytes that came with the headers, which no wait on the
    socket sees."""
    first = True

    def read(size: int) -> bytes:
        nonlocal first
        if first:
            first = False
            data = _buffered(reader, sock, size)
            if data:
                return data
        if not _pending(sock):
            parking.waiting = True
            try:
                if not readable(sock, sock.gettimeout()):
                    raise TimeoutError("timed out")  # as the socket's own read would, at its read timeout
            finally:
                parking.waiting = False
        return reader.read1(size)
    return read


def readable(sock: socket.socket, timeout: float | None) -> bool:
    """Whether bytes (or the end) wait on `sock`, waiting up to `timeout` seconds for them (None: for ever).
    A socket already closed reads as readable: the read that follows says what became of it."""
    try:
        ready, _, _ = select.select([sock], [], [], timeout)
    except (OSError, ValueError):
        return True
    return bool(ready)


def _pending(sock: socket.socket) -> bool:
    """Decrypted bytes a TLS socket holds, which no wait on the socket sees."""
    pending = getattr(sock, "pending", None)
    return callable(pending) and bool(pending())


def _buffered(reader: Readable, sock: socket.socket, size: int) -> bytes:
    """What `reader` holds or the socket has now, taken without blocking (b"" when nothing: the end of the
    answer is then read after the wait, as any other)."""
    timeout = sock.gettimeout()
    sock.settimeout(0.0)
    try:
        return reader.read1(size)
    except (BlockingIOError, ssl.SSLWantReadError):
        return b""
    finally:
        sock.settimeout(timeout)
