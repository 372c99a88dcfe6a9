"""The driven VirtualClock (shell/clock.py): timers fire in order at their own times, `upcoming()` says who
set each, "nothing under way" sees an actor mid-message, a pool job and a request served, and a wait for
what cannot come fails at once with what every actor waits for."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from jr2_actors.fake.pytest_plugin import _time_options
from jr2_actors.shell import Deadline, Shell, Timers
from jr2_actors.shell.clock import NeverIdle, Stalled, VirtualClock
from jr2_actors.shell.pools import CountedPool
from tests.waiting import wait_until


class _Blocking(Shell):
    """An actor whose one message waits until the test lets it go."""

    name = "blocker"

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate

    def on_receive(self, message: Any) -> Any:
        self.gate.wait(10)
        return "done"


class _Ping:
    pass


def test_advance_fires_each_timer_at_its_own_time_in_order() -> None:
    clock = VirtualClock(settle=True)
    timers = Timers(clock)
    fired: list[float] = []
    try:
        for at in (50.0, 10.0, 20.0):
            timers.schedule(at, lambda: fired.append(clock.monotonic()), f"at {at}")
        clock.advance(100)
        assert fired == [10.0, 20.0, 50.0]
        assert clock.monotonic() == 100.0
    finally:
        timers.stop()


def test_upcoming_lists_the_next_timers_soonest_first_with_who_set_them() -> None:
    clock = VirtualClock(settle=True)
    timers = Timers(clock, name="jr2-test-timers")
    gate = threading.Event()
    ref = _Blocking.start(gate)
    try:
        Deadline(timers, ref, _Ping()).arm(300.0)
        handle = timers.schedule(7.0, lambda: None, "the sweep")
        timers.schedule(9.0, lambda: None, "gone")
        timers.cancel(timers.schedule(8.0, lambda: None, "cancelled"))
        assert [(u.at, u.what) for u in clock.upcoming()] == [
            (7.0, "jr2-test-timers: the sweep"), (9.0, "jr2-test-timers: gone"), (300.0, "jr2-test-timers: _Ping")]
        timers.cancel(handle)
        assert clock.upcoming(1)[0].what == "jr2-test-timers: gone"
    finally:
        gate.set()
        ref.stop()
        timers.stop()


def test_an_actor_mid_message_is_work_under_way_until_it_has_answered() -> None:
    clock = VirtualClock(settle=True)
    gate = threading.Event()
    ref = _Blocking.start(gate)
    try:
        ref.ask("warm up", block=False)
        gate.set()
        clock.wait_idle()
        gate.clear()
        answer = ref.ask("wait", block=False)
        # The take may lag the tell: until then the message waits, which is work too.
        wait_until(lambda: bool(clock.busy()), timeout=10, what="the blocker busy")
        assert any("_Blocking blocker" in b for b in clock.busy())
        with pytest.raises(NeverIdle, match="_Blocking blocker: handling a message"):
            clock.wait_idle(timeout=0.05)
        gate.set()
        assert answer.get(timeout=5) == "done"
        clock.wait_idle()
        assert clock.busy() == []
    finally:
        gate.set()
        ref.stop()


def test_a_pool_job_is_work_under_way_until_it_has_returned() -> None:
    clock = VirtualClock(settle=True)
    pool = CountedPool(1, thread_name_prefix="jr2-test", clock=clock)
    gate = threading.Event()
    try:
        future = pool.submit(gate.wait, 10)
        assert clock.busy() == ["pool jr2-test: 1 job(s) queued or running"]
        gate.set()
        future.result(5)
        clock.wait_idle()
    finally:
        gate.set()
        pool.shutdown()


def test_a_parked_request_is_work_only_once_it_has_something_to_answer() -> None:
    clock = VirtualClock(settle=True)
    ready = threading.Event()
    with clock.activity.busy("fake API GET /watch") as job:
        assert clock.busy() == ["fake API GET /watch"]
        with job.waiting(ready.is_set):
            assert clock.busy() == []
            assert "fake API GET /watch" in clock.describe()
            ready.set()
            assert clock.busy() == ["fake API GET /watch"]
    assert clock.busy() == []


def test_run_until_what_never_comes_fails_at_once_with_what_every_actor_waits_for() -> None:
    clock = VirtualClock(settle=True)
    gate = threading.Event()
    gate.set()
    ref = _Blocking.start(gate)
    timers = Timers(clock, name="jr2-test-timers")
    try:
        timers.schedule(30 * 24 * 3600.0, lambda: None, "a month away")
        with pytest.raises(Stalled) as stalled:
            clock.run_until(lambda: False, within=3600)
        text = str(stalled.value)
        assert "_Blocking blocker" in text and "a month away" in text
        assert clock.monotonic() == 0.0  # it did not wait out the horizon: it failed at once
    finally:
        ref.stop()
        timers.stop()


def test_run_until_jumps_from_timer_to_timer_until_the_predicate_holds() -> None:
    clock = VirtualClock(settle=True)
    timers = Timers(clock)
    seen: list[float] = []

    def again() -> None:
        seen.append(clock.monotonic())
        timers.schedule(clock.monotonic() + 300, again, "the renewal")
    try:
        timers.schedule(300.0, again, "the renewal")
        clock.run_until(lambda: len(seen) >= 288)  # a day of renewals every five minutes
        assert seen[-1] == 24 * 3600.0 and clock.monotonic() == 24 * 3600.0
    finally:
        timers.stop()


def test_an_undriven_virtual_clock_still_jumps_at_once() -> None:
    clock = VirtualClock()
    gate = threading.Event()
    ref = _Blocking.start(gate)
    try:
        ref.tell("busy")
        clock.advance(5)  # no settling: the actor mid-message does not hold it
        assert clock.monotonic() == 5.0
    finally:
        gate.set()
        ref.stop()


class _Node:
    def __init__(self, mark: pytest.Mark | None) -> None:
        self.mark = mark

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self.mark if name == "jr2_fake_cluster" else None


class _Request:
    def __init__(self, mark: pytest.Mark | None) -> None:
        self.node = _Node(mark)


def test_the_fixture_takes_time_virtual_and_refuses_what_it_does_not_know() -> None:
    def options(mark: pytest.Mark | None) -> dict[str, Any]:
        return _time_options(cast(pytest.FixtureRequest, _Request(mark)))

    assert options(None) == {} and options(pytest.mark.jr2_fake_cluster(time="real").mark) == {}
    clock = options(pytest.mark.jr2_fake_cluster(time="virtual").mark)["clock"]
    assert isinstance(clock, VirtualClock) and clock.settle
    with pytest.raises(pytest.UsageError, match="time is one of"):
        options(pytest.mark.jr2_fake_cluster(time="fast").mark)
    with pytest.raises(pytest.UsageError, match=r"not \['tick'\]"):
        options(pytest.mark.jr2_fake_cluster(tick=1).mark)
