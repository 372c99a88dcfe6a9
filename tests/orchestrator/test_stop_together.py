"""A stop asks every actor at once and waits once, within one budget (issue 29 item 4): the runs, and the seats
and Workspaces each run stops, are all waited for before the store stops — a seat still stopping when
`Orchestrator.stop()` returned was a thread the stop left behind — and what hangs past the budget is left
and named, never waited for beyond it."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from jr2_actors.agent.actor import AgentActor
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.shell import Shell
from jr2_actors.shell.stopping import Stops
from jr2_actors.values.constants import SERVE_STOP_SECONDS
from tests.support.serving import KEY, Serve
from tests.support.waiting import wait_until
from tests.support.workflows import MENU_TURN


class _Quiet(Shell):
    def __init__(self, hold: threading.Event | None = None) -> None:
        super().__init__()
        self.hold = hold

    def cleanup(self) -> None:
        if self.hold is not None:
            self.hold.wait(SERVE_STOP_SECONDS)


def test_the_ledger_waits_for_children_handed_during_a_stop_and_keeps_none_outside_one() -> None:
    stops = Stops()
    outside = _Quiet.start()
    stops.handed([outside])  # a run that ended on its own: nobody waits, nothing is kept
    assert stops.wait(0.0) == []
    stops.open()
    hold = threading.Event()
    child = _Quiet.start(hold)
    stops.handed([child])
    waiter = threading.Thread(target=lambda: stops.wait(time.monotonic() + SERVE_STOP_SECONDS))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), "the stop returned with a child still stopping"
    hold.set()
    waiter.join(SERVE_STOP_SECONDS)
    assert not waiter.is_alive() and not child.is_alive()


def test_a_wait_past_its_deadline_names_what_it_left(caplog: pytest.LogCaptureFixture) -> None:
    hold = threading.Event()
    stops = Stops()
    ref = _Quiet.start(hold)
    try:
        stops.ask([ref])
        with caplog.at_level(logging.ERROR):
            late = stops.wait(0.0)  # the deadline has passed already: nothing is waited for
        assert late == ["_Quiet"]
        assert "1 actor(s) did not stop within the stop's budget and are left (daemon threads): _Quiet" in caplog.text
    finally:
        hold.set()


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None) as c:
        c.script("triage", *([Hang()] for _ in range(4)))  # every Turn stays under way
        yield c


def _mid_turn(cluster: FakeCluster, tmp_path: Path, runs: int) -> Orchestrator:
    orch = Orchestrator(cluster.client(), state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key,
                        instance_harness=cluster.instance_harness_url)
    orch.start()
    for _ in range(runs):
        orch.submit(MENU_TURN)
    wait_until(lambda: len(cluster.admissions()) >= runs, timeout=30, what="every Turn admitted")
    return orch


@pytest.mark.slow
def test_the_stop_returns_only_once_every_seat_has_stopped_and_the_seats_stop_together(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each seat's cleanup is held until both seats are in it (asked one after another, the first would wait for
    a second never asked), then until the orchestrator's stop returns or a second passes: a stop that returns
    while a seat is still stopping lets the seat see it."""
    together = threading.Barrier(2)
    stopped = threading.Event()
    seen: list[tuple[str, bool]] = []  # each seat's name, and whether the stop had returned before it ended

    class Held(AgentActor):
        def cleanup(self) -> None:
            try:
                together.wait(timeout=SERVE_STOP_SECONDS / 2)
            except threading.BrokenBarrierError:
                seen.append((self.agent, True))
            stopped.wait(1.0)
            super().cleanup()
            seen.append((self.agent, stopped.is_set()))

    monkeypatch.setattr("jr2_actors.run.actor.agent_actor.AgentActor", Held)
    orch = _mid_turn(cluster, tmp_path, 2)

    def stop() -> None:
        orch.stop()
        stopped.set()

    stopper = threading.Thread(target=stop, name="test-stop", daemon=True)
    stopper.start()
    stopper.join(SERVE_STOP_SECONDS)
    assert stopped.is_set()
    assert seen == [("triage", False), ("triage", False)]


@pytest.mark.slow
def test_a_seat_that_hangs_is_left_at_the_budget_and_the_store_still_stops(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    hold = threading.Event()

    class Hung(AgentActor):
        def cleanup(self) -> None:
            hold.wait(60)
            super().cleanup()

    monkeypatch.setattr("jr2_actors.run.actor.agent_actor.AgentActor", Hung)
    orch = _mid_turn(cluster, tmp_path, 1)
    store = orch._store
    assert store is not None
    stopper = threading.Thread(target=orch.stop, kwargs={"budget": 0.5}, name="test-stop", daemon=True)
    try:
        with caplog.at_level(logging.ERROR):
            stopper.start()
            stopper.join(SERVE_STOP_SECONDS)
        assert not stopper.is_alive(), "the stop waited past its budget for a seat that hangs"
        assert not store.is_alive()
        assert "did not stop within the stop's budget and are left (daemon threads): Hung triage" in caplog.text
    finally:
        hold.set()
    seats: list[Any] = [r for r in pykka.ActorRegistry.get_all() if r.actor_class is Hung]
    for ref in seats:
        ref.stop(timeout=SERVE_STOP_SECONDS)


@pytest.mark.slow
def test_serve_with_runs_mid_turn_exits_0_on_sigterm_logging_no_traceback_and_a_restart_restores_them(
        tmp_path: Path) -> None:
    runs = 24
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None, signing_key=KEY.encode()) as cluster:
        cluster.script("triage", *([Hang()] for _ in range(2 * runs)))
        kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
        served = Serve(kubeconfig, tmp_path / "state", instance_harness=cluster.instance_harness_url)
        try:
            ids = {served.call("POST", "/runs", json={"workflow": MENU_TURN}).json()["runId"] for _ in range(runs)}
            wait_until(lambda: len(cluster.admissions()) >= runs, timeout=60, what="every Turn admitted")
        finally:
            served.proc.send_signal(signal.SIGTERM)
            try:
                code = served.proc.wait(SERVE_STOP_SECONDS)
            finally:
                if served.proc.poll() is None:
                    served.proc.kill()
        log = served.log.whole(SERVE_STOP_SECONDS)
        assert code == 0, log
        assert "Traceback" not in log and " ERROR " not in log, log
        again = Serve(kubeconfig, tmp_path / "state", instance_harness=cluster.instance_harness_url)
        try:
            listed = {r["runId"] for r in again.call("GET", "/runs").json()["runs"]}
        finally:
            again.proc.send_signal(signal.SIGTERM)
            again.proc.wait(SERVE_STOP_SECONDS)
        assert listed == ids
