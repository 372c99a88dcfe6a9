"""A process whose stop left actors past its budget ends at once after `main`: the interpreter's own exit would
take the GIL after each daemon thread still stopping (seconds at thousands of runs, after serve had said it
stopped). One whose stop left nothing exits the usual way."""

from __future__ import annotations

import threading

import pytest

from jr2_actors import cli
from jr2_actors.shell import Shell, stopping
from jr2_actors.shell.stopping import Stops
from jr2_actors.values.constants import SERVE_STOP_SECONDS


class _Held(Shell):
    def __init__(self, hold: threading.Event) -> None:
        super().__init__()
        self.hold = hold

    def cleanup(self) -> None:
        self.hold.wait(SERVE_STOP_SECONDS)


def test_a_stop_that_leaves_an_actor_marks_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopping, "_LEFT", threading.Event())
    hold = threading.Event()
    quick = Stops()
    quick.ask([_Held.start(hold)])
    hold.set()
    quick.wait(deadline=quick._now() + SERVE_STOP_SECONDS)
    assert not stopping.left_behind()
    held = threading.Event()
    late = Stops(now=lambda: 1.0)
    try:
        late.ask([_Held.start(held)])
        assert late.wait(deadline=0.0) == ["_Held"]
    finally:
        held.set()
    assert stopping.left_behind()


@pytest.mark.parametrize("left", [True, False])
def test_the_entry_ends_the_process_at_once_only_when_a_stop_left_actors(
        monkeypatch: pytest.MonkeyPatch, left: bool) -> None:
    ended: list[int] = []

    def end(code: int) -> None:
        ended.append(code)
        raise SystemExit(code)  # os._exit never returns

    monkeypatch.setattr(cli, "main", lambda: 3)
    monkeypatch.setattr(stopping, "left_behind", lambda: left)
    monkeypatch.setattr("jr2_actors.cli.os._exit", end)
    with pytest.raises(SystemExit) as exited:
        cli.entry()
    assert exited.value.code == 3
    assert ended == ([3] if left else [])
