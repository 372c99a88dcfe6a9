"""serve runs under `SERVE_SWITCH_INTERVAL_SECONDS` (thousands of threads wait for the interpreter lock, and each
waiter wakes once an interval to ask for it), and gives the process its own interval back when it ends: serve
runs inside a test's process too, and an embedding process keeps its own."""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

import pytest

from jr2_actors import orchestrator
from jr2_actors.commands import serve
from jr2_actors.values.constants import SERVE_SWITCH_INTERVAL_SECONDS
from tests.support.switch_interval import OWN


class _Seen(Exception):
    pass


def test_serve_runs_under_its_switch_interval_and_gives_the_processs_back(
        own_interval: float, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []

    def orchestrator_seen(*args: Any, **kwargs: Any) -> None:
        seen.append(sys.getswitchinterval())
        raise _Seen

    monkeypatch.setattr(orchestrator, "Orchestrator", orchestrator_seen)
    args = argparse.Namespace(max_memory=None, max_threads=None, max_runs=None)
    with pytest.raises(_Seen):
        serve._serve(args, threading.Event(), None, token="t", key=b"k", state_dir="/nonexistent", namespace="jr2",
                     listen=("127.0.0.1", 0), sandbox_image="i", instance_harness="", watching="w")
    assert seen == [pytest.approx(SERVE_SWITCH_INTERVAL_SECONDS, abs=1e-5)]
    assert sys.getswitchinterval() == pytest.approx(OWN, abs=1e-5)
    assert SERVE_SWITCH_INTERVAL_SECONDS > 0.005  # above CPython's default: fewer wakes of each waiting thread

