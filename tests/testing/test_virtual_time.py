"""The driven VirtualClock (testing/clock.py): timers fire in order at their own times, `upcoming()` says who
set each, "nothing under way" sees an actor mid-message, a pool job and a request served, and a wait for
what cannot come fails at once with what every actor waits for."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, cast

import pykka
import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.shell import Deadline, Shell, Timers
from jr2_actors.shell.activity import HARNESS_SENT, HARNESS_SERVED, SERVED
from jr2_actors.shell.clock import pause
from jr2_actors.shell.pools import CountedPool
from jr2_actors.testing.activity import Activity
from jr2_actors.testing.clock import NeverIdle, Stalled, VirtualClock
from jr2_actors.testing.pytest_plugin import _time_options
from jr2_actors.values.constants import PROVISION_BUDGET_SECONDS, RETENTION_SECONDS, SWEEP_INTERVAL_SECONDS
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.workspace.renewals import RenewalLane
from tests.support.waiting import wait_until
from tests.support.workflows import one_state


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


# -- fewer jumps: a deadline pushed on lazily, one jump for an instant's timers ----------------------------

class _Counting(Shell):
    """An actor that counts the messages it gets."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[object] = []

    def on_receive(self, message: Any) -> Any:
        self.got.append(message)
        return None


@pytest.fixture
def stall_bound() -> Iterator[tuple[VirtualClock, Deadline, pykka.ActorRef[Any]]]:
    """A driven clock, and a stall bound as the watch keeps one (`keep_earlier`) telling a counting actor."""
    clock = VirtualClock(settle=True)
    timers = Timers(clock, name="jr2-test-timers")
    ref = _Counting.start()
    try:
        yield clock, Deadline(timers, ref, _Ping(), keep_earlier=True), ref
    finally:
        ref.stop()
        timers.stop()


def test_a_deadline_pushed_on_by_every_step_fires_once_when_no_step_came_for_the_whole_bound(
        stall_bound: tuple[VirtualClock, Deadline, pykka.ActorRef[Any]]) -> None:
    """A stall bound re-armed at each frame (90 s from the last one) never comes due while frames come
    every 60 s: the clock does not jump to it (it used to, once a frame, and the core re-armed it)."""
    clock, deadline, ref = stall_bound
    deadline.arm(90.0)
    for frame_at in (60.0, 120.0, 180.0):
        clock.advance(frame_at - clock.monotonic())
        deadline.arm(frame_at + 90)  # the step after each frame
    assert [u.at for u in clock.upcoming()] == [270.0]
    clock.advance(89)
    assert ref.proxy().got.get() == []  # at 90, 150 and 210 nothing fired
    clock.advance(1)
    assert [type(m) for m in ref.proxy().got.get()] == [_Ping]


def test_a_deadline_re_armed_while_its_message_is_on_the_way_is_not_forgotten(
        stall_bound: tuple[VirtualClock, Deadline, pykka.ActorRef[Any]]) -> None:
    """The timer fired and its message waits in the owner's mailbox while another step re-arms the deadline
    (a frame on the watch's I/O thread): that schedules a new timer, and the late message's `fired()` must
    not forget it. It did: the forgotten timer fired on its own later, its message forgot the next one, and
    so on all day (a virtual day of the watch: ~1,050 stray stall-bound jumps, one per bookmark)."""
    clock, deadline, ref = stall_bound
    deadline.arm(90.0)
    clock.advance(90)  # it fires: its message is told
    assert [type(m) for m in ref.proxy().got.get()] == [_Ping]
    deadline.arm(150.0)  # a step that came before the owner took the message: a new timer
    deadline.fired()  # the owner takes the message of the timer that fired before
    deadline.arm(150.0)  # and its step answers the same deadline
    deadline.arm(240.0)  # the next frame pushes it on
    assert [u.at for u in clock.upcoming()] == [240.0]  # one timer, where the deadline is
    clock.advance(149)
    assert len(ref.proxy().got.get()) == 1  # nothing at 150


def test_the_timers_due_at_one_instant_fire_in_one_jump() -> None:
    clock = VirtualClock(settle=True)
    a, b = Timers(clock, name="a"), Timers(clock, name="b")
    fired: list[str] = []
    try:
        a.schedule(60.0, lambda: fired.append("a"))
        b.schedule(60.0, lambda: fired.append("b"))
        b.schedule(60.0, lambda: fired.append("b again"))
        clock.run_until(lambda: len(fired) == 3)
        assert sorted(fired) == ["a", "b", "b again"] and clock.jumps == 1 and clock.monotonic() == 60.0
    finally:
        a.stop()
        b.stop()


