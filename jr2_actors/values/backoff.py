"""One shape for every retry loop's waits: `Backoff(initial, factor, cap, jitter)`. Pure.

A core never draws randomness itself (the layout's rule: no `random` in a core); it is handed a
`Jitter` — in production a seeded `random.Random` the shell made, in tests the same with a fixed seed —
so every delay is reproducible from the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Jitter(Protocol):
    def uniform(self, a: float, b: float) -> float: ...


class NoJitter:
    """Always the lower bound: for callers that want the plain schedule."""

    def uniform(self, a: float, b: float) -> float:
        return a


@dataclass(frozen=True)
class Backoff:
    """The wait before retry number `attempt` (1 = the first retry).

    `immediate_first`: the first retry goes at once and the schedule starts with the second (the watch:
    a single dropped stream is resumed without delay). `jitter` adds up to that fraction on top, so
    retries after a shared outage never march in lockstep.
    """

    initial: float
    cap: float
    factor: float = 2.0
    jitter: float = 0.0
    immediate_first: bool = False

    def __post_init__(self) -> None:
        if self.initial < 0 or self.cap < self.initial or self.factor < 1 or not 0 <= self.jitter <= 1:
            raise ValueError(f"not a backoff: {self}")

    def delay(self, attempt: int, draw: Jitter | None = None) -> float:
        if attempt < 1:
            raise ValueError("retries are numbered from 1")
        step = attempt - 1
        if self.immediate_first:
            if attempt == 1:
                return 0.0
            step -= 1
        base = min(self.initial * self.factor ** min(step, 64), self.cap)
        if self.jitter and draw is not None:
            base *= 1 + draw.uniform(0, self.jitter)
        return base
