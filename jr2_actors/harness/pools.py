"""The Harness session's pools: one per Harness address, sized to the clients that hold it.

Why not urllib3's own pool manager: it keeps a fixed number of connections per address (idle ones; more
at once are made and closed after use, with a "Connection pool is full" warning each) and evicts the least
recently used address past a count even while its connections are in use. Every seat of the process talks
to one address when its Agents are Menu-only (the Instance Harness) or when the fake cluster serves every
Sandbox: 5,000 seats long-polling through 32 kept connections opened and closed a connection a call, and
the pool's churn, not the work, bounded how fast a release drained.

So each `HarnessClient` on the shared session holds its address (`hold`) from its start to its close, and
the address's pool keeps `HARNESS_POOL_SIZE` + `HARNESS_POOL_PER_CLIENT` × holders idle connections: a seat
(a long-poll, an answer or an admission, the admission's health probe) never finds its pool full. A pool
shrinks when its holders go, closing the idle connections it no longer keeps. An address nobody holds keeps
`HARNESS_POOL_SIZE` while it is one of the `HARNESS_POOLS_WARM` most recently let go (a Sandbox's attach
lets go before its seat holds: the seat takes the attach's connection), none past them — most are finished
Sandboxes', gone for good, and each idle socket held a connection (a thread, in the fake Harness) on the far
side until the address was evicted, thousands of Sandboxes later. Only addresses nobody holds are evicted,
least recently used first, once more than `bound` addresses have pools (evicting one closes nothing then: no
churn); a Sandbox's pool lives as long as a seat or an attach uses it, however many Sandboxes there are, and
closing a pool closes only its idle connections (one in use is closed when it comes back, by urllib3's
closed pool).

Work per request is O(1): a dict lookup and an LRU move under one lock.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import requests
import urllib3.util
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.poolmanager import PoolManager

from jr2_actors.net.cookies import NoCookies
from jr2_actors.net.cut import CutAdapter, CutHTTPPool, CutHTTPSPool, let_go, mount_cuts
from jr2_actors.values.constants import HARNESS_POOL_PER_CLIENT, HARNESS_POOL_SIZE, HARNESS_POOLS, HARNESS_POOLS_WARM

Address = tuple[str, str, int]  # scheme, host, port: what urllib3 keys a pool by (with its TLS options)

_DEFAULT_PORTS = {"http": 80, "https": 443}


def address_of(url: str) -> Address:
    """`url`'s address as urllib3 normalizes it (scheme and host lower case, the scheme's default port)."""
    parsed = urllib3.util.parse_url(url)
    scheme = (parsed.scheme or "http").lower()
    return scheme, (parsed.host or "").lower(), parsed.port or _DEFAULT_PORTS.get(scheme, 80)


class HarnessPools:
    """Which addresses are held and by how many clients; their pools, each sized to its holders."""

    def __init__(self, *, bound: int = HARNESS_POOLS, floor: int = HARNESS_POOL_SIZE,
                 per_client: int = HARNESS_POOL_PER_CLIENT, warm: int = HARNESS_POOLS_WARM) -> None:
        self.bound, self.floor, self.per_client, self.warm = bound, floor, per_client, warm
        self._lock = threading.Lock()
        self._holders: dict[Address, int] = {}
        self._pools: dict[Address, dict[Any, HTTPConnectionPool]] = {}  # address → pool key → pool
        self._idle: OrderedDict[Address, None] = OrderedDict()  # addresses with pools and no holder, LRU first
        self._warm: OrderedDict[Address, None] = OrderedDict()  # the unheld ones let go last, keeping the floor
        self.discarded = 0  # connections closed because their pool was full (none while sized to its holders)
        self.evicted = 0  # pools closed past the bound
        self._opened_gone = 0  # connections the pools closed since (evicted, cleared) had opened

    def size(self, address: Address) -> int:
        """Idle connections `address` keeps: unheld, the floor while warm, else none."""
        holders = self._holders.get(address, 0)
        if holders:
            return self.floor + self.per_client * holders
        return self.floor if address in self._warm else 0

    def hold(self, url: str) -> Callable[[], None]:
        """Count one more client of `url`'s address (its pools grow at once); the release it returns undoes
        it, once, however often it is called."""
        address = address_of(url)
        with self._lock:
            self._holders[address] = self._holders.get(address, 0) + 1
            self._idle.pop(address, None)
            self._warm.pop(address, None)
            dropped = self._resize_all(address)
        _close_connections(dropped)
        released = threading.Event()

        def release() -> None:
            if released.is_set():
                return
            released.set()
            self._release(address)

        return release

    def _release(self, address: Address) -> None:
        with self._lock:
            left = self._holders.get(address, 0) - 1
            if left > 0:
                self._holders[address] = left
            else:
                self._holders.pop(address, None)
                if address in self._pools:
                    self._idle[address] = None
                self._warm[address] = None
            dropped = self._resize_all(address)
            while len(self._warm) > self.warm:  # the coldest unheld address closes its idle connections
                cold, _ = self._warm.popitem(last=False)
                dropped += self._resize_all(cold)
            evicted = self._evict()
        _close_connections(dropped)
        _close(evicted)

    def pool(self, key: Any, context: dict[str, Any],
             make: Callable[[str, str, int, dict[str, Any]], HTTPConnectionPool]) -> HTTPConnectionPool:
        """The pool for urllib3's `key` (made by `make` the first time), marked as used now."""
        address: Address = (str(context["scheme"]).lower(), str(context["host"]).lower(), int(context["port"]))
        # Every call of every seat comes here: a held address's pool is found without the lock (it is never
        # evicted while held, and the caller's client holds it); an unheld one is touched in the LRU under it.
        by_key = self._pools.get(address)
        found = by_key.get(key) if by_key is not None else None
        if found is not None and address in self._holders:
            return found
        with self._lock:
            by_key = self._pools.get(address)
            found = by_key.get(key) if by_key is not None else None
            if address in self._idle:
                self._idle.move_to_end(address)
            if found is not None:
                return found
            pool = make(context["scheme"], context["host"], context["port"], context)
            pool.on_full = self._count_discard  # type: ignore[attr-defined]
            _resize(pool, self.size(address))  # a new pool holds no connection: nothing dropped
            self._pools.setdefault(address, {})[key] = pool
            if address not in self._holders:
                self._idle[address] = None
            evicted = self._evict()
        _close(evicted)
        return pool

    def _resize_all(self, address: Address) -> list[Any]:
        """Under the lock (so sizes are set in the order the holders changed): the address's pools resized to
        its holders; the idle connections past the size, for the caller to close outside the lock."""
        size = self.size(address)
        return [conn for pool in self._pools.get(address, {}).values() for conn in _resize(pool, size)]

    def _evict(self) -> list[HTTPConnectionPool]:
        """Under the lock: the pools of the least recently used unheld addresses past the bound."""
        out: list[HTTPConnectionPool] = []
        while len(self._pools) > self.bound and self._idle:
            address, _ = self._idle.popitem(last=False)
            self._warm.pop(address, None)
            gone = self._pools.pop(address, {}).values()
            self._opened_gone += sum(pool.num_connections for pool in gone)
            out += gone
            self.evicted += 1
        return out

    def _count_discard(self) -> None:
        with self._lock:
            self.discarded += 1

    def stats(self) -> dict[str, int]:
        """Read at scrape time (O(pools), never on a call's path): `addresses` with a pool, `held` by a client,
        `idle` (addresses with a pool no client holds), `discarded` (a returned connection found its pool
        full), `evicted`, `opened` (connections made, ever), and the idle connections kept: `connections`
        in all, `connections_max` on the one address that keeps most."""
        with self._lock:
            out = {"addresses": len(self._pools), "held": len(self._holders), "idle": len(self._idle),
                   "discarded": self.discarded, "evicted": self.evicted}
            by_address = [list(by_key.values()) for by_key in self._pools.values()]
            opened = self._opened_gone
        kept = [sum(_idle_connections(pool) for pool in pools) for pools in by_address]
        out["opened"] = opened + sum(pool.num_connections for pools in by_address for pool in pools)
        out["connections"], out["connections_max"] = sum(kept), max(kept, default=0)
        return out

    def clear(self) -> None:
        with self._lock:
            pools = [p for by_key in self._pools.values() for p in by_key.values()]
            self._opened_gone += sum(pool.num_connections for pool in pools)
            self._pools.clear()
            self._idle.clear()
            self._warm.clear()
        _close(pools)


