"""The Harness session's pools (harness/pools.py): one per address, sized to the clients that hold it, so more
seats than a fixed pool's 32 on one address (an Instance Harness, the fake cluster's) keep their connections
instead of opening and closing one a call; and past the bound only an address no client holds is evicted."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Pick
from jr2_actors.fake.http import HttpServer, Request
from jr2_actors.harness.client import HarnessClient
from jr2_actors.harness.errors import HarnessUnreachable
from jr2_actors.harness.pools import HarnessPools, address_of, pools_of, shared_session
from jr2_actors.net.cut import Cut
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.constants import HARNESS_POOL_SIZE
from tests.support import admissions
from tests.support.sandboxes import ready_sandbox
from tests.support.waiting import wait_until

SEATS = HARNESS_POOL_SIZE + 16  # more clients at once on one address than a fixed pool keeps


class AllAtOnce:
    """Answers each request only once `n` are in flight together: every round, `n` connections at once."""

    def __init__(self, n: int) -> None:
        self.barrier = threading.Barrier(n, timeout=20)

    def handle(self, r: Request) -> None:
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            r.respond_json(500, {"error": "not all at once"})
            return
        r.respond_json(200, {"ok": True})


class Gate:
    """Holds each request until `open` is set (`entered` says one is held)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()
        self.open.set()

    def handle(self, r: Request) -> None:
        self.entered.set()
        self.open.wait(20)
        r.respond_json(200, [])  # healthy, and a stream with nothing new


@pytest.fixture
def servers() -> Iterator[list[HttpServer]]:
    made: list[HttpServer] = []
    yield made
    for server in made:
        server.stop()


def serve(servers: list[HttpServer], app: object) -> HttpServer:
    server = HttpServer(app, name="pool-test")  # type: ignore[arg-type]
    server.start()
    servers.append(server)
    return server


def test_more_seats_than_a_fixed_pool_on_one_address_keep_their_connections(servers: list[HttpServer]) -> None:
    server = serve(servers, AllAtOnce(SEATS))
    session = shared_session()
    pools = pools_of(session)
    assert pools is not None
    clients = [HarnessClient(server.url, "t0k3n", session=session) for _ in range(SEATS)]
    try:
        answers: list[bool] = []
        for _ in range(3):  # three rounds of every seat's call at once
            answers.clear()
            threads = [threading.Thread(target=lambda c=c: answers.append(c.healthz())) for c in clients]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert answers == [True] * SEATS
        # A pool of 32 kept 32 of the first round's 48 and made 16 anew in each round after: 80 in all.
        assert server.accepted == SEATS, f"{server.accepted} connections for {SEATS} seats in 3 rounds"
        assert pools.discarded == 0
    finally:
        for client in clients:
            client.close()
    # Its clients gone, the pool keeps what an unheld address keeps and closes the rest.
    wait_until(lambda: server.connections()[0] == HARNESS_POOL_SIZE, what="the idle connections past the floor closed")
    session.close()


def test_past_the_bound_an_address_in_use_keeps_its_pool_and_an_unheld_one_goes(servers: list[HttpServer]) -> None:
    gate = Gate()
    held, other, third = serve(servers, gate), serve(servers, Gate()), serve(servers, Gate())
    pools = HarnessPools(bound=1)
    session = shared_session(pools)
    seat = HarnessClient(held.url, "t0k3n", session=session)
    assert seat.healthz()
    gate.open.clear()
    gate.entered.clear()
    answer: list[bool] = []
    in_flight = threading.Thread(target=lambda: answer.append(seat.healthz()))
    in_flight.start()
    assert gate.entered.wait(10), "the held call never arrived"
    for server in (other, third):  # two more addresses, each used once and let go
        passing = HarnessClient(server.url, "t0k3n", session=session)
        assert passing.healthz()
        passing.close()
    # `other`'s pool went when `third`'s came (the bound is 1; the held address does not count as evictable).
    wait_until(lambda: other.connections()[0] == 0, what="the unheld address's idle connection closed")
    assert pools.evicted >= 1
    gate.open.set()
    in_flight.join(10)
    assert answer == [True]
    assert seat.healthz() and seat.healthz()
    assert held.accepted == 1, "the held address's connection was closed under its call"
    seat.close()
    session.close()


def test_a_release_is_counted_once_and_an_address_is_named_as_urllib3_keys_it() -> None:
    pools = HarnessPools(floor=4, per_client=2)
    first, second = pools.hold("http://H.example:8080/sandbox-a"), pools.hold("http://h.example:8080/sandbox-b")
    address = address_of("http://h.example:8080")
    assert pools.size(address) == 8
    first()
    first()  # a second call of one release changes nothing
    assert pools.size(address) == 6
    second()
    assert pools.size(address) == 4 and pools.stats()["held"] == 0
    assert address_of("https://[::1]/x") == ("https", "[::1]", 443)


def test_the_fake_can_give_each_sandbox_a_harness_address_of_its_own() -> None:
    """What bench/release.py's "own address" half runs on: a Sandbox's endpoint, its admission's stream and
    its long-poll are on a port of its own, and the pools keep one per address."""
    clock = VirtualClock()
    names = ("ws-ports-f-1-aaaaaa", "ws-ports-f-2-bbbbbb")
    with FakeCluster(clock=clock, start_seconds=1, long_poll=0.2, harness_ports=3) as cluster:
        endpoints = [ready_sandbox(cluster, clock, name) for name in names]
        ports = {address_of(e)[2] for e in endpoints}
        assert len(ports) == 2, endpoints
        session = shared_session()
        pools = pools_of(session)
        assert pools is not None
        for name, endpoint in zip(names, endpoints, strict=True):
            client = HarnessClient(endpoint, cluster.harness_token(name), session=session)
            cluster.script("coder", [Pick("finish", {"why": "done"})])
            admission = client.admit("coder", "c-1", admissions.admission())
            assert address_of(admission.stream_url) == address_of(endpoint)
            assert [e["type"] for e in client.updates(admission.stream_url, admission.offset).events] == ["pick"]
            client.close()
        assert pools.stats()["addresses"] == 2
        session.close()