# -- a wait for what never comes fails at once -------------------------------------------------------------

def test_run_until_fails_at_once_when_nothing_but_keepalives_is_left() -> None:
    clock = VirtualClock(settle=True)
    timers = Timers(clock, name="fake-watch-timers")

    def bookmark() -> None:
        timers.schedule(clock.monotonic() + 60, bookmark, "watch Sandbox: its bookmark", keepalive=True)
    try:
        bookmark()
        with pytest.raises(Stalled, match="but those that only keep streams alive") as stalled:
            clock.run_until(lambda: False)
        assert "watch Sandbox: its bookmark" in str(stalled.value)
        assert clock.monotonic() == 0.0
    finally:
        timers.stop()


def test_run_until_fails_at_once_when_bookmarks_only_push_a_watchs_stall_bound_on() -> None:
    """A fake cluster and a watch on it: the fake's bookmarks keep pushing the watch's stall bound on (the
    WatchActor marks it `kept` while it watches), so nothing else can ever come. It used to fail only at the
    day's horizon (~1,800 jumps), then after KEPT_ALIVE_JUMPS bookmarks; now before the first jump."""
    clock = VirtualClock(settle=True)
    with FakeCluster(namespace="jr2", clock=clock) as cluster:
        ref = WatchActor.start(cluster.client(), clock=clock)
        try:
            with pytest.raises(Stalled, match="but those that only keep streams alive") as stalled:
                clock.run_until(lambda: False)
            assert "WatchActor" in str(stalled.value) and "its bookmark" in str(stalled.value)
            assert "_Tick" in str(stalled.value)  # the stall bound, among the next timers it names
            assert clock.monotonic() == 0.0 and clock.jumps == 0
        finally:
            ref.stop()


# -- waits of threads that are no timer's, on the virtual clock ---------------------------------------------

def test_a_pause_on_a_driven_clock_is_a_timer_the_clock_jumps_to() -> None:
    clock = VirtualClock(settle=True)
    stop, done = threading.Event(), threading.Event()
    woke: list[float] = []

    def backoff() -> None:
        woke.append(float(pause(clock, 3600.0, stop, what="a revival's backoff")))
        woke.append(clock.monotonic())
        done.set()
    threading.Thread(target=backoff, daemon=True).start()
    wait_until(lambda: any("a revival's backoff" in u.what for u in clock.upcoming()), timeout=10,
               what="the pause on the clock")
    clock.run_until(done.is_set)
    assert woke == [0.0, 3600.0]


def test_a_pause_ends_at_once_when_stopped() -> None:
    clock = VirtualClock(settle=True)
    stop = threading.Event()
    stop.set()
    assert pause(clock, 3600.0, stop, what="stopping") is True and clock.monotonic() == 0.0


@pytest.mark.jr2_fake_cluster(time="virtual")
def test_injected_latency_takes_the_virtual_clock_not_the_real_one(jr2_fake_cluster: FakeCluster) -> None:
    clock = jr2_fake_cluster.clock
    assert isinstance(clock, VirtualClock)
    client = jr2_fake_cluster.client()
    answered = threading.Event()
    jr2_fake_cluster.faults.latency(600.0)  # ten minutes a request: the old real wait outlasted the clock's 10 s
    began = clock.monotonic()
    def listing() -> None:
        client.list(SANDBOX, "jr2")
        answered.set()
    threading.Thread(target=listing, daemon=True).start()
    # The test's own thread is no part the clock watches: until its request reaches the fake and is parked
    # there, the clock sees nothing under way (a thread slow to start under load let it give up, Stalled at 0).
    wait_until(lambda: any(w.startswith(SERVED) for w in clock.activity.parked()), what="the request parked")
    clock.run_until(answered.is_set)
    assert clock.monotonic() - began >= 600.0
    client.close()


