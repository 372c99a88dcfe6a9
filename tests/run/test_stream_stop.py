"""Leaving a quiet stream at once: `until_stopped` for the commands that follow one, and `FeedHub.interrupt`
for the API that stops while followers wait."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from jr2_actors.commands.common import until_stopped
from jr2_actors.run.feed.hub import FeedHub, FeedRead
from jr2_actors.run.feed.lines import FeedEvent, SaidLine

BLOCKED = 600.0  # far longer than any test: only the behaviour under test can end the wait
WAIT = 10.0  # how long a test waits for that behaviour before it fails


def quiet(first: list[int], release: threading.Event) -> Iterator[int]:
    """Yields `first`, then blocks as a stream between heartbeats does."""
    yield from first
    release.wait(BLOCKED)


def test_items_pass_through_in_order_and_the_end_ends_it() -> None:
    assert list(until_stopped(iter([1, 2, 3]), threading.Event())) == [1, 2, 3]


def test_a_stop_leaves_a_blocked_stream_without_waiting_for_its_next_item() -> None:
    stop, release = threading.Event(), threading.Event()
    got = until_stopped(quiet([7], release), stop)
    assert next(got) == 7
    rest: list[int] = []
    done = threading.Event()

    def drain() -> None:
        rest.extend(got)
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    stop.set()
    assert done.wait(WAIT), "the reader waited for the blocked source instead of leaving on the stop"
    assert rest == [] and not release.is_set()  # left although the source is still blocked
    release.set()


def test_what_the_source_raises_is_raised_to_the_reader() -> None:
    def broken() -> Iterator[int]:
        yield 1
        raise ValueError("the feed broke off")

    got = until_stopped(broken(), threading.Event())
    assert next(got) == 1
    with pytest.raises(ValueError, match="broke off"):
        next(got)


def test_an_interrupt_wakes_every_reader_and_the_hub_stays_open() -> None:
    hub = FeedHub()
    hub.publish("r-1", [FeedEvent(1, 0.0, SaidLine("coder", 1, "hi"))])
    woke = threading.Event()
    answers: list[FeedRead] = []

    def reader() -> None:
        answers.append(hub.read("r-1", 1, BLOCKED))  # nothing after id 1: only an interrupt ends this wait
        woke.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    # A reader that has not started waiting when an interrupt comes misses it: interrupt until it wakes,
    # for at most WAIT seconds in all.
    deadline = threading.Event()
    timer = threading.Timer(WAIT, deadline.set)
    timer.start()
    hub.interrupt()
    while not woke.wait(0.05) and not deadline.is_set():
        hub.interrupt()
    timer.cancel()
    assert woke.is_set(), "no interrupt woke the reader"
    assert answers == [FeedRead([], False)]  # woken with what it has, and not told the run finished
    hub.publish("r-1", [FeedEvent(2, 0.0, SaidLine("coder", 1, "more"))])
    assert [e.id for e in hub.read("r-1", 1, 0.0)[0]] == [2]  # still open
