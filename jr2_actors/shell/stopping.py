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


# Each actor a stop waits for, by its urn: its loop's end (`ended`, from the shell base) tells its ledger.
_WATCHED: dict[str, Stops] = {}


def ended(urn: str) -> None:
    """An actor's loop has ended (its cleanup done): the stop waiting for it, if any, counts it."""
    ledger = _WATCHED.pop(urn, None)
    if ledger is not None:
        ledger._ended(urn)


class Stops:
    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._all_ended = threading.Condition(self._lock)
        self._open = False
        self._pending: dict[str, str] = {}  # urn → name: asked (or handed) and not ended
        # An actor already stopping when asked may have ended before it was watched: its own future says.
        self._asked: list[tuple[str, pykka.Future[Any]]] = []

    def open(self) -> None:
        """From now on children handed in are waited for by `wait`."""
        with self._lock:
            self._open = True

    def ask(self, refs: Iterable[pykka.ActorRef[Any]]) -> None:
        """Ask each actor to stop now (none is waited for here)."""
        self._stop(refs, watch=True)

    def handed(self, refs: Iterable[pykka.ActorRef[Any]]) -> None:
        """A stopping actor's children: asked to stop now, and waited for by the stop under way, if any."""
        with self._lock:
            watch = self._open
        self._stop(refs, watch=watch)

    def _stop(self, refs: Iterable[pykka.ActorRef[Any]], *, watch: bool) -> None:
        # Watched before asked, so an end right after the ask is counted; the waiter is woken once, by the
        # last end, not once per actor: under load each wake-up of the waiting thread queued for the GIL
        # behind the thousands of actors it had just asked.
        for ref in refs:
            if not watch:
                ref.stop(block=False)
                continue
            name, urn = label(ref), ref.actor_urn
            with self._lock:
                self._pending[urn] = name
            _WATCHED[urn] = self
            if ref.is_alive():
                ref.stop(block=False)
            else:  # stopping already, perhaps ended before it was watched
                _WATCHED.pop(urn, None)
                with self._lock:
                    self._pending.pop(urn, None)
                    self._asked.append((name, ref.stop(block=False)))

    def _ended(self, urn: str) -> None:
        with self._lock:
            if self._pending.pop(urn, None) is not None and not self._pending:
                self._all_ended.notify_all()

    def wait(self, deadline: float) -> list[str]:
        """Wait for every stop asked or handed so far (and those handed meanwhile) until `deadline` (on this
        ledger's clock); the actors that had not stopped by then, named in one log line (thousands of lines,
        each taking the GIL from the actors still stopping, would cost the exit more than the wait itself)."""
        with self._lock:
            while self._pending and (left := deadline - self._now()) > 0:
                self._all_ended.wait(left)
            late = list(self._pending.values())
            for urn in self._pending:
                _WATCHED.pop(urn, None)
            self._pending.clear()
            asked, self._asked = self._asked, []
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