def _resize(pool: HTTPConnectionPool, size: int) -> list[Any]:
    """Keep up to `size` idle connections; those past it (the least recently returned) are returned, to close."""
    q = pool.pool
    if q is None:  # closed
        return []
    with q.mutex:
        q.maxsize = max(size, 1)  # a Queue's 0 is "no bound"; a connection back from a call still out is kept
        extra = max(0, len(q.queue) - size)
        dropped = list(q.queue[:extra])  # a LifoQueue hands out its end: its start is the idlest
        del q.queue[:extra]
    return [conn for conn in dropped if conn is not None]


def _idle_connections(pool: HTTPConnectionPool) -> int:
    q = pool.pool
    if q is None:
        return 0
    with q.mutex:
        return sum(1 for conn in q.queue if conn is not None)  # a None is a free slot, not a connection


def _close_connections(conns: list[Any]) -> None:
    for conn in conns:
        with contextlib.suppress(Exception):  # an idle socket: nothing to tell anyone
            conn.close()


def _close(pools: list[HTTPConnectionPool]) -> None:
    for pool in pools:
        with contextlib.suppress(Exception):  # closing idle sockets: nothing to tell anyone
            pool.close()


class _SizedMixin:
    """A returned connection that finds its pool full is closed quietly and counted (urllib3 warns each):
    a pool shrinks as its clients go, while their calls may still be out."""

    pool: Any
    on_full: Callable[[], None] | None = None

    def _put_conn(self, conn: Any) -> None:
        q = self.pool
        if q is None:  # a closed pool: urllib3 closes the connection
            super()._put_conn(conn)  # type: ignore[misc]
            return
        let_go(conn)  # no Cut owns it any more (None: a slot given back after an error)
        try:
            q.put(conn, block=False)
        except queue.Full:
            if conn is not None:
                conn.close()
                if self.on_full is not None:
                    self.on_full()


