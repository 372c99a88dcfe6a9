"""A stop cancels the seats' jobs still queued on the shared pool: a cancelled job is the stop's doing, not a
failure, so it logs nothing (under load a stop cancelled ~2,000 and logged a traceback for each)."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from jr2_actors.agent.jobs import log_escaped


def test_a_cancelled_job_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()
    pool = ThreadPoolExecutor(1)
    try:
        pool.submit(gate.wait, 10)  # holds the one worker: what follows stays queued
        queued = pool.submit(lambda: None)
        with caplog.at_level(logging.DEBUG):
            queued.add_done_callback(log_escaped)
            pool.shutdown(wait=False, cancel_futures=True)
    finally:
        gate.set()
        pool.shutdown(wait=True)
    assert queued.cancelled()
    assert caplog.records == []


def test_a_job_that_raised_past_its_handler_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> None:
        raise RuntimeError("past its handler")

    with ThreadPoolExecutor(1) as pool, caplog.at_level(logging.ERROR):
        future = pool.submit(boom)
        future.exception(10)  # waits for it to end
        future.add_done_callback(log_escaped)  # done already: called at once, here
    assert [r.getMessage() for r in caplog.records] == [
        "an agent job raised past its own handler: RuntimeError('past its handler')"]
