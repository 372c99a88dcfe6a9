"""FeedHub: every run's feed, kept where readers outside the actor system can wait on it.

RunActors publish their feed lines here (as they tell any recipient); the API's event stream and the
demo read it, each from the id it last saw (`Last-Event-ID`). It is a sink fed by actors and read by
request threads — no actor reads it, so no actor shares state through it. A run's feed is bounded (the
newest `FEED_KEEP` lines); a finished run's feed stays until the run is forgotten.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from jr2_actors.run.core import FEED_KEEP
from jr2_actors.run.feedlines import FeedEvent


@dataclass(frozen=True)
class Published:
    """A run's new feed lines (and whether the run has finished), as told to the hub."""

    run_id: str
    events: tuple[FeedEvent, ...]
    finished: bool = False


class FeedHub:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._feeds: dict[str, deque[FeedEvent]] = {}
        self._finished: set[str] = set()
        self._closed = False
        self._interrupts = 0  # bumped to wake every reader without closing the hub

    def tell(self, message: object) -> None:
        """How actors publish: a `Published` message, like a tell to an actor (never blocks long)."""
        if isinstance(message, Published):
            self.publish(message.run_id, message.events, finished=message.finished)

    def publish(self, run_id: str, events: Iterable[FeedEvent], *, finished: bool = False) -> None:
        with self._cond:
            feed = self._feeds.setdefault(run_id, deque(maxlen=FEED_KEEP))
            last = feed[-1].id if feed else 0
            feed.extend(e for e in events if e.id > last)
            if finished:
                self._finished.add(run_id)
            self._cond.notify_all()

    def last_id(self, run_id: str) -> int:
        """The newest id published for the run (0: none)."""
        with self._cond:
            feed = self._feeds.get(run_id)
            return feed[-1].id if feed else 0

    def known(self, run_id: str) -> bool:
        with self._cond:
            return run_id in self._feeds

    def read(self, run_id: str, after: int, wait: float) -> tuple[list[FeedEvent], bool]:
        """The lines after id `after`, waiting up to `wait` seconds for one; and whether the run finished
        (then no more will come)."""
        with self._cond:
            interrupts = self._interrupts
            self._cond.wait_for(lambda: self._closed or run_id in self._finished or interrupts != self._interrupts
                                or any(e.id > after for e in self._feeds.get(run_id, ())), timeout=wait)
            events = [e for e in self._feeds.get(run_id, ()) if e.id > after]
            return events, run_id in self._finished or self._closed

    def interrupt(self) -> None:
        """Wake every reader now, each with what it has (the API is stopping); the hub stays open."""
        with self._cond:
            self._interrupts += 1
            self._cond.notify_all()

    def forget(self, run_id: str) -> None:
        with self._cond:
            self._feeds.pop(run_id, None)
            self._finished.discard(run_id)

    def close(self) -> None:
        """Wake every reader: the orchestrator is stopping."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
