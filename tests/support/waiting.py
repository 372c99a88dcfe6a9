"""Waiting on a condition with a deadline: a timed Event wait, never a sleep standing in for logic."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

WAIT = 10.0


def wait_until(predicate: Callable[[], bool], timeout: float = WAIT, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    tick = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        tick.wait(0.002)
