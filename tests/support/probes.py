"""Recipients for actor tests: an inbox that records every message, and a pykka actor feeding it; and a way
to make any actor die of "our bug" on cue."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pykka

from jr2_actors.shell import Shell
from jr2_actors.telemetry import Telemetry
from tests.support.waiting import WAIT


class Inbox:
    """A thread-safe record of messages; `wait_for` blocks on a condition with a deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.messages: list[Any] = []

    def tell(self, message: Any) -> None:
        with self._cond:
            self.messages.append(message)
            self._cond.notify_all()

    def snapshot(self) -> list[Any]:
        with self._cond:
            return list(self.messages)

    def wait_for(self, predicate: Callable[[list[Any]], bool], timeout: float = WAIT, what: str = "messages") -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.messages), timeout):
                raise AssertionError(f"{what} not seen within {timeout}s; got {len(self.messages)} messages")


class Probe(pykka.ThreadingActor):
    """A real actor registered with the WatchActor; it forwards what it receives to an Inbox."""

    def __init__(self, inbox: Inbox) -> None:
        super().__init__()
        self.inbox = inbox

    def on_receive(self, message: Any) -> None:
        self.inbox.tell(message)


CRASH = "crash now"  # a message only `crashing` subclasses take: each raises on it, as our bug would

A = TypeVar("A", bound=pykka.ThreadingActor)


def crashing(cls: type[A]) -> type[A]:
    """`cls`, raising in the middle of one message — the base's failure path is the real one."""

    class Crashing(cls):  # type: ignore[valid-type, misc]
        def on_receive(self, message: Any) -> Any:
            if message == CRASH:
                raise RuntimeError("our bug, mid-message")
            return super().on_receive(message)

    Crashing.__name__ = cls.__name__
    return Crashing


class Gated(Shell):
    """Blocks on `gate` while it handles its first message: everything told after that waits."""

    def __init__(self, gate: threading.Event, telemetry: Telemetry, name: str = "",
                 taken: threading.Event | None = None) -> None:
        super().__init__(telemetry=telemetry)
        self.gate = gate
        self.taken = taken or threading.Event()
        self.name = name

    def on_receive(self, message: Any) -> Any:
        self.taken.set()
        self.gate.wait(30)
        return message
