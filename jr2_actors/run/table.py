"""`RunTable`: every live run's line of `GET /runs`, kept current by the runs' own tells (issue 18 item 2).

Each RunActor tells its row (`RunRow`: `run/wire.py`'s `listing_doc`) after every step it carries out, so
the table holds what the run last persisted or emitted. `GET /runs` reads the table under its own lock and
never asks a run: an actor busy in a long handler (or dead and waiting for its revival) is listed with its
last known row, and listing 5,000 runs costs one lock and a copy, not 5,000 asks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunRow:
    """Told to the table: the run's line as it is now."""

    run_id: str
    row: dict[str, Any]


class RunTable:
    """The rows, one per run id, under one lock; a `Recipient` (it takes `RunRow` tells)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] = {}

    def tell(self, message: Any) -> None:
        if not isinstance(message, RunRow):
            raise TypeError(f"the run table takes RunRow, not {type(message).__name__}")
        with self._lock:
            self._rows[message.run_id] = message.row

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._rows.pop(run_id, None)

    def rows(self, run_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The rows of `run_ids` (sorted by id) that the table holds, each a copy the caller may change."""
        with self._lock:
            found = [(run_id, self._rows.get(run_id)) for run_id in run_ids]
        return [dict(row) for _, row in sorted(found, key=lambda pair: pair[0]) if row is not None]

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)
