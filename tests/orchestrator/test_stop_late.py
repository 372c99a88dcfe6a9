"""What a stop leaves past its budget is said in one line, whatever the count: thousands of lines, one per
actor left, each took the GIL from the actors still stopping and made a SIGTERM under load slower still."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from jr2_actors.shell import Shell
from jr2_actors.shell.stopping import Stops
from jr2_actors.values.constants import SERVE_STOP_SECONDS


class _Held(Shell):
    def __init__(self, hold: threading.Event, index: int) -> None:
        super().__init__()
        self.hold = hold
        self.name = f"held-{index}"

    def cleanup(self) -> None:
        self.hold.wait(SERVE_STOP_SECONDS)


def test_the_actors_left_past_the_budget_are_named_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    hold = threading.Event()
    refs = [_Held.start(hold, i) for i in range(12)]
    stops = Stops(now=lambda: 100.0)  # the ledger's clock is past the deadline: nothing is waited for
    try:
        stops.ask(refs)
        with caplog.at_level(logging.ERROR, logger="jr2_actors.shell.stopping"):
            late = stops.wait(deadline=50.0)
    finally:
        hold.set()
    assert len(late) == 12
    lines = [r.getMessage() for r in caplog.records if r.name == "jr2_actors.shell.stopping"]
    assert len(lines) == 1, lines
    assert lines[0].startswith("12 actor(s) did not stop within the stop's budget")
    assert lines[0].endswith("and 7 more")


def test_a_stop_that_ends_in_time_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    hold = threading.Event()
    hold.set()
    stops = Stops()
    stops.ask([_Held.start(hold, i) for i in range(3)])
    with caplog.at_level(logging.ERROR, logger="jr2_actors.shell.stopping"):
        assert stops.wait(deadline=time.monotonic() + SERVE_STOP_SECONDS) == []
    assert not [r for r in caplog.records if r.name == "jr2_actors.shell.stopping"]


def test_the_stop_waits_once_for_many_actors_not_once_for_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """The waiter sleeps until the last of them ended: it looks at no actor's own future, each a wake-up that
    queued for the GIL behind the thousands of actors the stop had just asked (20 s at 5,000 runs)."""
    import pykka

    looks: list[object] = []
    real_get = pykka.ThreadingFuture.get

    def get(self: pykka.ThreadingFuture[object], *, timeout: float | None = None) -> object:
        looks.append(self)
        return real_get(self, timeout=timeout)

    monkeypatch.setattr(pykka.ThreadingFuture, "get", get)
    hold = threading.Event()
    refs = [_Held.start(hold, i) for i in range(30)]
    stops = Stops()
    stops.ask(refs)
    waiter = threading.Thread(target=lambda: late.extend(stops.wait(time.monotonic() + SERVE_STOP_SECONDS)))
    late: list[str] = []
    waiter.start()
    hold.set()
    waiter.join(SERVE_STOP_SECONDS)
    assert not waiter.is_alive() and late == []
    assert not any(ref.is_alive() for ref in refs)
    assert looks == []
