"""The Harness session's pools on `/metrics`: addresses with a pool and held, evictions, idle connections kept
(all, and on the address keeping most), connections opened, and returns to a full pool — read at scrape time
from `HarnessPools`, the orchestrator's session's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jr2_actors.fake.http import HttpServer, Request
from jr2_actors.harness.client import HarnessClient
from jr2_actors.harness.pools import HarnessPools, shared_session
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.telemetry import Telemetry
from tests.support.metrics_text import value


class Ok:
    def handle(self, r: Request) -> None:
        r.respond_json(200, {"ok": True})


@pytest.fixture
def servers() -> Iterator[list[HttpServer]]:
    made = [HttpServer(Ok(), name="pool-metrics") for _ in range(3)]
    for server in made:
        server.start()
    yield made
    for server in made:
        server.stop()


def test_the_pools_are_counted_on_the_exposition(servers: list[HttpServer]) -> None:
    pools = HarnessPools(bound=1, floor=1, per_client=1)
    session = shared_session(pools)
    telemetry = Telemetry()
    telemetry.harness.read_pools(pools)
    held = [HarnessClient(servers[0].url, "t0k3n", session=session) for _ in range(2)]
    for client in held:
        assert client.healthz()
    text = telemetry.exposition().decode()
    assert value(text, "jr2_harness_pools") == 1
    assert value(text, "jr2_harness_pools_held") == 1
    assert value(text, "jr2_harness_pool_connections") == 1  # one call after another: one connection
    assert value(text, "jr2_harness_pool_connections_max") == 1
    assert value(text, "jr2_harness_pool_connections_opened_total") == 1
    assert value(text, "jr2_harness_pool_evictions_total") == 0

    for server in servers[1:]:  # two addresses used once and let go: past the bound of 1, each goes
        passing = HarnessClient(server.url, "t0k3n", session=session)
        assert passing.healthz()
        passing.close()
    text = telemetry.exposition().decode()
    assert value(text, "jr2_harness_pools") == 1  # the held one
    assert value(text, "jr2_harness_pool_evictions_total") == 2
    assert value(text, "jr2_harness_pool_connections") == 1
    assert value(text, "jr2_harness_pool_connections_opened_total") == 3  # the evicted pools' still counted

    (pool,) = pools._pools[next(iter(pools._holders))].values()
    spare = pool._new_conn()  # a connection back to a pool already holding its size: closed and counted
    pool._put_conn(pool._get_conn())
    pool._put_conn(spare)
    text = telemetry.exposition().decode()
    assert value(text, "jr2_harness_pool_full_total") == 1
    for client in held:
        client.close()
    session.close()


def test_an_orchestrator_serves_its_own_harness_sessions_pools(jr2_orchestrator: Orchestrator) -> None:
    """What serve's `/metrics` serves: the orchestrator hands its session's pools to its telemetry."""
    text = jr2_orchestrator.metrics()
    assert value(text, "jr2_harness_pools") == 0
    assert value(text, "jr2_harness_pool_evictions_total") == 0
