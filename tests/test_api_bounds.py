"""The API's bounds against clients without a token (issue 18): idle and trickling sockets hold no worker, a
head past its deadline or its size is refused, a body is capped from its Content-Length and read at a minimum
rate, every header parser answers a hostile value with a 4xx — and `/healthz` and `GET /runs` are answered
meanwhile. A small worker pool (2) makes a held worker visible at once; deadlines are set long where a test
needs hostile sockets to stay open, short where it needs the server to cut them. No test asserts a duration:
each waits for an answer with a generous timeout.

The hostile sockets come from 127.0.0.2–5 (Linux routes all of 127/8 to the loopback), so the per-peer cap
is not what keeps the server answerable; one test holds that cap on its own address."""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from typing import Any

import pytest
import requests

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiLimits, ApiServer
from jr2_actors.run.feed.hub import FeedRead
from jr2_actors.values.constants import API_MAX_BODY_BYTES, API_MAX_HEADER_BYTES
from jr2_actors.values.run_ids import Keyed
from jr2_actors.values.workflow import MAX_WORKFLOW_STATES, parse_workflow
from tests.backends import QuietBackend
from tests.waiting import wait_until
from tests.workflows import chain

pytestmark = pytest.mark.slow
TOKEN = "t0ken-for-the-bounds-tests-0123456789"
SOURCES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
GENEROUS = 10.0


class _Live(QuietBackend):
    """A healthy Backend with one live run, `r-1`, whose feed has nothing new (each wait runs out)."""

    def __init__(self, metrics: str = "") -> None:
        self._closing = threading.Event()
        self._metrics = metrics

    def submit(self, document: object, run_input: Mapping[str, Any] | None, *,
               keyed: Keyed | None = None) -> str:
        parse_workflow(document)  # as the Orchestrator does: the workflow's bounds are the parser's
        return "r-2"

    def status(self, run_id: str) -> dict[str, Any] | None:
        return {"runId": run_id} if run_id == "r-1" else None

    def runs_encoded(self, prefix: str = "") -> list[dict[str, Any]]:
        return [{"runId": "r-1"}]

    def feed(self, run_id: str, after: int, wait: float) -> FeedRead | None:
        if run_id != "r-1":
            return None
        self._closing.wait(wait)
        return FeedRead([], False)

    def metrics(self) -> str:
        return self._metrics

    def interrupt_feeds(self) -> None:
        self._closing.set()


@contextmanager
def served(limits: ApiLimits | None = None, *, threads: int = 2, timeout: float = 30.0,
           max_streams: int = 8, heartbeat: float = 60.0, backend: _Live | None = None) -> Iterator[ApiServer]:
    server = ApiServer(Api(backend or _Live(), TOKEN, heartbeat=heartbeat, max_streams=max_streams), threads=threads,
                       timeout=timeout, limits=limits or ApiLimits())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def answered(server: ApiServer) -> None:
    """`/healthz` and the runs API answer (each within a generous timeout)."""
    assert requests.get(server.url + "/healthz", timeout=GENEROUS).status_code == 200
    runs = requests.get(server.url + "/runs", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=GENEROUS)
    assert runs.status_code == 200 and runs.json() == {"runs": [{"runId": "r-1"}]}


def connect(server: ApiServer, source: str = "127.0.0.1", receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:  # before the connect: it sets the window the client offers
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(GENEROUS)
    sock.bind((source, 0))
    sock.connect(server.address)
    return sock


def crowd(stack: ExitStack, server: ApiServer, count: int) -> list[socket.socket]:
    """`count` connections spread over SOURCES, closed when `stack` closes."""
    return [stack.enter_context(connect(server, SOURCES[i % len(SOURCES)])) for i in range(count)]


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset after its answer included)."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    return got


