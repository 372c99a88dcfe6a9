"""No neighbour starves another (issue 29 item 6), on real loopback sockets: at the connection cap a new
connection sheds the oldest one that has no complete request (600 idle sockets from 20 addresses used to fill
the 512 and answer `/healthz` 503), probes have a reserve past the cap and are answered by the gate itself,
never queued behind a worker."""

from __future__ import annotations

from contextlib import ExitStack

import requests

from jr2_actors.api.server import ApiLimits
from tests.test_api_bounds import GENEROUS, SOURCES, TOKEN, answer, connect, crowd, served, status_of, still_open
from tests.waiting import wait_until

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
