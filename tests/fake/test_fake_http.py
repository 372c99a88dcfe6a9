"""The fake's one loopback HTTP server: each answer in one write with TCP_NODELAY (no delayed-ACK wait),
a port that cannot be had named at once, never a hang."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import requests

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.http import HttpServer, ListenError, Request, json_args
from jr2_actors.kube.kinds import SANDBOX
from tests.support.waiting import wait_until


class CountingWriter:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes = 0

    def write(self, data: bytes) -> int:
        self.writes += 1
        return int(self.inner.write(data))

    def flush(self) -> None:
        self.inner.flush()


class Recorder:
    def __init__(self) -> None:
        self.nodelay: list[int] = []
        self.writes: list[int] = []

    def handle(self, r: Request) -> None:
        self.nodelay.append(r.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        counter = CountingWriter(r.wfile)
        r.wfile = counter  # type: ignore[assignment]
        r.respond_json(200, {"ok": True, "path": r.url_path, "query": r.query})
        self.writes.append(counter.writes)


def test_each_answer_leaves_in_one_write_with_nodelay() -> None:
    app = Recorder()
    server = HttpServer(app)
    server.start()
    try:
        with requests.Session() as s:
            for i in range(3):  # one kept-alive connection, several answers
                doc = s.get(f"{server.url}/x?i={i}", timeout=10).json()
                assert doc == {"ok": True, "path": "/x", "query": {"i": str(i)}}
    finally:
        server.stop()
    assert app.writes == [1, 1, 1]
    assert all(app.nodelay)


@pytest.mark.parametrize("port", [-1, 65536])
def test_a_port_out_of_range_is_named(port: int) -> None:
    with pytest.raises(ListenError, match=str(port)):
        HttpServer(Recorder(), port=port)


def test_a_port_in_use_is_named() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenError, match=f"127.0.0.1:{port}"):
            HttpServer(Recorder(), port=port)


@pytest.mark.parametrize(("body", "ok"), [(b"", True), (b"  ", True), (b'{"a": 1}', True), (b"[1]", False),
                                          (b"{", False), (b"[" * 100_000, False), (b"\xff\xfe", False)])
def test_control_bodies_are_objects_or_a_clear_error(body: bytes, ok: bool) -> None:
    if ok:
        assert isinstance(json_args(body), dict)
    else:
        with pytest.raises(ValueError, match="JSON"):
            json_args(body)


def test_a_repeated_query_parameter_is_read_as_its_first_value() -> None:
    app = Recorder()
    server = HttpServer(app)
    server.start()
    try:
        doc = requests.get(f"{server.url}/x?limit=1&limit=2&empty=", timeout=10).json()
    finally:
        server.stop()
    assert doc["query"] == {"limit": "1", "empty": ""}


def test_connections_count_the_open_ones_and_the_most_at_once() -> None:
    """A bench's count of a client's connections (issue 18 item 7): each session's kept-alive connection is
    one open; a closed one leaves the open count but not the peak, until the peak is reset."""
    server = HttpServer(Recorder())
    server.start()
    sessions = [requests.Session() for _ in range(3)]
    try:
        assert server.connections() == (0, 0)
        for s in sessions:  # each keeps its connection open after its answer
            s.get(f"{server.url}/x", timeout=10)
        assert server.connections() == (3, 3)
        for s in sessions[:2]:
            s.close()
        wait_until(lambda: server.connections()[0] == 1, what="two connections closed")
        assert server.connections(reset_peak=True) == (1, 3)
        assert server.connections() == (1, 1)
        sessions[2].get(f"{server.url}/x", timeout=10)  # the same kept-alive connection: no new one
        assert server.connections() == (1, 1)
    finally:
        for s in sessions:
            s.close()
        server.stop()


def test_the_cluster_counts_its_clients_connections_to_the_api_server_and_the_harness() -> None:
    with FakeCluster() as cluster:
        before = cluster.connections(reset_peak=True)
        assert before == {"api": (0, 0), "harness": (0, 0)}
        client = cluster.client()
        assert client.get(SANDBOX, "absent") is None  # one call on one kept-alive connection
        assert client.get(SANDBOX, "absent") is None
        assert cluster.connections() == {"api": (1, 1), "harness": (0, 0)}
