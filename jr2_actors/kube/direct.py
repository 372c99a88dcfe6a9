"""`DirectCall`: a small write sent on urllib3 itself, over the very pool requests uses.

A Lease renewal is the process's most frequent write (5,000 Workspaces: ~17 a second), and requests' own work
was half its client CPU: `Session.request`'s `prepare_request` and the pool manager's lookup of the pool for
each call (docs/bench/history.md, "5,000 Workspaces"). Here the pool is looked up once and the request goes
straight to its `urlopen`, with headers made by hand. Everything a session call has, it has too: the same
connections (so the pool's size still bounds them, and a `Cut` still ends the request: `net/cut.py`'s pools),
the same TLS settings, timeouts and answer size cap; a failure raises what requests would have wrapped.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import requests
import urllib3
import urllib3.exceptions

from jr2_actors.net.http_body import TooLarge


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str
    headers: urllib3.HTTPHeaderDict
    body: bytes  # capped: over the cap raises TooLarge; a failure answer's is cut at the cap instead


class DirectCall:
    """Calls to one base URL on `session`'s own pool for it (looked up once, again if it was closed)."""

    def __init__(self, session: requests.Session, base: str, *, connect_timeout: float, read_timeout: float) -> None:
        self._session = session
        self._base = base
        self._timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
        self._lock = threading.Lock()
        self._pool: Any = None
        self._headers = {k: str(v) for k, v in session.headers.items()}

    def _pool_for(self, *, renew: bool = False) -> Any:
        with self._lock:
            if self._pool is None or renew:
                adapter = self._session.get_adapter(self._base)
                assert isinstance(adapter, requests.adapters.HTTPAdapter)
                probe = requests.Request("GET", self._base + "/").prepare()
                self._pool = adapter.get_connection_with_tls_context(
                    probe, self._session.verify, None, self._session.cert)
            return self._pool

    def send(self, method: str, path: str, body: bytes, headers: dict[str, str], *, cap: int,
             failure_cap: int) -> Answer:
        """One request and its answer: at most `cap` bytes of a success (over it raises `TooLarge`), the first
        `failure_cap` of a failure. Transport failures raise urllib3's own errors (`transport_error` names
        them); the connection goes back to the pool only after an answer read to its end."""
        merged = {**self._headers, **headers}
        try:
            resp = self._urlopen(self._pool_for(), method, path, body, merged)
        except urllib3.exceptions.ClosedPoolError:  # the pool manager let it go: the one that replaced it
            resp = self._urlopen(self._pool_for(renew=True), method, path, body, merged)
        whole = False
        try:
            failed = resp.status >= 400
            raw, whole = _read(resp, failure_cap if failed else cap, truncate=failed)
        finally:
            if whole:
                resp.release_conn()
            else:
                resp.close()  # half read: the connection cannot carry another request
        return Answer(resp.status, resp.reason or "", resp.headers, raw)

    def _urlopen(self, pool: Any, method: str, path: str, body: bytes, headers: dict[str, str]) -> Any:
        return pool.urlopen(method, path, body=body, headers=headers, retries=False, redirect=False,
                            assert_same_host=False, timeout=self._timeout, preload_content=False,
                            decode_content=True, release_conn=False)


def _read(resp: Any, cap: int, *, truncate: bool) -> tuple[bytes, bool]:
    """The body (never more than `cap` bytes held), and whether it was read to its end."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = resp.read(64 * 1024)
        if not chunk:
            return b"".join(chunks), True
        total += len(chunk)
        if total > cap:
            if truncate:
                chunks.append(chunk[: cap - (total - len(chunk))])
                return b"".join(chunks), False
            raise TooLarge(cap)
        chunks.append(chunk)
