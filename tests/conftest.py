from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from jr2_actors.fake.cluster import FakeCluster
from tests.support import parallel
from tests.support.processes import kill_what_is_left, record_every_process
from tests.support.switch_interval import at_own_interval

record_every_process()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The suite runs on pytest-xdist workers unless the command line says otherwise (tests/support/parallel.py)."""
    parallel.choose(config)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without it installed, the suite runs serially
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The real-cluster tier on one worker (tests/support/parallel.py)."""
    return parallel.scheduler(config, log)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(namespace="jr2", bookmark_interval=0.2, operator=False) as c:
        yield c


@pytest.fixture
def own_interval() -> Iterator[float]:
    """The process at a switch interval of the test's own (`tests.support.switch_interval.OWN`) for the test."""
    with at_own_interval() as seconds:
        yield seconds


@pytest.fixture(autouse=True)
def _no_actor_outlives_a_test() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=10)


@pytest.fixture(autouse=True)
def _no_process_outlives_a_test() -> Iterator[None]:
    yield
    kill_what_is_left()
