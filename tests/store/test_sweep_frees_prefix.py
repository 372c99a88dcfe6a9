"""ADR-0065: a swept id frees its abbreviations. Two finished runs share a prefix, so the CLI refuses it as
ambiguous; once the 7-day sweep (the store's hourly one, on the virtual clock) removes the older run, the
same prefix names the run that remains — through `serve`'s API, as `jr2-actors status PREFIX` resolves it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiServer
from jr2_actors.commands.client import Client, resolve
from jr2_actors.commands.common import UsageError
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.constants import RETENTION_SECONDS, SWEEP_INTERVAL_SECONDS
from jr2_actors.values.workflow import read_document
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow  # a virtual week of hourly sweeps: seconds of wall time

TOKEN = "sweep-test-token"  # a test's own Instance token
DAY = 24 * 3600.0
OLDER, NEWER = "r-ab0000000001", "r-ab0000000002"  # minted ids, as `new_run_id` makes them
SHARED = "r-ab"


@pytest.fixture
def client(jr2_orchestrator: Orchestrator) -> Iterator[Client]:
    server = ApiServer(Api(jr2_orchestrator, TOKEN))
    server.start()
    try:
        yield Client(server.url, TOKEN)
    finally:
        server.stop()


def finish(orchestrator: Orchestrator, clock: VirtualClock, run_id: str) -> None:
    assert orchestrator.submit(read_document(one_state("sweep")), run_id=run_id) == run_id
    clock.run_until(lambda: (orchestrator.status(run_id) or {}).get("status") == "done")


@pytest.mark.jr2_fake_cluster(time="virtual")
@pytest.mark.jr2_agents(pick_first=True)
def test_a_swept_id_frees_its_prefix_for_the_run_that_remains(jr2_orchestrator: Orchestrator,
                                                             jr2_fake_cluster: FakeCluster, client: Client) -> None:
    clock = jr2_fake_cluster.clock
    assert isinstance(clock, VirtualClock)
    finish(jr2_orchestrator, clock, OLDER)
    older_ended = clock.wall()
    assert resolve(client, SHARED) == OLDER  # the prefix names it while it is the only one
    clock.run_until(lambda: clock.wall() >= older_ended + 2 * DAY, within=3 * DAY)
    finish(jr2_orchestrator, clock, NEWER)
    with pytest.raises(UsageError, match=f"{SHARED} is ambiguous: it begins {OLDER}, {NEWER}"):
        resolve(client, SHARED)

    clock.run_until(lambda: jr2_orchestrator.status(OLDER) is None,
                    within=RETENTION_SECONDS + 2 * SWEEP_INTERVAL_SECONDS)
    assert RETENTION_SECONDS <= clock.wall() - older_ended <= RETENTION_SECONDS + SWEEP_INTERVAL_SECONDS + 1
    assert (jr2_orchestrator.status(NEWER) or {}).get("status") == "done"  # under 7 days old: kept
    assert resolve(client, SHARED) == NEWER  # the swept id's abbreviation now names the run that remains
    assert resolve(client, "r-ab000000000") == NEWER
