"""The FeedHub's readers wait on their own run: a line of one run wakes only that run's readers, a run forgotten
wakes its readers at once (they read its row), and a stop wakes every reader."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from jr2_actors.run.feed import waits as waits_module
from jr2_actors.run.feed.hub import FeedHub, FeedRead
from jr2_actors.run.feed.lines import FeedEvent, SaidLine
from tests.support.waiting import wait_until

LONG = 30.0  # a reader's wait: far longer than any test here runs


def said(i: int) -> FeedEvent:
    return FeedEvent(i, 0.0, SaidLine("coder", 1, f"line {i}"))


class CountedCondition(threading.Condition):
    """A Condition that counts the waits entered and, at each notify, the waiters it wakes (each call is made
    with the condition's lock held, so `waiting` is exact)."""

    entered = 0
    notified = 0

    def __init__(self, lock: Any = None) -> None:
        super().__init__(lock)
        self.waiting = 0

    def wait(self, timeout: float | None = None) -> bool:
        CountedCondition.entered += 1
        self.waiting += 1
        try:
            return super().wait(timeout)
        finally:
            self.waiting -= 1

    def notify_all(self) -> None:
        CountedCondition.notified += self.waiting
        super().notify_all()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[CountedCondition]:
    CountedCondition.entered = CountedCondition.notified = 0
    # Only the hub's conditions are counted (a thread's start and `wait_until` wait on conditions too).
    monkeypatch.setattr(waits_module, "threading", SimpleNamespace(Condition=CountedCondition))
    return CountedCondition


def reading(hub: FeedHub, run: str, after: int = 0, wait: float = LONG) -> tuple[threading.Thread, list[FeedRead]]:
    got: list[FeedRead] = []
    thread = threading.Thread(target=lambda: got.append(hub.read(run, after, wait)), daemon=True)
    thread.start()
    return thread, got


def test_lines_of_one_run_wake_none_of_the_readers_of_the_others(counted: type[CountedCondition]) -> None:
    hub = FeedHub()
    runs = [f"quiet-{i}" for i in range(20)]
    for run in runs:
        hub.publish(run, [said(1)])
    readers = [reading(hub, run, after=1) for run in runs]
    wait_until(lambda: counted.entered >= len(runs), what="every reader waiting")
    for i in range(2, 102):
        hub.publish("busy", [said(i)])  # a run nobody reads
    assert counted.notified == 0  # one condition for every reader would have woken all 20 at the first
    for run in runs:
        hub.publish(run, [said(2)])
    for thread, got in readers:
        thread.join(10)
        assert not thread.is_alive() and [e.id for e in got[0].events] == [2]
    assert counted.notified == len(runs)  # each reader woken once: by its own run's line


def test_a_forgotten_run_answers_its_readers_at_once(counted: type[CountedCondition]) -> None:
    hub = FeedHub()
    hub.publish("r-1", [said(1)])
    thread, got = reading(hub, "r-1", after=1)
    wait_until(lambda: counted.entered >= 1, what="the reader waiting")
    hub.forget("r-1")
    thread.join(10)
    assert not thread.is_alive() and got == [FeedRead([], False, 0)]  # the caller reads the run's row


@pytest.mark.parametrize("how", ["interrupt", "close"])
def test_interrupt_and_close_wake_every_reader_of_every_run(how: str, counted: type[CountedCondition]) -> None:
    hub = FeedHub()
    for run in ("a", "b"):
        hub.publish(run, [said(1)])
    readers = [reading(hub, run, after=1) for run in ("a", "b", "a")]
    wait_until(lambda: counted.entered >= 3, what="the readers waiting")
    getattr(hub, how)()
    for thread, got in readers:
        thread.join(10)
        assert not thread.is_alive() and got[0].events == []
