"""`Cut`: ending one in-flight Harness request from another thread, whatever phase it is in.

requests' timeouts bound each socket read, not a request: a Harness that trickles its answer a byte a
second never trips one. ADR-0062's 5 s memory-kill read is a total limit, and an aborted Turn's
long-poll must stop at once, so both need a way to end a request from outside: `Cut.fire()` shuts the
socket the request uses — while it connects, sends, waits for headers or reads the body — and the
request's own thread then fails with a connection error.

How a Cut finds its socket: `mount_cuts(session)` makes the session's pools hand out connections that
note, at checkout, the Cut active on the checking-out thread (`with cut.active():`), and forget it when
the connection comes back to the pool (its answer read, or let go). A Cut shuts only a connection it still
owns, under the connection's own lock with the checkout and the return, so a connection already handed to
another request,
or idle in the pool, is never shut by a late fire: on a session shared by many clients (the process's one
Harness session), closing one client ends its calls and no other's, and leaves the idle connections kept.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import requests
import urllib3.connection
import urllib3.connectionpool
from requests.adapters import HTTPAdapter

# Each connection's owner is guarded by a lock of its own: one lock for every connection of the process was
# taken at each checkout and return of thousands of seats' calls, and they queued on it.
_ACTIVE = threading.local()


class Cut:
    """One request's off switch; fire it from any thread, as often as you like."""

    def __init__(self) -> None:
        self._fired = False
        # The connections it owns now: a connection leaves at its return to the pool, so a Cut reused for
        # many requests (a Turn's long-polls) holds one or two, never every connection of a shared pool.
        self._connections: set[Any] = set()

    @property
    def fired(self) -> bool:
        return self._fired

    @contextlib.contextmanager
    def active(self) -> Iterator[Cut]:
        """Connections checked out on this thread inside the block belong to this Cut."""
        previous = getattr(_ACTIVE, "cut", None)
        _ACTIVE.cut = self
        try:
            yield self
        finally:
            _ACTIVE.cut = previous

    def fire(self) -> None:
        # The flag first, then the connections: a checkout that read the flag unset had joined the set
        # before (`_claim`), so one of the two shuts its socket.
        self._fired = True
        for conn in list(self._connections):  # a copy: a checkout or a return may change it meanwhile
            with _lock(conn):
                if getattr(conn, "_jr2_cut", None) is self:
                    _shut(conn)

    def _claim(self, conn: Any) -> None:
        """Called under the connection's lock at checkout."""
        conn._jr2_cut = self
        self._connections.add(conn)
        if self._fired:
            _shut(conn)


def _shut(conn: Any) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def let_go(conn: Any) -> None:
    """Back in the pool: no request owns it any more (`_put_conn` takes None too, for a slot given back)."""
    if conn is not None:
        with _lock(conn):
            _disown(conn)


def _lock(conn: Any) -> threading.Lock:
    """The connection's own lock, made at its first use (dict.setdefault is atomic)."""
    lock: threading.Lock = conn.__dict__.setdefault("_jr2_lock", threading.Lock())
    return lock


def _disown(conn: Any) -> None:
    """Under the connection's lock: it belongs to no Cut."""
    owner = getattr(conn, "_jr2_cut", None)
    if isinstance(owner, Cut):
        owner._connections.discard(conn)
    conn._jr2_cut = None


def _claim_for_current(conn: Any) -> None:
    cut: Cut | None = getattr(_ACTIVE, "cut", None)
    with _lock(conn):
        _disown(conn)
        if cut is not None:
            cut._claim(conn)


class _Reclaiming:
    """A connection whose socket, made after its Cut fired, is shut at once; one body for both schemes."""

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _reclaim(self)


class _HTTPConnection(_Reclaiming, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_Reclaiming, urllib3.connection.HTTPSConnection):
    pass


def _reclaim(conn: Any) -> None:
    """A socket made after its Cut fired is shut at once (the fire found no socket to shut)."""
    with _lock(conn):
        cut = getattr(conn, "_jr2_cut", None)
        if isinstance(cut, Cut) and cut._fired:
            _shut(conn)


class CutPool:
    """The one pool behaviour, for both schemes: a connection taken from the pool belongs to the caller's
    Cut, one given back to none. urllib3's HTTPS pool differs from its HTTP pool only in its connection
    class and TLS options, so each scheme's pool below is this class over urllib3's own."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        _claim_for_current(conn)
        return conn

    def _put_conn(self, conn: Any) -> None:
        let_go(conn)
        super()._put_conn(conn)  # type: ignore[misc]


class CutHTTPPool(CutPool, urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class CutHTTPSPool(CutPool, urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class CutAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": CutHTTPPool, "https": CutHTTPSPool}


def mount_cuts(session: requests.Session, adapter: HTTPAdapter | None = None, **adapter_options: Any) -> None:
    """Let `Cut`s end this session's requests (every other behaviour of the session is unchanged);
    `adapter_options` are `HTTPAdapter`'s (pool sizes, retries); `adapter`, a `CutAdapter` made already."""
    adapter = adapter or CutAdapter(**adapter_options)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
