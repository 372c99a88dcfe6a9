"""Issue 18 item 7: one Harness session for the process. Clients given it close only their own calls, and an
orchestrator's attaches and seats all go on it, so a Harness's connections outlive each call's client."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.harness.client import HarnessClient
from jr2_actors.harness.errors import HarnessUnreachable
from jr2_actors.harness.pools import shared_session
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.workflow import read_document
from tests.support.sandboxes import ready_sandbox
from tests.support.slow_server import SlowServer
from tests.support.workflows import one_state

NAME = "ws-session-f-1-abc123"


@pytest.fixture
def shared() -> Iterator[requests.Session]:
    session = shared_session()
    yield session
    session.close()


def test_a_client_on_the_shared_session_closes_its_calls_and_leaves_the_session_open(
        shared: requests.Session) -> None:
    clock = VirtualClock()
    with FakeCluster(clock=clock, start_seconds=1) as cluster:
        endpoint = ready_sandbox(cluster, clock, NAME)
        token = cluster.harness_token(NAME)
        first = HarnessClient(endpoint, token, session=shared)
        assert first.memory_kills().kills == ()  # a call under the client's Cut, its connection back in the pool
        first.close()
        second = HarnessClient(endpoint, token, session=shared)
        assert second.memory_kills().kills == () and second.healthz()
        second.close()
        assert cluster.accepted()["harness"] == 1  # the first client's connection served the second's calls


def test_closing_one_client_ends_its_call_in_flight_and_no_other_clients(shared: requests.Session) -> None:
    held = SlowServer("hold")
    clock = VirtualClock()
    try:
        with FakeCluster(clock=clock, start_seconds=1) as cluster:
            endpoint = ready_sandbox(cluster, clock, NAME)
            other = HarnessClient(endpoint, cluster.harness_token(NAME), session=shared)
            assert other.healthz()
            stuck = HarnessClient(held.url, "t0k3n", session=shared)
            failed: list[BaseException] = []

            def read() -> None:
                try:
                    stuck.memory_kills()
                except BaseException as e:  # whatever ends it is the finding
                    failed.append(e)

            thread = threading.Thread(target=read, daemon=True)
            thread.start()
            assert held.got_request.wait(10), "the held peer never got the read"
            stuck.close()
            thread.join(10)
            assert not thread.is_alive() and len(failed) == 1 and isinstance(failed[0], HarnessUnreachable), failed
            assert other.healthz()  # the session and the other client's connection are untouched
            assert cluster.accepted()["harness"] == 1
            other.close()
    finally:
        held.close()


@pytest.mark.slow
@pytest.mark.jr2_agents(pick_first=True)
def test_an_orchestrators_attaches_and_seats_keep_their_harness_connections(
        jr2_orchestrator: Orchestrator, jr2_fake_cluster: FakeCluster) -> None:
    """Before, each attach made its session and closed it, and each run's seat had its own: every run opened
    at least two connections to the Harness (8 for 4 runs). On the one session they are kept from run to run;
    only a seat's long-poll still in flight when its run ends is cut with the seat (AgentActor.cleanup), which
    the machine's load decides: at most one connection a run after the first run's two."""
    runs = 4
    for i in range(runs):
        final = jr2_orchestrator.wait_finished(jr2_orchestrator.submit(read_document(one_state(f"kept-{i}"))), 30)
        assert final is not None and final["status"] == "done", final
    accepted = jr2_fake_cluster.accepted()["harness"]
    print(f"harness connections accepted for {runs} runs: {accepted}")
    assert accepted <= runs + 1, f"{accepted} connections to the Harness for {runs} runs one after another"
