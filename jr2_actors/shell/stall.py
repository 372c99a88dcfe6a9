"""`StallCheck`: is any actor stuck — its oldest waiting message older than a bound — without asking one.

`/healthz` asks it on every probe, and at 5,000 runs a look at every mailbox is tens of thousands of reads,
so it looks only once a stall has become possible: every message put after the oldest stamp the last look
saw waiting is younger than it, so none can be past the bound before that stamp + the bound. Until then
the answer is "" at the cost of one subtraction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar


class _Box(Protocol):
    def oldest_stamp(self) -> float | None: ...


class _Actor(Protocol):
    @property
    def mailbox(self) -> _Box: ...


A = TypeVar("A", bound=_Actor)


class StallCheck:
    def __init__(self) -> None:
        self._oldest_waiting = float("-inf")  # the oldest stamp the last look found waiting

    def look(self, live: Iterable[A], bound: float, now: float) -> tuple[A, float] | None:
        """The first actor of `live` whose oldest waiting message is older than `bound` at `now`, with that
        age; None when none is, or when none can be yet."""
        if now - self._oldest_waiting <= bound:
            return None
        oldest = now
        for actor in live:
            if (stamp := actor.mailbox.oldest_stamp()) is None:
                continue
            if now - stamp > bound:
                return actor, now - stamp
            oldest = min(oldest, stamp)
        self._oldest_waiting = oldest
        return None