@pytest.mark.jr2_fake_cluster(time="virtual")
@pytest.mark.parametrize("runner", ["pool", "lane"])
def test_injected_latency_on_a_pools_job_takes_the_virtual_clock(jr2_fake_cluster: FakeCluster, runner: str) -> None:
    """A Workspace's write runs on the kube pool, its renewal on the renewal lane: a request the fake holds
    for its latency is parked on the clock, and the pool's job waiting on it must not hold the clock still
    (it raised NeverIdle after 10 s of real time, found by review)."""
    clock = jr2_fake_cluster.clock
    assert isinstance(clock, VirtualClock)
    client = jr2_fake_cluster.client()
    answered = threading.Event()
    jr2_fake_cluster.faults.latency(600.0)
    began = clock.monotonic()

    def listing() -> None:
        client.list(SANDBOX, "jr2")
        answered.set()
    if runner == "pool":
        pool = CountedPool(2, thread_name_prefix="jr2-test-kube", clock=clock)
        pool.submit(listing)
        stop: Callable[[], None] = partial(pool.shutdown, wait=True)
    else:
        lane = RenewalLane(clock=clock, threads=1)
        lane.hold(SandboxKey("run-l", "F-1"), lambda wall, stamp: listing(), clock.monotonic(), 10**6)
        stop = lane.shutdown
    try:
        clock.run_until(answered.is_set)
        assert clock.monotonic() - began >= 600.0
    finally:
        stop()
        client.close()


# -- workflows through the fixtures on virtual time --------------------------------------------------------



def _status(orchestrator: Orchestrator, run_id: str) -> object:
    return (orchestrator.status(run_id) or {}).get("status")


def _finished(orchestrator: Orchestrator, run_id: str) -> Any:
    return lambda: _status(orchestrator, run_id) in ("done", "failed", "cancelled", "error")


@pytest.mark.jr2_fake_cluster(time="virtual")
@pytest.mark.jr2_agents(pick_first=True)
def test_a_sandbox_never_ready_fails_its_workspace_at_the_provisioning_budget(
        jr2_orchestrator: Orchestrator, jr2_fake_cluster: FakeCluster) -> None:
    clock = jr2_fake_cluster.clock
    assert isinstance(clock, VirtualClock)
    jr2_fake_cluster.operate(lambda core, now: setattr(core, "start_seconds", 10 * 24 * 3600.0))  # placed, never Ready
    run_id = jr2_orchestrator.submit(read_document(one_state("never-ready", after=3600)))
    clock.run_until(_finished(jr2_orchestrator, run_id))
    status = jr2_orchestrator.status(run_id) or {}
    assert status["status"] == "error" and f"not Ready {PROVISION_BUDGET_SECONDS:.0f}s after" in status["fault"]
    assert status["durationSeconds"] == PROVISION_BUDGET_SECONDS  # the budget on the virtual clock, to the second


@pytest.mark.slow  # a virtual week is ~2,400 jumps and as many leaps: seconds of wall time
@pytest.mark.jr2_fake_cluster(time="virtual")
@pytest.mark.jr2_agents(worker=[[Hang()]])
def test_an_after_of_a_week_then_the_seven_day_sweep(jr2_orchestrator: Orchestrator,
                                                    jr2_fake_cluster: FakeCluster) -> None:
    clock = jr2_fake_cluster.clock
    assert isinstance(clock, VirtualClock)
    week = 7 * 24 * 3600
    began = clock.monotonic()
    run_id = jr2_orchestrator.submit(read_document(one_state("a-week", after=week)))
    clock.run_until(_finished(jr2_orchestrator, run_id), within=week + 3600)
    assert _status(jr2_orchestrator, run_id) == "failed" and clock.monotonic() - began >= week
    ended = clock.monotonic()
    clock.run_until(lambda: jr2_orchestrator.status(run_id) is None,
                    within=RETENTION_SECONDS + 2 * SWEEP_INTERVAL_SECONDS)
    assert RETENTION_SECONDS <= clock.monotonic() - ended <= RETENTION_SECONDS + SWEEP_INTERVAL_SECONDS + 1


def test_a_harness_request_the_fake_harness_parks_is_parked_with_it() -> None:
    """The attach pool's job sending to a fake Harness that holds its answer on the clock (an injected
    latency) is judged by its HarnessClient request, which the fake's parked one excuses, as a KubeClient
    request is by the fake API's."""
    under_way = Activity()
    with under_way.busy(f"{HARNESS_SENT}POST /ws-1/answers"):
        assert under_way.under_way() == [f"{HARNESS_SENT}POST /ws-1/answers"]
        with under_way.busy(f"{HARNESS_SERVED}POST /ws-1/answers") as served, served.waiting(lambda: False):
            assert under_way.under_way() == []
        with under_way.busy(f"{HARNESS_SERVED}POST /ws-2/answers") as other, other.waiting(lambda: False):
            assert under_way.under_way() == [f"{HARNESS_SENT}POST /ws-1/answers"]  # another request's park
