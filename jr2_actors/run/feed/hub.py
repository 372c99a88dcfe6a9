"""FeedHub: every run's feed, kept where readers outside the actor system can wait on it.

RunActors publish their feed lines here (as they tell any recipient); the API's event stream and the
demo read it, each from the id it last saw (`Last-Event-ID`). It is a sink fed by actors and read by
request threads — no actor reads it, so no actor shares state through it. A run's feed is bounded (the
newest `FEED_KEEP` lines), and the hub says which id last left it, so a reader that resumes from an older
one is told of the gap. A live run's feed is held while it runs; of finished runs the hub holds the newest
`FEED_FINISHED_HELD`: a reader of an older one reads the same lines from the run's
store row until the sweep removes it, so the hub's memory plateaus however many runs finish.
Next stage: its readers — the API's event stream (through `wire.py`) and the demo.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from jr2_actors.run.blob import FEED_KEEP
from jr2_actors.run.feed.lines import FeedEvent
from jr2_actors.run.feed.waits import RunWaits
from jr2_actors.values.constants import FEED_FINISHED_HELD


@dataclass(frozen=True)
class Published:
    """A run's new feed lines (and whether the run has finished), as told to the hub. `dropped`: the newest
    id that already left the run's kept lines (a restored run's feed comes back with it)."""

    run_id: str
    events: tuple[FeedEvent, ...]
    finished: bool = False
    dropped: int = 0


class FeedRead(NamedTuple):
    """What a reader gets: the lines after its id, whether the run finished (then no more will come), and
    the newest id no longer kept (0: none) — a reader whose id is older missed the lines in between."""

    events: list[FeedEvent]
    finished: bool
    dropped: int = 0


class FeedHub:
    def __init__(self, finished_held: int = FEED_FINISHED_HELD) -> None:
        self._lock = threading.Lock()  # guards everything below
        self._waits = RunWaits(self._lock)  # each reader waits on its own run (waits.py)
        self._feeds: dict[str, deque[FeedEvent]] = {}
        self._dropped: dict[str, int] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()  # oldest finished first
        self._finished_held = finished_held
        self._closed = False
        self._interrupts = 0  # bumped to wake every reader without closing the hub

    def tell(self, message: object) -> None:
        """How actors publish: a `Published` message, like a tell to an actor (never blocks long)."""
        if isinstance(message, Published):
            self.publish(message.run_id, message.events, finished=message.finished, dropped=message.dropped)

    def publish(self, run_id: str, events: Iterable[FeedEvent], *, finished: bool = False,
                dropped: int = 0) -> list[FeedEvent]:
        """Returns the lines it took: a line it already holds (a step's lines told twice — a persist that
        timed out, landed late and was saved again, each telling them) is not taken again."""
        taken: list[FeedEvent] = []
        with self._lock:
            feed = self._feeds.setdefault(run_id, deque(maxlen=FEED_KEEP))
            last = feed[-1].id if feed else 0
            gone = max(self._dropped.get(run_id, 0), dropped)
            for event in events:
                if event.id <= last:
                    continue
                if len(feed) == feed.maxlen:
                    gone = feed[0].id
                feed.append(event)
                taken.append(event)
                last = event.id
            self._dropped[run_id] = gone
            if finished and run_id not in self._finished:
                self._finished[run_id] = None
                while len(self._finished) > self._finished_held:  # the oldest finished: its row has it
                    old, _ = self._finished.popitem(last=False)
                    self._feeds.pop(old, None)
                    self._dropped.pop(old, None)
            self._waits.wake(run_id)
        return taken

    def last_id(self, run_id: str) -> int:
        """The newest id published for the run (0: none)."""
        with self._lock:
            feed = self._feeds.get(run_id)
            return feed[-1].id if feed else 0

    def known(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._feeds

    def held(self) -> int:
        """How many runs' feeds the hub holds (live, and the newest finished)."""
        with self._lock:
            return len(self._feeds)

    def read(self, run_id: str, after: int, wait: float) -> FeedRead:
        """The lines after id `after`, waiting up to `wait` seconds for one; whether the run finished (then no
        more will come); and the newest id no longer kept. A run the hub does not hold (or forgets meanwhile)
        answers at once with nothing: the caller reads its row."""
        with self._lock:
            interrupts = self._interrupts

            def ready() -> bool:  # a feed's ids only grow: its newest tells whether one is after `after`
                feed = self._feeds.get(run_id)
                return self._closed or run_id in self._finished or feed is None or interrupts != self._interrupts \
                    or (bool(feed) and feed[-1].id > after)
            if not ready() and wait > 0:
                self._waits.wait(run_id, ready, wait)
            events = [e for e in self._feeds.get(run_id, ()) if e.id > after]
            return FeedRead(events, run_id in self._finished or self._closed, self._dropped.get(run_id, 0))

    def interrupt(self) -> None:
        """Wake every reader now, each with what it has (the API is stopping); the hub stays open."""
        with self._lock:
            self._interrupts += 1
            self._waits.wake_all()

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._feeds.pop(run_id, None)
            self._dropped.pop(run_id, None)
            self._finished.pop(run_id, None)
            self._waits.wake(run_id)  # its readers answer now (from its row), not at their wait's end

    def close(self) -> None:
        """Wake every reader: the orchestrator is stopping."""
        with self._lock:
            self._closed = True
            self._waits.wake_all()
