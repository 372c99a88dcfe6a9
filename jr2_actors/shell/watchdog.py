"""`past_budget`: the watchdog that ends a process whose stop has passed its budget (serve's SIGTERM: 10 s)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from jr2_actors.shell import hard_exit
from jr2_actors.shell.hard_exit import HardExit
from jr2_actors.values.constants import STOP_HARD_EXIT_MARGIN_SECONDS, STOP_WATCHDOG_MARGIN_SECONDS

log = logging.getLogger("jr2_actors.shell.stopping")


class Watchdog:
    """The stop's two watchdogs: the interpreter's timer, which says why in one line, and — with `hard` — the
    native one a little later, for when no Python thread can run to say it."""

    def __init__(self, timer: threading.Timer, native: HardExit | None) -> None:
        self.timer, self.native = timer, native

    def cancel(self) -> None:
        self.timer.cancel()
        if self.native is not None:
            self.native.cancel()

    def join(self, timeout: float | None = None) -> None:
        self.timer.join(timeout)

    def is_alive(self) -> bool:
        return self.timer.is_alive()


def past_budget(budget: float, exit: Callable[[int], object] = os._exit, *, hard: bool = False) -> Watchdog:
    """A watchdog for a process's stop: past `budget` seconds from now it says so in one line and ends the
    process, exit 0 (a SIGTERM's stop is a clean stop to Kubernetes). Each bound of the stop is kept by the
    stop's own waits, but under thousands of runnable threads the stopping thread may wait seconds for the
    interpreter lock between them (49 s once at 5,000 runs mid-Turn), and so may this timer's thread (65 s once):
    `hard` also arms a native exit (`shell/hard_exit.py`) `STOP_HARD_EXIT_MARGIN_SECONDS` before the budget,
    which needs no Python thread to run. Ending there is safe: ADR-0065 writes a run's step before its side
    effect, so every accepted run restores from its last saved step, as after a SIGKILL (the crash trials)."""
    def end() -> None:
        log.error("the stop passed its %gs budget: ending the process now; every accepted run restores from "
                  "its last saved step at the next start", budget)
        for handler in logging.getLogger().handlers:
            handler.flush()
        exit(0)

    # The native exit first: starting the timer's thread waits for that thread to run, which under thousands
    # of waking threads may take longer than the budget.
    native = hard_exit.arm(budget - STOP_HARD_EXIT_MARGIN_SECONDS) if hard else None
    timer = threading.Timer(max(budget - STOP_WATCHDOG_MARGIN_SECONDS, 0.0), end)
    timer.daemon = True
    timer.name = "jr2-stop-watchdog"
    timer.start()
    return Watchdog(timer, native)
