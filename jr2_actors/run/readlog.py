"""What the run logs of its memory-kill reads (ADR-0062): pure, so its rules are tested without a logger.

One line when a Harness's reads start to fail — per Harness, not per seat (two seats on one Harness fail
together) — none while they keep failing or when they work again, and again only after a read that
worked. Each problem of a list is said once per Harness; a hostile list cannot grow the memory of what was
said past `MAX_SAID_PROBLEMS`.
Next stage: `actor.py`, which logs what it says.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_SAID_PROBLEMS = 256


class ReadLog:
    def __init__(self) -> None:
        self._failing: set[str] = set()
        self._said: set[tuple[str, str]] = set()

    @property
    def remembered(self) -> int:
        """How many (Harness, problem) pairs are kept as said."""
        return len(self._said)

    def failed(self, source: str, problem: str) -> str | None:
        """A read from `source` could not tell: the line to log, or None when it was said already."""
        if source in self._failing:
            return None
        self._failing.add(source)
        return f"memory-kill reads from {source} fail: {problem}"

    def read(self, source: str, problems: Sequence[str]) -> list[str]:
        """A read from `source` worked: the lines for the problems of its list not said before."""
        self._failing.discard(source)
        lines = []
        for problem in problems:
            said = (source, problem)
            if said in self._said:
                continue
            if len(self._said) < MAX_SAID_PROBLEMS:
                self._said.add(said)
            lines.append(f"memory-kill list from {source}: {problem}")
        return lines
