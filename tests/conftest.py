from __future__ import annotations

import subprocess
import weakref
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from jr2_actors.fake.cluster import FakeCluster

# Every process a test starts, so none outlives it: a test that fails (or a serve slow to stop under load)
# before its own cleanup would otherwise leave a `serve` running after the suite.
_STARTED: weakref.WeakSet[subprocess.Popen[Any]] = weakref.WeakSet()
_popen_init = subprocess.Popen.__init__


def _recorded_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
    _popen_init(self, *args, **kwargs)
    _STARTED.add(self)


subprocess.Popen.__init__ = _recorded_init  # type: ignore[method-assign]


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(namespace="jr2", bookmark_interval=0.2, operator=False) as c:
        yield c


@pytest.fixture(autouse=True)
def _no_actor_outlives_a_test() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=10)


@pytest.fixture(autouse=True)
def _no_process_outlives_a_test() -> Iterator[None]:
    yield
    for proc in list(_STARTED):
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        _STARTED.discard(proc)