class Idle:
    """A stream with nothing new (204, as a long-poll that timed out) and a Harness draining (503) once per
    admission before it takes it."""

    def __init__(self) -> None:
        self.admissions = 0

    def handle(self, r: Request) -> None:
        r.read_body(1 << 20)
        if r.command == "GET":
            r.respond(204, b"", None, (("Stream-Next-Offset", "1"), ("Stream-Up-To-Date", "true")))
            return
        self.admissions += 1
        if self.admissions % 2:
            r.respond_json(503, {"error": "draining"})
            return
        r.respond_json(200, {"streamUrl": "/ws-1/streams/coder/c-1", "offset": "0", "submissionId": "s-1"})


def test_an_idle_long_poll_and_a_refused_admission_give_their_connection_back(servers: list[HttpServer]) -> None:
    """A 204 or a 503 closed unread closed its connection: each seat's idle long-poll opened a new one (2,108
    Harness connections for a release of 100 one-Turn runs, 74 once each is read to its end)."""
    server = serve(servers, Idle())
    clock = VirtualClock()
    session = shared_session()
    client = HarnessClient(server.url + "/ws-1", "t0k3n", session=session, clock=clock, wait=lambda _: None)
    for _ in range(3):
        assert client.updates(server.url + "/ws-1/streams/coder/c-1", "0").events == []
    assert client.admit("coder", "c-1", admissions.admission(message="Go.")).submission_id == "s-1"  # after one 503
    assert server.accepted == 1, f"{server.accepted} connections for 5 calls one after another"
    client.close()
    session.close()


def test_a_cut_reused_for_many_calls_holds_only_the_connection_in_use(servers: list[HttpServer]) -> None:
    """A Turn's long-polls share one Cut; on a pool of thousands of connections each call may get another.
    The Cut kept every connection it ever had and looked each new one up in that list: work per call that grew
    with the live seats. It holds the ones it owns now, and a fire still ends the call in flight."""
    many = [serve(servers, Gate()) for _ in range(12)]
    session = shared_session()
    clients = [HarnessClient(s.url, "t0k3n", session=session) for s in many]
    cut = Cut()
    for client in clients:  # twelve calls under one Cut, each on a connection of its own address
        client.updates(client.base_url + "/s", "0", cut=cut)
        assert len(cut._connections) == 0, "a connection back in its pool still counted as the Cut's"
    gate = Gate()
    held = serve(servers, gate)
    gate.open.clear()
    seat = HarnessClient(held.url, "t0k3n", session=session)
    failed: list[BaseException] = []

    def poll() -> None:
        try:
            seat.updates(held.url + "/s", "0", cut=cut)
        except HarnessUnreachable as e:
            failed.append(e)

    thread = threading.Thread(target=poll)
    thread.start()
    assert gate.entered.wait(10)
    assert len(cut._connections) == 1
    cut.fire()
    thread.join(10)
    gate.open.set()
    assert len(failed) == 1 and not thread.is_alive()
    for client in [*clients, seat]:
        client.close()
    session.close()


def test_a_full_pool_takes_a_connection_or_a_slot_back_without_a_warning(
        servers: list[HttpServer], caplog: pytest.LogCaptureFixture) -> None:
    """Past its size (its clients gone while their calls were out) a returned connection is closed and counted,
    and a slot given back after an error (urllib3 puts None) is dropped: never urllib3's "pool is full"."""
    server = serve(servers, Gate())
    pools = HarnessPools(floor=1, per_client=0)
    session = shared_session(pools)
    client = HarnessClient(server.url, "t0k3n", session=session)
    assert client.healthz()
    (pool,) = (p for by_key in pools._pools.values() for p in by_key.values())
    spare = pool._new_conn()
    with caplog.at_level("WARNING", logger="urllib3"):
        pool._put_conn(None)  # the one slot holds the kept connection: full
        pool._put_conn(spare)
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]
    assert pools.discarded == 1
    client.close()
    session.close()


def test_past_the_warm_ones_an_address_nobody_holds_keeps_no_idle_connection(servers: list[HttpServer]) -> None:
    """A finished Sandbox's address is gone for good: its pool kept up to the floor's idle connections (each one
    a socket here and a connection held on the far side) until evicted, thousands of Sandboxes later. Only the
    `warm` let go last keep theirs (an attach lets go before its seat holds)."""
    finished, live, last = serve(servers, Gate()), serve(servers, Gate()), serve(servers, Gate())
    pools = HarnessPools(warm=1)
    session = shared_session(pools)
    seat = HarnessClient(finished.url, "t0k3n", session=session)
    other = HarnessClient(live.url, "t0k3n", session=session)
    assert seat.healthz() and other.healthz()
    seat.close()
    assert finished.connections()[0] == 1, "the address let go last keeps its idle connection"
    passing = HarnessClient(last.url, "t0k3n", session=session)
    assert passing.healthz()
    passing.close()
    wait_until(lambda: finished.connections()[0] == 0, what="the colder unheld address's idle connection closed")
    assert last.connections()[0] == 1 and live.connections()[0] == 1, "a warm or held address keeps its own"
    assert pools.stats()["addresses"] == 3  # its pool is kept (until evicted), empty: a next call connects anew
    again = HarnessClient(finished.url, "t0k3n", session=session)
    assert again.healthz()
    again.close()
    other.close()
    session.close()
