"""`shell/switch_interval.py`: a function runs under its own interpreter switch interval, and the process's own
comes back when the last such function of the process returns, however their runs overlap."""

from __future__ import annotations

import sys
import threading

import pytest

from jr2_actors.shell.switch_interval import switch_interval
from tests.support.switch_interval import OWN
from tests.support.waiting import WAIT

TUNED = 0.04


def test_an_exception_gives_the_processs_interval_back(own_interval: float) -> None:
    seen: list[float] = []

    @switch_interval(TUNED)
    def fails() -> int:
        seen.append(sys.getswitchinterval())
        raise RuntimeError("failed")

    with pytest.raises(RuntimeError):
        fails()
    assert seen == [pytest.approx(TUNED, abs=1e-5)]
    assert sys.getswitchinterval() == pytest.approx(OWN, abs=1e-5)


def test_overlapping_runs_keep_the_interval_until_the_last_returns(own_interval: float) -> None:
    entered = [threading.Event(), threading.Event()]
    go = [threading.Event(), threading.Event()]

    def one(i: int) -> int:
        entered[i].set()
        assert go[i].wait(WAIT)
        return 0

    tuned = switch_interval(TUNED)(one)
    first = threading.Thread(target=tuned, args=(0,), daemon=True)
    second = threading.Thread(target=tuned, args=(1,), daemon=True)
    first.start()
    assert entered[0].wait(WAIT)
    second.start()
    assert entered[1].wait(WAIT)
    go[0].set()  # the first returns while the second still serves
    first.join(WAIT)
    assert not first.is_alive()
    assert sys.getswitchinterval() == pytest.approx(TUNED, abs=1e-5)
    go[1].set()
    second.join(WAIT)
    assert not second.is_alive()
    assert sys.getswitchinterval() == pytest.approx(OWN, abs=1e-5)
