"""One `Step` shape for every core: what to do, what to tell, and when to be woken. Pure.

A core's `step(input, now, …)` returns a `Step`; its shell performs the actions, tells the reports to
whoever listens, and arms one timer at `deadline` (None: nothing is due).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

A = TypeVar("A")
R = TypeVar("R")


@dataclass(frozen=True)
class Step(Generic[A, R]):
    actions: tuple[A, ...] = ()
    reports: tuple[R, ...] = ()
    deadline: float | None = None  # wake me (with a tick) at this monotonic time
    note: str = ""  # an input the core would not take, said for the shell's log


class OffTable(Exception):
    """Our bug: the shell fed a core an input its machine has no edge for (h11's LocalProtocolError)."""