def trickled_answer(server: ApiServer, sock: socket.socket, data: bytes) -> bytes:
    """Send `data` a byte every 20 ms on a thread of its own and return what the server answers on `sock`;
    `/healthz` is answered meanwhile (one slow client holds no worker)."""
    stop = threading.Event()

    def trickle() -> None:
        for i in range(len(data)):
            try:
                sock.sendall(data[i:i + 1])
            except OSError:
                return
            if stop.wait(0.02):
                return

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    try:
        cut = answer(sock)
        answered(server)
    finally:
        stop.set()
        trickler.join(GENEROUS)
    return cut


def status_of(raw: bytes) -> int:
    assert raw.startswith(b"HTTP/1.1 "), raw[:200]
    return int(raw.split(b" ", 2)[1])


def still_open(sock: socket.socket) -> bool:
    """The server has neither closed nor answered this connection yet."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
        sock.settimeout(GENEROUS)
    return False


def request(server: ApiServer, head: bytes, body: bytes = b"", source: str = "127.0.0.1") -> bytes:
    with connect(server, source) as sock:
        sock.sendall(head + body)
        return answer(sock)


def test_64_idle_sockets_hold_no_worker() -> None:
    with served(ApiLimits(header_seconds=60.0)) as server, ExitStack() as stack:
        idle = crowd(stack, server, 64)
        answered(server)
        answered(server)
        assert all(still_open(s) for s in idle), "the idle sockets were cut, not parked"


def test_an_idle_socket_is_closed_at_the_header_deadline() -> None:
    with served(ApiLimits(header_seconds=0.5)) as server, connect(server, SOURCES[0]) as idle:
        assert answer(idle) == b""  # closed without a word: it never began a request
        answered(server)


def test_64_slowloris_clients_hold_no_worker() -> None:
    stop = threading.Event()
    with served(ApiLimits(header_seconds=60.0)) as server, ExitStack() as stack:
        slow = crowd(stack, server, 64)

        def trickle() -> None:
            line = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 4096
            for i in range(len(line)):
                for sock in slow:
                    sock.sendall(line[i:i + 1])
                if stop.wait(0.05):
                    return

        trickler = threading.Thread(target=trickle, daemon=True)
        trickler.start()
        try:
            for _ in range(3):
                answered(server)
            assert all(still_open(s) for s in slow), "the slow clients were cut, not parked"
        finally:
            stop.set()
            trickler.join(GENEROUS)


def test_a_slowloris_client_is_cut_with_408_at_the_header_deadline() -> None:
    with served(ApiLimits(header_seconds=0.5)) as server, connect(server, SOURCES[0]) as slow:
        cut = trickled_answer(server, slow, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 10_000)
    assert status_of(cut) == 408


def test_a_head_cut_short_by_the_client_s_close_is_400() -> None:
    with served() as server, connect(server, SOURCES[0]) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        sock.shutdown(socket.SHUT_WR)
        refused = answer(sock)
        answered(server)
    assert status_of(refused) == 400 and b"ended before" in refused


def _send_quietly(sock: socket.socket, data: bytes) -> threading.Thread:
    """Send `data` on a thread, ignoring the reset a refusing server may answer with."""

    def send() -> None:
        with suppress(OSError):
            sock.sendall(data)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("head", [
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (64 * API_MAX_HEADER_BYTES) + b"\r\n\r\n",
    b"GET /healthz?" + b"a" * (2 * API_MAX_HEADER_BYTES) + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"b" * 100) for i in range(400)) + b"\r\n",
], ids=["one-big-header", "a-long-request-line", "many-headers"])
def test_a_head_over_the_cap_is_431_and_not_read_whole(head: bytes) -> None:
    with served() as server, connect(server, SOURCES[0]) as sock:
        sender = _send_quietly(sock, head)
        refused = answer(sock)
        answered(server)
        sender.join(GENEROUS)
    assert status_of(refused) == 431
    assert b"16384" in refused  # the answer names the bound


def test_a_head_just_under_the_cap_is_served() -> None:
    start = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: "
    head = start + b"a" * (API_MAX_HEADER_BYTES - len(start) - 4) + b"\r\n\r\n"
    assert len(head) == API_MAX_HEADER_BYTES
    with served() as server:
        assert status_of(request(server, head)) == 200


@pytest.mark.parametrize("path", ["/healthz", "/runs"])
def test_a_body_declared_over_the_cap_is_413_before_a_byte_is_read(path: str) -> None:
    with served() as server, connect(server, SOURCES[0]) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {1024 ** 3}\r\n\r\n".encode())  # and not a byte of the GiB
        refused = answer(sock)
        answered(server)
    assert status_of(refused) == 413
    assert str(API_MAX_BODY_BYTES).encode() in refused


def _submit_head(length: int) -> bytes:
    return (f"POST /runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()


def test_a_body_shorter_than_its_content_length_is_408_without_a_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with served(ApiLimits(pace_grace_seconds=0.5)) as server, connect(server, SOURCES[0]) as sock:
        sock.sendall(_submit_head(100) + b'{"workflow"')  # 11 of the 100 bytes, then nothing
        cut = answer(sock)
        answered(server)
    assert status_of(cut) == 408
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text


def test_a_body_trickled_below_the_minimum_rate_is_cut_with_408() -> None:
    stop = threading.Event()
    limits = ApiLimits(pace_grace_seconds=0.5, min_bytes_per_second=1000)
    with served(limits) as server, connect(server, SOURCES[0]) as sock:
        sock.sendall(_submit_head(10_000))

        def trickle() -> None:
            for _ in range(10_000):
                try:
                    sock.sendall(b" ")
                except OSError:
                    return
                if stop.wait(0.05):  # 20 bytes a second, far under 1000
                    return

        trickler = threading.Thread(target=trickle, daemon=True)
        trickler.start()
        try:
            cut = answer(sock)
            answered(server)
        finally:
            stop.set()
            trickler.join(GENEROUS)
    assert status_of(cut) == 408


def test_a_refused_submission_does_not_wait_for_its_body() -> None:
    """A 401 does not drain a body that has not arrived: the connection closes instead of holding a worker."""
    with served(ApiLimits(pace_grace_seconds=60.0)) as server, ExitStack() as stack:
        socks = crowd(stack, server, 8)  # more than the 2 workers
        for sock in socks:
            sock.sendall(b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{")
        refusals = [answer(sock) for sock in socks]
        answered(server)
    assert [status_of(r) for r in refusals] == [401] * 8


def test_clients_that_do_not_read_their_answers_hold_no_worker() -> None:
    """Four clients ask for a large answer over a tiny window and never read it: each write is paced, so a
    worker is cut loose within its grace and /healthz is answered by the two workers meanwhile."""
    limits = ApiLimits(pace_grace_seconds=0.5, min_bytes_per_second=4 * 1024 * 1024)
    with served(limits, backend=_Live(metrics="m" * (8 * 1024 * 1024))) as server, ExitStack() as stack:
        for i in range(4):
            sock = stack.enter_context(connect(server, SOURCES[i], receive_buffer=4096))
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # and never a read
        answered(server)
        answered(server)


@pytest.mark.parametrize("header", [
    b"Content-Length: 5\r\nContent-Length: 6",
    b"Content-Length: 5, 5",
    b"Content-Length: -1",
    b"Content-Length: +5",
    b"Content-Length: 1_0",
    b"Content-Length: 0x10",
    b"Content-Length: \xef\xbc\x95",  # a fullwidth five
    b"Content-Length: \xb2",  # latin-1 superscript two: str.isdigit() says yes
    b"Content-Length:",
    b"Content-Length: 5\r\n  6",  # an obsolete line fold
    b"Content-Length: 5\r\nTransfer-Encoding: chunked",
], ids=lambda h: repr(h)[2:40])
def test_a_hostile_content_length_is_400(header: bytes) -> None:
    head = b"POST /runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n" \
           b"Content-Type: application/json\r\n" + header + b"\r\n\r\n"
    with served() as server:
        refused = request(server, head, b"{}   ")
        answered(server)
    assert status_of(refused) == 400, refused


def test_a_content_length_too_long_to_be_a_number_is_413() -> None:
    with served() as server:
        refused = request(server, _submit_head(10 ** 30))
    assert status_of(refused) == 413


@pytest.mark.parametrize("value", ["\xb2".encode("latin-1"), "١".encode(), b"1e3", b"-1", b"0x10", b"9" * 19, b"+1"],
                         ids=repr)
def test_a_hostile_last_event_id_is_400_never_500(value: bytes) -> None:
    head = (b"GET /runs/r-1/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer "
            + TOKEN.encode() + b"\r\nLast-Event-ID: " + value + b"\r\n\r\n")
    with served() as server:
        refused = request(server, head)
        answered(server)
    assert status_of(refused) == 400
    assert b"Last-Event-ID" in refused


@pytest.mark.parametrize("query", ["lastEventId=%C2%B2", "lastEventId=abc", "lastEventId=",
                                   "lastEventId=1&lastEventId=2"])
def test_a_hostile_last_event_id_in_the_query_is_400_not_ignored(query: str) -> None:
    with served() as server:
        resp = requests.get(f"{server.url}/runs/r-1/events?{query}", headers={"Authorization": f"Bearer {TOKEN}"},
                            timeout=GENEROUS)
    assert resp.status_code == 400 and "Last-Event-ID" in resp.json()["error"]


@pytest.mark.parametrize("value", [b"Bearer \xff\xfe\xfd", "Bearer é".encode(), b"Bearer " + TOKEN.encode() + b"\x00",
                                   b"\xff" * 3000, b"Bearer  " + TOKEN.encode() + b" trailing"], ids=repr)
def test_a_hostile_token_header_is_401_never_500(value: bytes) -> None:
    head = b"GET /runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: " + value + b"\r\n\r\n"
    with served() as server:
        refused = request(server, head)
    assert status_of(refused) == 401


def test_connections_past_the_per_peer_cap_are_429_and_others_are_served() -> None:
    with served(ApiLimits(header_seconds=60.0, max_connections_per_peer=4)) as server, ExitStack() as stack:
        held = [stack.enter_context(connect(server, SOURCES[0])) for _ in range(4)]
        with connect(server, SOURCES[0]) as over:
            refused = answer(over)
        answered(server)  # from 127.0.0.1: another peer
        assert all(still_open(s) for s in held)
        held[0].close()  # a slot comes back once the server sees the close

        def admitted() -> bool:
            with connect(server, SOURCES[0]) as again:
                again.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return status_of(answer(again)) == 200

        wait_until(admitted, GENEROUS, what="a slot of the peer's freed by a close")
    assert status_of(refused) == 429


def test_a_connection_past_the_total_cap_sheds_the_oldest_idle_one_and_is_served() -> None:
    """(tests/test_api_shedding.py: oldest first, and the probes' reserve when nothing can be shed.)"""
    with served(ApiLimits(header_seconds=60.0, max_connections=6)) as server, ExitStack() as stack:
        idle = crowd(stack, server, 6)
        wait_until(lambda: server._server._open == 6, GENEROUS, what="all six seen by the gate")
        over = request(server, b"GET /runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer "
                       + TOKEN.encode() + b"\r\n\r\n", source=SOURCES[1])
        assert status_of(over) == 200
        assert answer(idle[0]) == b""


def test_a_closed_event_stream_frees_its_slot_before_any_heartbeat() -> None:
    with served(max_streams=1, heartbeat=600.0) as server:
        url = server.url + "/runs/r-1/events"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with requests.get(url, headers=auth, stream=True, timeout=GENEROUS) as first:
            assert first.status_code == 200
            assert requests.get(url, headers=auth, timeout=GENEROUS).status_code == 503  # the one slot is taken

        def reopened() -> bool:
            with requests.get(url, headers=auth, stream=True, timeout=GENEROUS) as again:
                return again.status_code == 200

        wait_until(reopened, GENEROUS, what="the closed stream's slot freed")
        answered(server)


def test_eight_quick_open_close_cycles_leave_all_eight_slots_free() -> None:
    with served(max_streams=8, heartbeat=600.0, threads=10) as server:  # a stream holds a worker
        url = server.url + "/runs/r-1/events"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for _ in range(8):
            with requests.get(url, headers=auth, stream=True, timeout=GENEROUS) as resp:
                assert resp.status_code == 200

        def all_eight_open() -> bool:
            with ExitStack() as stack:
                opened = [stack.enter_context(requests.get(url, headers=auth, stream=True, timeout=GENEROUS))
                          for _ in range(8)]
                return all(r.status_code == 200 for r in opened)

        wait_until(all_eight_open, GENEROUS, what="eight slots free after eight closed streams")


def test_a_pipelined_keep_alive_request_is_served_after_the_first() -> None:
    two = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with served() as server:
        got = request(server, two)
    assert got.count(b"HTTP/1.1 200 OK") == 2


def test_a_body_in_bounds_is_read_and_answered() -> None:
    doc = {"workflow": {"name": "x", "start": "a", "states": {"a": {"final": "done"}}}}
    body = json.dumps(doc).encode()
    with served() as server:
        got = request(server, _submit_head(len(body)).replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"), body)
    assert status_of(got) == 201


def test_a_workflow_over_its_bounds_is_refused_naming_the_bound() -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with served() as server:
        many = requests.post(server.url + "/runs", json={"workflow": chain(MAX_WORKFLOW_STATES + 1)}, headers=auth,
                             timeout=GENEROUS)
        large = requests.post(server.url + "/runs", json={"workflow": chain(10, prompt="p" * 60_000)}, headers=auth,
                              timeout=GENEROUS)
    assert many.status_code == 400 and many.json()["key"] == "workflow.states"
    assert "MAX_WORKFLOW_STATES" in many.json()["error"]
    assert large.status_code == 413 and "MAX_WORKFLOW_BYTES" in large.json()["error"]


def _one_answer(sock: socket.socket) -> bytes:
    """One whole answer with a Content-Length, leaving the connection open."""
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    lengths = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    length = int(lengths[0])
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_kept_alive_connection_is_served_and_then_held_to_the_header_deadline() -> None:
    """The next request on a kept-alive connection goes through the gate too: served when whole, cut with 408
    when it trickles past its own head deadline."""
    with served(ApiLimits(header_seconds=0.5)) as server, connect(server, SOURCES[0]) as sock:
        for _ in range(2):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status_of(_one_answer(sock)) == 200

        cut = trickled_answer(server, sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 10_000)
    assert status_of(cut) == 408


def test_mutated_requests_are_answered_with_a_4xx_never_a_500(caplog: pytest.LogCaptureFixture) -> None:
    """250 random byte mutations of three good requests (a fixed seed), one connection at a time, each
    half-closed after sending: every one is answered, never with a 500, and nothing is logged as an error."""
    caplog.set_level(logging.DEBUG)
    good = (b"POST /runs/r-1/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
            + b"\r\nLast-Event-ID: 3\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
              b"Connection: close\r\n\r\n{}")
    bases = [good, good.replace(b"POST /runs/r-1/cancel", b"GET /runs/r-1/events"),
             good.replace(b"POST /runs/r-1/cancel", b"POST /runs")]
    rng = random.Random(18)
    statuses: dict[int, int] = {}
    with served(ApiLimits(header_seconds=1.0)) as server:
        for _ in range(250):
            data = bytearray(rng.choice(bases))
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(len(data))
                op = rng.random()
                if op < 0.4:
                    data[pos] = rng.randrange(256)
                elif op < 0.7:
                    del data[pos:pos + rng.randint(1, 5)]
                else:
                    data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 5)))
            with connect(server) as sock:
                sock.sendall(bytes(data))
                sock.shutdown(socket.SHUT_WR)
                status = status_of(answer(sock))
            statuses[status] = statuses.get(status, 0) + 1
        answered(server)
    assert all(s < 500 or s == 505 for s in statuses), statuses  # 505: a mutated HTTP version
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
