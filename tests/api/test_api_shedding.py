"""No neighbour starves another (issue 29 item 6), on real loopback sockets: at the connection cap a new
connection sheds the oldest one that has no complete request (600 idle sockets from 20 addresses used to fill
the 512 and answer `/healthz` 503), probes have a reserve past the cap and are answered by the gate itself,
never queued behind a worker."""

from __future__ import annotations

import threading
from contextlib import ExitStack

import requests

from jr2_actors.api.server import ApiLimits
from jr2_actors.run.feed.hub import FeedRead
from jr2_actors.run.feed.lines import FeedEvent, SaidLine
from tests.support.raw_api import (
    GENEROUS,
    SOURCES,
    TOKEN,
    Live,
    answer,
    connect,
    crowd,
    served,
    status_of,
    still_open,
)
from tests.support.waiting import wait_until

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def probe(server: object, source: str = "127.0.0.1") -> bytes:
    with connect(server, source) as sock:  # type: ignore[arg-type]
        sock.sendall(HEALTHZ)
        return answer(sock)


def test_idle_sockets_at_the_cap_are_shed_oldest_first_and_a_probe_gets_in() -> None:
    with served(ApiLimits(header_seconds=60.0, max_connections=6)) as server, ExitStack() as stack:
        idle = crowd(stack, server, 6)  # idle: connected, nothing sent, from four addresses
        idle[2].sendall(b"GET /runs HTTP/1.1\r\n")  # a head begun and never finished: no complete request either
        for shed in range(3):  # each probe at the cap sheds the oldest left, a head begun or not
            wait_until(lambda: server._server._open == 6, GENEROUS, what="the cap reached")
            healthz = probe(server, SOURCES[shed])
            assert status_of(healthz) == 200, healthz
            assert answer(idle[shed]) == b""  # shut without a word
            assert all(still_open(s) for s in idle[shed + 1:])
            wait_until(lambda: server._server._open == 5, GENEROUS, what="the shed one and the probe closed")
            idle.append(stack.enter_context(connect(server, SOURCES[shed])))  # the cap again


def test_a_probe_is_answered_from_the_reserve_when_nothing_can_be_shed_and_no_worker_is_free() -> None:
    limits = ApiLimits(header_seconds=60.0, max_connections=2)
    with served(limits, threads=2, max_streams=2, heartbeat=600.0) as server:
        url = server.url + "/runs/r-1/events"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with requests.get(url, headers=auth, stream=True, timeout=GENEROUS) as one, \
                requests.get(url, headers=auth, stream=True, timeout=GENEROUS) as two:
            assert one.status_code == two.status_code == 200  # both workers, both connections: none parked
            answers = [probe(server) for _ in range(3)]
            assert [status_of(a) for a in answers] == [200] * 3
            with connect(server) as other:  # the reserve is for probes only
                other.sendall(b"GET /runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                              + b"\r\n\r\n")
                refused = answer(other)
            assert status_of(refused) == 503 and b"connections are open" in refused


class _Burst(Live):
    """A run whose feed holds one long line, then nothing: a quiet stream after its first write."""

    def feed(self, run_id: str, after: int, wait: float) -> FeedRead | None:
        if run_id == "r-1" and after == 0:
            return FeedRead([FeedEvent(1, 0.0, SaidLine("coder", 1, "x" * 100_000))], False)
        return super().feed(run_id, after, wait)


def test_a_follower_that_does_not_read_a_quiet_stream_is_cut_and_its_slot_freed() -> None:
    """Its window is full and stays so: the keepalives after the line never block a write, so the pace never cut
    it and it held its stream slot for good."""
    limits = ApiLimits(pace_grace_seconds=600.0, unread_seconds=1.0)
    with served(limits, threads=3, max_streams=1, heartbeat=0.2, backend=_Burst()) as server, \
            connect(server, receive_buffer=4096) as never_reads:
        never_reads.sendall(b"GET /runs/r-1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                            + b"\r\n\r\n")
        auth = {"Authorization": f"Bearer {TOKEN}"}

        def slot_free() -> bool:
            with requests.get(server.url + "/runs/r-1/events", headers=auth, stream=True, timeout=GENEROUS) as r:
                return r.status_code == 200

        wait_until(slot_free, GENEROUS, what="the stream slot of the follower that never reads")
        assert status_of(probe(server)) == 200


def test_a_follower_that_reads_slowly_is_not_cut() -> None:
    limits = ApiLimits(pace_grace_seconds=600.0, unread_seconds=1.0)
    with served(limits, threads=3, max_streams=1, heartbeat=0.2, backend=_Burst()) as server, \
            connect(server, receive_buffer=4096) as reader:
        reader.sendall(b"GET /runs/r-1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                       + b"\r\n\r\n")
        got = b""
        while got.count(b": keepalive") < 15:  # about three of its bounds, taking 2 KiB at a time
            chunk = reader.recv(2048)
            assert chunk, "the server cut a follower that reads"
            got += chunk
            threading.Event().wait(0.05)
        assert len(got) > 100_000
