"""Every session the orchestrator calls out on keeps no cookie (net/cookies.py): a peer's `Set-Cookie` is never
sent back, to it or to another Harness on the shared session, and no answer waits on the jar's lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
import requests

from jr2_actors.harness.client import HarnessClient
from jr2_actors.harness.pools import shared_session
from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from tests.support.waiting import WAIT


class _SetsCookies(BaseHTTPRequestHandler):
    """Answers every GET 200 with a cookie, and keeps the `Cookie` header each request carried."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Cookie"))
        body = b"{}"
        self.send_response(200)
        self.send_header("Set-Cookie", "session=from-this-peer; Path=/")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def peer() -> Iterator[tuple[str, list[str | None]]]:
    seen: list[str | None] = []
    handler = type("Handler", (_SetsCookies,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _harness_shared(url: str) -> tuple[requests.Session, Callable[[], None]]:
    session = shared_session()
    return session, session.close


def _harness_own(url: str) -> tuple[requests.Session, Callable[[], None]]:
    client = HarnessClient(url, "token")
    return client._session, client.close


def _kube(url: str) -> tuple[requests.Session, Callable[[], None]]:
    client = KubeClient(ClusterAccess(server=url, namespace="jr2", source="t"), read_timeout=WAIT)
    return client._session, client.close


SESSIONS = {"harness-shared": _harness_shared, "harness-own": _harness_own, "kube": _kube}


@pytest.mark.parametrize("make", SESSIONS.values(), ids=SESSIONS.keys())
def test_a_peers_cookie_is_never_kept_nor_sent_back(peer: tuple[str, list[str | None]],
                                                    make: Callable[[str], tuple[requests.Session,
                                                                               Callable[[], None]]]) -> None:
    url, seen = peer
    session, close = make(url)
    try:
        for _ in range(2):
            with session.get(url + "/healthz", timeout=WAIT) as resp:
                assert resp.status_code == 200
                assert resp.cookies.get("session") == "from-this-peer"  # the answer did set one
        session.cookies.set("by-hand", "x")
        with session.get(url + "/healthz", timeout=WAIT) as resp:
            assert resp.status_code == 200
    finally:
        close()
    assert seen == [None, None, None]
    assert len(session.cookies) == 0


@pytest.mark.parametrize("make", SESSIONS.values(), ids=SESSIONS.keys())
def test_an_answer_is_taken_while_another_thread_holds_the_jars_lock(
        peer: tuple[str, list[str | None]],
        make: Callable[[str], tuple[requests.Session, Callable[[], None]]]) -> None:
    """requests' own jar takes its lock for every answer: thousands of seats on one session queued there."""
    url, _ = peer
    session, close = make(url)
    done = threading.Event()
    statuses: list[int] = []

    def call() -> None:
        with session.get(url + "/healthz", timeout=WAIT) as resp:
            statuses.append(resp.status_code)
        done.set()

    lock = session.cookies._cookies_lock  # type: ignore[attr-defined]
    lock.acquire()
    caller = threading.Thread(target=call, daemon=True)
    try:
        caller.start()
        assert done.wait(WAIT), "the answer waited on the session's cookie jar lock"
    finally:
        lock.release()
        caller.join(WAIT)
        close()
    assert statuses == [200]
