"""A connection's pace: `Pace`, a minimum rate for a body read or an answer's write; `timeout_of`, a socket's
timeout for one operation; `Unread`, a client that has stopped reading what it is sent, seen from the
sender's side of the socket.

An event stream writes little (a line per event, a keepalive per heartbeat), so a follower that never reads
fills neither its window nor our send buffer for a long time, and a write never blocks for the pacing to cut
(`Pace`): it holds its stream slot for good. What the kernel shows is the bytes sent and not yet
acknowledged (`SIOCOUTQ`): a peer that reads acknowledges them; one whose window is full (it took nothing)
leaves them there. Before each write, a connection on which bytes wait and none has been acknowledged for
`bound` seconds is cut (the write raises `TimeoutError`, a client gone). Where the kernel does not say
(not Linux), nothing is cut here.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import sys
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_OUTQ = getattr(termios, "TIOCOUTQ", None) if sys.platform.startswith("linux") else None  # SIOCOUTQ


def waiting(sock: socket.socket) -> int:
    """Bytes sent on `sock` and not yet acknowledged by the peer (0 when the kernel does not say)."""
    if _OUTQ is None:
        return 0
    try:
        return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0\0\0\0"))[0])
    except OSError:
        return 0


class Unread:
    def __init__(self, bound: float) -> None:
        self.bound = bound
        self.sent = 0  # bytes handed to the socket so far
        self._acked = 0  # the most the peer had acknowledged at a check
        self._since: float | None = None  # since when bytes wait and none was acknowledged

    def check(self, sock: socket.socket) -> None:
        """Before a write: raise `TimeoutError` when bytes have waited unacknowledged for the bound."""
        unacked = waiting(sock)
        acked = self.sent - unacked
        now = time.monotonic()
        if unacked == 0 or acked > self._acked:
            self._acked, self._since = acked, None
        elif self._since is None:
            self._since = now
        elif now - self._since >= self.bound:
            raise TimeoutError(f"the client has taken nothing for {self.bound:g} s")


@contextmanager
def timeout_of(sock: socket.socket, seconds: float, restore: float) -> Iterator[None]:
    """The socket's timeout for one operation (0: non-blocking), then its usual one again."""
    sock.settimeout(seconds)
    try:
        yield
    finally:
        sock.settimeout(restore)


@dataclass
class Pace:
    """A minimum rate, for a body read or an answer's write: the next byte is due by
    start + grace + bytes moved / rate."""

    start: float
    grace: float
    rate: float
    moved: int = 0

    def left(self) -> float:
        """Seconds until the next byte is due; a TimeoutError (what cheroot and the app read as a 408,
        or as a client gone mid-answer) once it is overdue."""
        left = self.start + self.grace + self.moved / self.rate - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        return left
