"""The shell base's actor metrics: depth, oldest message, high-water mark, counts and processing time, by
kind, read at scrape time from one orchestrator's own registry; bounded with a thousand Workspaces."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.shell import ActorFault, Shell
from jr2_actors.shell import metrics as shell_metrics
from jr2_actors.shell.mailbox import Mailbox
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.constants import METRICS_BUSIEST_ACTORS
from tests.support.metrics_text import samples, series, value
from tests.support.probes import Gated, Inbox
from tests.support.waiting import wait_until


class Worker(Shell):
    """Handles each message in the virtual time it names (the clock is advanced while it works)."""

    def __init__(self, clock: VirtualClock, telemetry: Telemetry | None, parent: Inbox | None = None) -> None:
        super().__init__(telemetry=telemetry)
        self.clock = clock
        self.parent = parent
        self.name = "worker"

    def on_receive(self, message: Any) -> Any:
        if message == "raise":
            raise ValueError("a bug")
        self.clock.advance(float(message))
        return message


def text(telemetry: Telemetry) -> str:
    return telemetry.exposition().decode()


def test_a_slow_actor_shows_a_growing_depth_and_oldest_message_age() -> None:
    clock = VirtualClock()
    telemetry = Telemetry(clock=clock)
    gate, taken = threading.Event(), threading.Event()
    ref = Gated.start(gate, telemetry, name="slow-one", taken=taken)
    ref.tell("first")
    assert taken.wait(10)  # the actor is inside its first message now, blocked
    for i in range(5):
        ref.tell(i)
    first = samples(text(telemetry))
    assert value(first, "jr2_actor_mailbox_depth", kind="Gated") == 5
    assert value(first, "jr2_actor_oldest_message_age_seconds", kind="Gated") == 0.0
    clock.advance(3.0)
    for i in range(2):
        ref.tell(i)
    clock.advance(2.0)
    later = samples(text(telemetry))
    assert value(later, "jr2_actor_mailbox_depth", kind="Gated") == 7
    assert value(later, "jr2_actor_mailbox_depth_max", kind="Gated") == 7
    assert value(later, "jr2_actor_oldest_message_age_seconds", kind="Gated") == 5.0
    assert value(later, "jr2_actor_busiest_mailbox_depth", kind="Gated", name="slow-one") == 7
    assert value(later, "jr2_actor_busiest_oldest_message_age_seconds", kind="Gated", name="slow-one") == 5.0
    assert value(later, "jr2_actor_messages_received_total", kind="Gated") == 8
    assert value(later, "jr2_actor_messages_processed_total", kind="Gated") == 0

    gate.set()
    wait_until(lambda: value(text(telemetry), "jr2_actor_messages_processed_total", kind="Gated") == 8)
    drained = samples(text(telemetry))
    assert value(drained, "jr2_actor_mailbox_depth", kind="Gated") == 0
    assert value(drained, "jr2_actor_oldest_message_age_seconds", kind="Gated") == 0.0
    assert value(drained, "jr2_actor_mailbox_depth_high_water", kind="Gated") == 7  # kept after the drain
    assert value(drained, "jr2_actor_busiest_mailbox_depth", kind="Gated", name="slow-one") is None
    ref.stop(block=True, timeout=10)


def test_processing_time_failures_and_counts_survive_the_actor() -> None:
    clock = VirtualClock()
    telemetry = Telemetry(clock=clock)
    parent = Inbox()
    ref = Worker.start(clock, telemetry, parent)
    assert ref.ask("0.3", timeout=10) == "0.3"
    assert ref.ask("0.002", timeout=10) == "0.002"
    with pytest.raises(ValueError, match="a bug"):  # an ask that raises: the caller gets it, the actor lives
        ref.ask("raise", timeout=10)
    assert ref.ask("0", timeout=10) == "0"
    live = samples(text(telemetry))
    assert value(live, "jr2_actor_processing_seconds_count", kind="Worker") == 4
    assert value(live, "jr2_actor_processing_seconds_sum", kind="Worker") == pytest.approx(0.302)
    assert value(live, "jr2_actor_processing_seconds_bucket", kind="Worker", le="0.0025") == 3
    assert value(live, "jr2_actor_processing_seconds_bucket", kind="Worker", le="0.25") == 3
    assert value(live, "jr2_actor_processing_seconds_bucket", kind="Worker", le="0.5") == 4
    assert value(live, "jr2_actor_message_failures_total", kind="Worker") == 1

    ref.tell("raise")  # a tell that raises: the actor dies, its parent hears why, its counts stay
    parent.wait_for(lambda ms: any(isinstance(m, ActorFault) for m in ms))
    wait_until(lambda: value(text(telemetry), "jr2_actor_instances", kind="Worker") == 0)
    dead = samples(text(telemetry))
    assert value(dead, "jr2_actor_message_failures_total", kind="Worker") == 2
    assert value(dead, "jr2_actor_messages_processed_total", kind="Worker") == 5
    assert value(dead, "jr2_actor_messages_received_total", kind="Worker") == 5
    assert value(dead, "jr2_actor_processing_seconds_sum", kind="Worker") == pytest.approx(0.302)


def test_label_cardinality_stays_bounded_with_a_thousand_workspaces() -> None:
    def run(count: int) -> tuple[str, list[str]]:
        telemetry = Telemetry(clock=VirtualClock())
        gate = threading.Event()
        takens = [threading.Event() for _ in range(count)]
        names = [f"ws-{i:04d}" for i in range(count)]
        refs = [Gated.start(gate, telemetry, name=name, taken=taken) for taken, name in zip(takens, names, strict=True)]
        try:
            for ref in refs:
                ref.tell("first")
                ref.tell("queued")
            for taken in takens:
                assert taken.wait(30)
            wait_until(lambda: value(text(telemetry), "jr2_actor_mailbox_depth", kind="Gated") == count)
            return text(telemetry), names
        finally:
            gate.set()
            for ref in refs:
                ref.stop(block=False)

    few, _ = run(10)
    many, names = run(1000)
    assert value(many, "jr2_actor_instances", kind="Gated") == 1000
    assert series(many) == series(few)  # a thousand actors make the same series as ten
    named = [n for n in names if f'"{n}"' in many]
    assert len(named) == METRICS_BUSIEST_ACTORS


def test_two_orchestrators_telemetries_do_not_mix() -> None:
    clock = VirtualClock()
    first, second = Telemetry(clock=clock), Telemetry(clock=clock)
    a = Worker.start(clock, first)
    b = Gated.start(threading.Event(), second, name="b")
    a.ask("0", timeout=10)
    one, two = text(first), text(second)
    assert value(one, "jr2_actor_instances", kind="Worker") == 1
    assert value(one, "jr2_actor_instances", kind="Gated") is None
    assert value(two, "jr2_actor_instances", kind="Gated") == 1
    assert value(two, "jr2_actor_instances", kind="Worker") is None
    for ref in (a, b):
        ref.stop(block=True, timeout=10)


def test_an_actor_made_outside_an_orchestrator_records_nowhere() -> None:
    clock = VirtualClock()
    ref = Worker.start(clock, None)
    assert ref.ask("0.1", timeout=10) == "0.1"
    assert all(not family.samples for family in shell_metrics.OFF.collect())  # counted nowhere
    assert "jr2_actor_instances{" not in Telemetry(clock=clock).exposition().decode()
    ref.stop(block=True, timeout=10)


def test_two_orchestrators_in_one_process_serve_their_own_series_and_a_slow_actor_in_one_shows(
        tmp_path: Path) -> None:
    clock = VirtualClock()
    with FakeCluster(namespace="jr2", operator=False, harness=False) as one, \
            FakeCluster(namespace="jr2", operator=False, harness=False) as two:
        first = Orchestrator(one.client(), state_dir=str(tmp_path / "a"), signing_key=one.signing_key,
                             telemetry=Telemetry(clock=clock)).start()
        second = Orchestrator(two.client(), state_dir=str(tmp_path / "b"), signing_key=two.signing_key).start()
        gate, taken = threading.Event(), threading.Event()
        slow = Gated.start(gate, first.telemetry, name="slow-one", taken=taken)
        try:
            slow.tell("first")
            assert taken.wait(10)
            for i in range(3):
                slow.tell(i)
            clock.advance(12.0)
            a, b = samples(first.metrics()), samples(second.metrics())
            assert value(a, "jr2_actor_instances", kind="StoreActor") == 1  # not 2: only its own
            assert value(b, "jr2_actor_instances", kind="StoreActor") == 1
            assert value(a, "jr2_actor_mailbox_depth", kind="Gated") == 3
            assert value(a, "jr2_actor_oldest_message_age_seconds", kind="Gated") == 12.0
            assert value(b, "jr2_actor_instances", kind="Gated") is None
            assert value(a, "jr2_kube_write_cap") == value(b, "jr2_kube_write_cap") == 12
        finally:
            gate.set()
            slow.stop(block=True, timeout=10)
            first.stop()
            second.stop()
            first.client.close()
            second.client.close()


def test_the_mailbox_is_a_fifo_queue_that_knows_how_long_its_head_has_waited() -> None:
    clock = VirtualClock()
    box = Mailbox()
    box.now = clock.monotonic
    assert box.empty() and box.oldest_age(clock.monotonic()) == 0.0
    with pytest.raises(queue.Empty):
        box.get_nowait()
    with pytest.raises(queue.Empty):
        box.get(timeout=0.01)
    box.put("a")
    clock.advance(2.0)
    box.put("b")
    clock.advance(1.0)
    assert box.qsize() == 2 and box.received == 2
    assert box.oldest_age(clock.monotonic()) == 3.0
    assert box.get() == "a"
    assert box.oldest_age(clock.monotonic()) == 1.0  # "b" is the head now
    assert box.get(timeout=1.0) == "b" and box.empty()
