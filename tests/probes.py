"""Recipients for actor tests: an inbox that records every message, and a pykka actor feeding it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pykka

from tests.waiting import WAIT


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
