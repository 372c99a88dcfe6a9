"""`Stops`: a stop that asks every actor at once and waits once, within one deadline.

Asked one after another, N actors each busy with a message cost N stops; asked together they cost the
slowest one. A stopping actor's children (a run's seats and Workspaces) are asked by their parent, on the
parent's thread, so the parent hands their futures here (`handed`) while the ledger is open (`open()`, from
the start of the process's stop): whoever stops the process then waits for them too, in the same deadline.
Outside a stop the ledger keeps nothing (a run that ends on its own stops its children without anyone
waiting). Whatever has not stopped when the deadline passes is named in the log and left: the actors' threads
are daemons, so one that hangs cannot hold the process past its budget.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pykka

from jr2_actors.shell.mailbox import label

log = logging.getLogger(__name__)

_LEFT = threading.Event()  # some stop of this process left actors past its budget


def left_behind() -> bool:
    """Whether a stop of this process left actors still stopping past its budget (their threads live on)."""
    return _LEFT.is_set()


class Stops:
    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._open = False
        self._asked: list[tuple[str, pykka.Future[Any]]] = []

    def open(self) -> None:
        """From now on children handed in are waited for by `wait`."""
        with self._lock:
            self._open = True

    def ask(self, refs: Iterable[pykka.ActorRef[Any]]) -> None:
        """Ask each actor to stop now (none is waited for here)."""
        asked = [(label(ref), ref.stop(block=False)) for ref in refs]
        with self._lock:
            self._asked.extend(asked)

    def handed(self, refs: Iterable[pykka.ActorRef[Any]]) -> None:
        """A stopping actor's children: asked to stop now, and waited for by the stop under way, if any."""
        asked = [(label(ref), ref.stop(block=False)) for ref in refs]
        with self._lock:
            if self._open:
                self._asked.extend(asked)

    def wait(self, deadline: float) -> list[str]:
        """Wait for every stop asked or handed so far (and those handed meanwhile) until `deadline` (on this
        ledger's clock); the actors that had not stopped by then, named in one log line (thousands of lines,
        each taking the GIL from the actors still stopping, would cost the exit more than the wait itself)."""
        late: list[str] = []
        while True:
            with self._lock:
                asked, self._asked = self._asked, []
            if not asked:
                break
            for name, future in asked:
                try:
                    future.get(timeout=max(deadline - self._now(), 0.0))  # past the deadline: a look, no wait
                except pykka.Timeout:
                    late.append(name)
        if late:
            _LEFT.set()
            log.error("%d actor(s) did not stop within the stop's budget and are left (daemon threads): %s",
                      len(late), _named(late))
        return late


def _named(names: list[str], shown: int = 5) -> str:
    """The first few names and how many more: a line that stays one line at any load."""
    head = ", ".join(names[:shown])
    return head if len(names) <= shown else f"{head} and {len(names) - shown} more"
