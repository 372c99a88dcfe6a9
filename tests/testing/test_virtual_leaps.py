"""Issue 20 item 6: `run_until` crosses a span in which only keepalives would fire (the fake's bookmarks and
watch timeouts, and the stall bound they push on) in one leap; the stream stays open and never goes silent,
a stalled stream is still caught at its stall bound, and `advance` still fires every keepalive."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.shell import Timers
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.constants import STALL_BOUND_SECONDS, WATCH_TIMEOUT_SECONDS
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.watch.messages import Health, Register, WatchHealth
from tests.support.probes import Inbox

HOURS = 3 * 3600.0


@pytest.fixture
def watched() -> Iterator[tuple[VirtualClock, FakeCluster, pykka.ActorRef[Any], Timers]]:
    clock = VirtualClock(settle=True)
    with FakeCluster(namespace="jr2", clock=clock) as cluster:
        client = cluster.client()
        ref = WatchActor.start(client, clock=clock)
        work = Timers(clock, name="test-work")  # what a test waits on: no keepalive
        try:
            clock.wait_idle()
            yield clock, cluster, ref, work
        finally:
            work.stop()
            ref.stop()
            client.close()


def health(ref: pykka.ActorRef[Any]) -> WatchHealth:
    answer = ref.ask(Health(), timeout=10)
    assert isinstance(answer, WatchHealth)
    return answer


def test_three_hours_of_keepalives_only_are_one_leap_and_the_watch_never_reopens(
        watched: tuple[VirtualClock, FakeCluster, pykka.ActorRef[Any], Timers]) -> None:
    clock, cluster, ref, work = watched
    came = threading.Event()
    work.schedule(clock.monotonic() + HOURS, came.set, "three hours on")
    opened, jumps = cluster.watch_stats()["opened"], clock.jumps
    clock.run_until(came.is_set)
    assert clock.monotonic() == HOURS
    assert clock.leaps >= 1 and clock.jumps - jumps == 1  # one leap, then the jump to the timer worth it
    assert cluster.watch_stats()["opened"] == opened  # was one re-open per 240 s timeout: 45 in three hours
    state = health(ref)
    assert (state.phase, state.failures) == ("watching", 0)  # never silent for its stall bound
    upcoming = {u.what: u.at for u in clock.upcoming()}
    bookmark = next(at for what, at in upcoming.items() if "its bookmark" in what)
    stall = next(at for what, at in upcoming.items() if "jr2-watch-timers" in what)
    assert HOURS < bookmark < stall <= HOURS + STALL_BOUND_SECONDS  # moved on with the leap, in their order


def test_a_stalled_watch_is_caught_at_its_stall_bound_not_leapt_over(
        watched: tuple[VirtualClock, FakeCluster, pykka.ActorRef[Any], Timers]) -> None:
    clock, cluster, ref, work = watched
    began, opened = clock.monotonic(), cluster.watch_stats()["opened"]
    cluster.stall_watches()  # sends nothing, bookmarks included: no keepalive pushes the stall bound on
    work.schedule(began + HOURS, lambda: None, "three hours on")
    clock.run_until(lambda: cluster.watch_stats()["opened"] > opened)  # given up on, re-listed, watched anew
    assert clock.monotonic() - began == STALL_BOUND_SECONDS  # at the bound, not at the next timer worth it
    assert health(ref).phase == "watching"


def test_advance_still_fires_every_keepalive_on_the_way(
        watched: tuple[VirtualClock, FakeCluster, pykka.ActorRef[Any], Timers]) -> None:
    clock, cluster, ref, _ = watched
    opened = cluster.watch_stats()["opened"]
    clock.advance(4 * WATCH_TIMEOUT_SECONDS + 1)
    assert cluster.watch_stats()["opened"] - opened == 4  # each timeout, then the re-open
    assert clock.leaps == 0 and health(ref).failures == 0


def test_a_leap_moves_the_stall_bound_in_the_shell_and_a_step_that_is_no_progress_keeps_it_there(
        watched: tuple[VirtualClock, FakeCluster, pykka.ActorRef[Any], Timers]) -> None:
    """The watch's machine keeps rows about the API server only: the leap's span is held by its shell,
    through every step after it that is no progress (here a registration), and a stall is still caught."""
    from jr2_actors.watch import stream

    assert not hasattr(stream, "KeptAlive")
    clock, cluster, ref, work = watched
    came = threading.Event()
    work.schedule(clock.monotonic() + HOURS, came.set, "three hours on")
    clock.run_until(came.is_set)
    assert clock.leaps >= 1
    opened = cluster.watch_stats()["opened"]
    ref.tell(Register(SandboxKey("run-x", "F-1"), Inbox()))  # steps the core; its deadline is hours ago
    clock.wait_idle()  # a stall bound armed back in the past would fire now, and the watch re-list
    assert cluster.watch_stats()["opened"] == opened and health(ref).failures == 0
    began = clock.monotonic()
    cluster.stall_watches()
    clock.run_until(lambda: cluster.watch_stats()["opened"] > opened)
    assert 0 < clock.monotonic() - began <= STALL_BOUND_SECONDS  # at the bound the leap moved on


def test_a_fake_watchs_timer_moves_at_the_leap_and_its_loop_counts_the_span_with_its_next_reading() -> None:
    """The reviewer's race: a loop that woke on its own just as the clock leapt must not read the clock past
    the leap without it (it would end its watch early, or send a bookmark the span then pushes on twice)."""
    from jr2_actors.fake.apiserver.stream_items import Frames, Wake

    clock = VirtualClock(settle=True)
    timers = Timers(clock, name="fake-watch-timers")
    try:
        wake = Wake(timers, Frames(), "watch Sandbox")
        wake.arm(60.0, "bookmark")
        wake.leap(1000.0)
        assert [u.at for u in clock.upcoming()] == [1060.0]
        clock.advance(1000.0)  # the jump right after the leap
        assert wake.now(clock) == (1000.0, 1000.0)  # the time past the leap comes with the leap itself
        assert wake.now(clock) == (1000.0, 0.0)  # and only once
    finally:
        timers.stop()