class _SizedHTTPPool(_SizedMixin, CutHTTPPool):
    pass


class _SizedHTTPSPool(_SizedMixin, CutHTTPSPool):
    pass


class _Manager(PoolManager):
    def __init__(self, pools: HarnessPools, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.harness_pools = pools
        self.pool_classes_by_scheme = {"http": _SizedHTTPPool, "https": _SizedHTTPSPool}

    def connection_from_pool_key(self, pool_key: Any, request_context: dict[str, Any]) -> HTTPConnectionPool:
        return self.harness_pools.pool(pool_key, request_context, self._make)

    def _make(self, scheme: str, host: str, port: int, context: dict[str, Any]) -> HTTPConnectionPool:
        return self._new_pool(scheme, host, port, request_context=context)

    def clear(self) -> None:
        self.harness_pools.clear()


class HarnessAdapter(CutAdapter):
    """`CutAdapter` on `HarnessPools`: what `shared_session` mounts."""

    def __init__(self, pools: HarnessPools, **kwargs: Any) -> None:
        self.harness_pools = pools
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        self._pool_connections, self._pool_maxsize, self._pool_block = connections, maxsize, block
        self.poolmanager = _Manager(self.harness_pools, num_pools=connections, maxsize=maxsize, block=block,
                                    **pool_kwargs)


def shared_session(pools: HarnessPools | None = None) -> requests.Session:
    """The process's one session for every Harness (its owner closes it once every client is closed): no
    environment (no proxy or .netrc takes the token), `Cut`s mounted, and one pool per address sized to its
    clients (`HarnessPools`)."""
    session = requests.Session()
    session.trust_env = False
    session.cookies = NoCookies()  # no Harness's cookie goes to another; no jar lock on each answer
    mount_cuts(session, HarnessAdapter(pools or HarnessPools(), max_retries=0))
    return session


def pools_of(session: requests.Session) -> HarnessPools | None:
    """The `HarnessPools` behind a `shared_session`, or None for any other session."""
    adapter = session.adapters.get("http://")
    return adapter.harness_pools if isinstance(adapter, HarnessAdapter) else None


def hold_address(session: requests.Session, url: str) -> Callable[[], None]:
    """Hold `url`'s address on `session`'s pools (a `shared_session`'s; nothing on any other session): the
    release it returns, once called, lets the pool shrink and, unheld, be evicted."""
    pools = pools_of(session)
    return pools.hold(url) if pools is not None else _nothing


def _nothing() -> None:
    return None
