"""`LastAnswer`: an actor's answer to one question, asked without queueing behind its mailbox.

`GET /runs` and a run's status say whether the cluster answers, which only the WatchActor knows. Under load
the watch's mailbox holds thousands of events; an ask waits behind all of them. `get()` asks again only
once the last answer is older than `max_age`, waits for the new one at most `wait`, and meanwhile answers
the last one it has — so a listing never waits on the watch for longer than `wait`. An answer asked more
than `STALE_AGES` × `max_age` ago is no answer (None, as a timed-out ask was): what it shows is never older.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pykka

STALE_AGES = 5


class LastAnswer:
    def __init__(self, ref: pykka.ActorRef[Any], message: object, *, wait: float, max_age: float,
                 now: Callable[[], float] = time.monotonic) -> None:
        self._ref = ref
        self._message = message
        self._wait = wait
        self._max_age = max_age
        self._now = now
        self._lock = threading.Lock()
        self._future: pykka.Future[Any] | None = None
        self._asked = 0.0
        self._last: Any = None
        self._last_asked = 0.0  # when the ask that `_last` answers was made

    def get(self) -> Any:
        """The freshest answer there is within `wait`; None before the first (or once the actor is gone)."""
        with self._lock:
            now = self._now()
            if self._future is None or (now - self._asked > self._max_age and _done(self._future)):
                try:
                    self._future = self._ref.ask(self._message, block=False)
                except pykka.ActorDeadError:
                    self._future, self._last = None, None
                    return None
                self._asked = now
            future, asked = self._future, self._asked
        try:
            value = future.get(timeout=self._wait)
        except pykka.Timeout:
            with self._lock:
                fresh = self._now() - self._last_asked <= STALE_AGES * self._max_age
                return self._last if fresh else None
        except pykka.ActorDeadError:
            return None
        with self._lock:
            if asked >= self._last_asked:
                self._last, self._last_asked = value, asked
        return value


def _done(future: pykka.Future[Any]) -> bool:
    try:
        future.get(timeout=0)
    except pykka.Timeout:
        return False
    except Exception:  # an answer that is an error is an answer: ask again
        return True
    return True
