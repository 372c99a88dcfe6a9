"""One `Step` shape for every core, and one `Machine` table for every state machine. Pure.

A core's `step(input, now, …)` returns a `Step`; its shell performs the actions, tells the reports to
whoever listens, and arms one timer at `deadline` (None: nothing is due).

A core's machine is one `Machine`: rows of (from phases, input type, the phases that edge may lead to,
the handler that takes it). One misuse policy holds for all of them: an input with no row in the current
phase is our bug and raises `OffTable` in the core (an input the world may send late is a row of its own,
whose handler ignores it and says why); a handler that moves off its edge raises `OffTable` as it moves.
`markdown()` prints the table for docs/architecture.md, and a test keeps each copy true. A core walks its
table with one `Walk`: it takes an input's edge and checks every move its handler makes against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

A = TypeVar("A")
R = TypeVar("R")
H = TypeVar("H")


@dataclass(frozen=True)
class Step(Generic[A, R]):
    actions: tuple[A, ...] = ()
    reports: tuple[R, ...] = ()
    deadline: float | None = None  # wake me (with a tick) at this monotonic time
    note: str = ""  # an input the core took but did nothing with, said for the shell's log


class OffTable(Exception):
    """Our bug: the shell fed a core an input its machine has no edge for (h11's LocalProtocolError)."""


@dataclass(frozen=True)
class Edge(Generic[H]):
    to: frozenset[str]  # where the edge may lead (empty: it stays)
    handler: H


# (from phases, the input type — or several that share the edge —, where it may lead, its handler)
Row = tuple[tuple[str, ...], type | tuple[type, ...], tuple[str, ...], H]


class Machine(Generic[H]):
    """(phase, input type) → `Edge`: the one table a core's `step` dispatches on."""

    def __init__(self, name: str, rows: Iterable[Row[H]]) -> None:
        self.name = name
        self.rows: tuple[Row[H], ...] = tuple(rows)
        self.edges: dict[tuple[str, type], Edge[H]] = {}
        for phases, events, to, handler in self.rows:
            for event in events if isinstance(events, tuple) else (events,):
                for phase in phases:
                    if (phase, event) in self.edges:
                        raise ValueError(f"{name}: two rows for {event.__name__} in {phase}")
                    self.edges[(phase, event)] = Edge(frozenset(to), handler)

    def edge(self, who: str, phase: str, event: object) -> Edge[H]:
        """The edge `event` takes in `phase`; none is our bug (`OffTable`)."""
        found = self.edges.get((phase, type(event)))
        if found is None:
            raise OffTable(f"{who}: {type(event).__name__} in {phase}")
        return found

    def move(self, who: str, at: tuple[str, type] | None, to: str) -> None:
        """A handler on edge `at` moves to `to`: only where the table says (None: no edge is being taken)."""
        if at is None:
            return
        allowed = self.edges[at].to
        if to not in allowed:
            raise OffTable(f"{who}: {at[1].__name__} in {at[0]} cannot lead to {to} (the table allows "
                           f"{', '.join(sorted(allowed)) or 'no move'})")

    def markdown(self) -> str:
        """The table as markdown, for docs/architecture.md (a test keeps the two the same)."""
        rows = ["| in | input | may lead to |", "| --- | --- | --- |"]
        for phases, events, to, _ in self.rows:
            names = ", ".join(e.__name__ for e in (events if isinstance(events, tuple) else (events,)))
            rows.append(f"| {', '.join(phases)} | {names} | {', '.join(to) if to else '(stays)'} |")
        return "\n".join(rows)


class Walk(Generic[H]):
    """One core's walk on a `Machine`: the edge it is taking, so a handler that moves off it raises (an edge
    taken inside another is checked too, and the outer one holds again after it)."""

    def __init__(self, machine: Machine[H], who: str = "") -> None:
        self.machine = machine
        self.who = who
        self._at: tuple[str, type] | None = None

    @contextmanager
    def take(self, phase: str, event: object, who: str | None = None) -> Iterator[H]:
        """The handler of the edge `event` takes in `phase` (none is our bug: `OffTable`), while it runs."""
        outer = (self.who, self._at)
        if who is not None:
            self.who = who
        handler = self.machine.edge(self.who, phase, event).handler
        self._at = (phase, type(event))
        try:
            yield handler
        finally:
            self.who, self._at = outer

    def move(self, to: str) -> None:
        """The handler moves to `to`: only where its edge may lead (no edge being taken: any move)."""
        self.machine.move(self.who, self._at, to)
