"""`past_budget`: the watchdog that ends a process whose stop has passed its budget (serve's SIGTERM: 10 s)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from jr2_actors.values.constants import STOP_WATCHDOG_MARGIN_SECONDS

log = logging.getLogger("jr2_actors.shell.stopping")


def past_budget(budget: float, exit: Callable[[int], object] = os._exit) -> threading.Timer:
    """A watchdog for a process's stop: past `budget` seconds from now it says so in one line and ends the
    process, exit 0 (a SIGTERM's stop is a clean stop to Kubernetes). Each bound of the stop is kept by the
    stop's own waits, but under thousands of runnable threads the stopping thread may wait seconds for the
    interpreter lock between them (49 s once at 5,000 runs mid-Turn). Ending there is safe: ADR-0065 writes a
    run's step before its side effect, so every accepted run restores from its last saved step, as after a
    SIGKILL (the crash trials)."""
    def end() -> None:
        log.error("the stop passed its %gs budget: ending the process now; every accepted run restores from "
                  "its last saved step at the next start", budget)
        for handler in logging.getLogger().handlers:
            handler.flush()
        exit(0)

    watchdog = threading.Timer(max(budget - STOP_WATCHDOG_MARGIN_SECONDS, 0.0), end)
    watchdog.daemon = True
    watchdog.name = "jr2-stop-watchdog"
    watchdog.start()
    return watchdog
