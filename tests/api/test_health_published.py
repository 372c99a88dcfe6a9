"""`/healthz` reads what the actors publish and asks none of them (issue 29 item 5): it answered by asking the
watch and the store, waiting up to 5 s each, so a busy minute took a healthy pod out of its Service. It is
503 only when progress stops: the watch degraded (or not listed yet), the store unable to write, an actor
whose oldest message has waited past `HEALTH_STALL_SECONDS`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import requests

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiServer
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.shell import Shell
from jr2_actors.store.actor import StoreActor
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.constants import HEALTH_STALL_SECONDS
from jr2_actors.watch.actor import WatchActor
from tests.support.waiting import wait_until


@dataclass(frozen=True)
class Block:
    release: threading.Event


class BlockingStore(StoreActor):
    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Block):
            message.release.wait(30)
            return None
        return super().on_receive(message)


class BlockingWatch(WatchActor):
    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Block):
            message.release.wait(30)
            return None
        return super().on_receive(message)


@pytest.fixture
def orch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Orchestrator]:
    monkeypatch.setattr("jr2_actors.orchestrator.StoreActor", BlockingStore)
    monkeypatch.setattr("jr2_actors.orchestrator.WatchActor", BlockingWatch)
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None) as cluster:
        orchestrator = Orchestrator(cluster.client(), state_dir=str(tmp_path / "state"),
                                    signing_key=cluster.signing_key)
        with orchestrator:
            wait_until(lambda: orchestrator.health() == (True, ""), timeout=30, what="ready")
            yield orchestrator


def test_healthz_answers_ready_while_the_store_and_the_watch_are_busy(orch: Orchestrator) -> None:
    release = threading.Event()
    assert orch._store is not None and orch._watch is not None
    try:
        orch._store.tell(Block(release))
        orch._watch.tell(Block(release))
        server = ApiServer(Api(orch, "t" * 32))
        server.start()
        try:
            answer = requests.get(server.url + "/healthz", timeout=30)  # the old probe's asks: 2 × 5 s, then 503
        finally:
            server.stop()
        assert not release.is_set()  # both were still busy when it answered
        assert answer.status_code == 200, answer.text
        assert orch.health() == (True, "")
    finally:
        release.set()


def test_an_actor_whose_oldest_message_waited_past_the_bound_turns_it_503(orch: Orchestrator,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    assert orch._store is not None
    monkeypatch.setattr("jr2_actors.orchestrator.HEALTH_STALL_SECONDS", 0.0)
    try:
        orch._store.tell(Block(release))
        orch._store.tell(Block(release))  # this one waits behind the first
        wait_until(lambda: not orch.health()[0], what="the stuck store named")
        ok, reason = orch.health()
        assert not ok and reason.startswith("BlockingStore has not taken a message for ")
    finally:
        release.set()
    wait_until(lambda: orch.health() == (True, ""), what="ready again once it took its messages")


def test_a_degraded_watch_turns_it_503(orch: Orchestrator) -> None:
    state = orch.telemetry.watch.state
    assert state is not None and state.listed
    orch.telemetry.watch.publish(replace(state, degraded=True, failures=12))  # as the watch past its bound would
    assert orch.health() == (False, "the Sandbox watch is degraded (12 failures in a row)")


def test_a_store_that_cannot_write_turns_it_503_as_soon_as_it_says_so(orch: Orchestrator) -> None:
    orch.telemetry.store.writes("OperationalError: attempt to write a readonly database")  # as a failed write would
    assert orch.health() == (False, "the store cannot write: OperationalError: attempt to write a readonly database")
    # It has the store check again (a tell): the disk is fine, so the next probe is ready again.
    wait_until(lambda: orch.health() == (True, ""), what="the store's own check published")


class Quiet(Shell):
    def __init__(self, hold: threading.Event, telemetry: Telemetry) -> None:
        super().__init__(telemetry=telemetry)
        self.hold = hold
        self.name = "q"

    def on_receive(self, message: Any) -> Any:
        self.hold.wait(30)


def test_stalled_reads_the_mailboxes_on_their_clock_and_names_only_past_the_bound() -> None:
    clock = VirtualClock()
    telemetry = Telemetry(clock=clock)
    hold = threading.Event()
    ref = Quiet.start(hold, telemetry)
    try:
        ref.tell("first")
        ref.tell("waits")
        wait_until(lambda: ref.actor_inbox.qsize() == 1, what="one message waiting")  # type: ignore[attr-defined]
        clock.advance(HEALTH_STALL_SECONDS)
        assert telemetry.actors.stalled(HEALTH_STALL_SECONDS) == ""  # slow, not stuck
        clock.advance(1)
        assert telemetry.actors.stalled(HEALTH_STALL_SECONDS) == "Quiet q has not taken a message for 61s"
    finally:
        hold.set()
        ref.stop()
