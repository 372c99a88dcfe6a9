"""A seat still running when a stop closed the jobs' pool (one left past the budget under load) drops the job
it would have run: the process is stopping. It used to die of the pool's RuntimeError, a traceback and an
`ActorFault` for each seat."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

from jr2_actors.agent.actor import AgentActor
from jr2_actors.agent.messages import StartTurn
from jr2_actors.shell import Timers
from jr2_actors.testing.clock import VirtualClock
from tests.support.probes import Inbox


def test_a_seat_whose_pool_the_stop_closed_drops_its_job_and_lives(caplog: pytest.LogCaptureFixture) -> None:
    clock = VirtualClock()
    timers = Timers(clock)
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    inbox = Inbox()
    ref = AgentActor.start("coder", parent=inbox, pool=pool, clock=clock, timers=timers)
    try:
        with caplog.at_level(logging.INFO):
            ref.tell(StartTurn(1, "c-1", "http://127.0.0.1:9/_instance", "t" * 32))  # asks its read at once
            ref.ask(None, timeout=10)  # a barrier: the StartTurn was handled
        assert ref.is_alive()
        assert not inbox.messages
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    finally:
        ref.stop(timeout=10)
        timers.stop()
