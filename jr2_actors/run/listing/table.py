"""`RunTable`: every live run's line of `GET /runs`, kept current by the runs' own tells.

The orchestrator `enter`s a run's first row before its actor starts; each RunActor then tells its row
(`RunRow`: `listing/wire.py`'s `listing_doc`) after every step it carries out, so the table holds what the run
last persisted or emitted, and `forget`s it at its `RunFinished` (or when its actor could not start): the table
is the live set. `GET /runs` reads it under its own lock and never asks a run, nor the orchestrator: an actor
busy in a long handler (or dead and waiting for its revival) is listed with its last known row.

Each row's JSON is encoded once, on the teller's thread, when the row is told: listing 5,000 runs joins
5,000 byte strings instead of copying and encoding 5,000 dicts on the request's thread (at 5,000 live runs
that encoding alone was 10–18 ms of CPU a call, docs/benchmarks.md); the ids are kept sorted, so the listing is
one slice (sorting 5,000 ids a call, and filtering the orchestrator's, was ~2 ms more under the GIL). A row
told for a run the table does not hold (it was never entered, or `forget` took it at its `RunFinished`) is
dropped: a finished run is never listed again by a late row. Next stage: `GET /runs` (`api/app.py`).
"""

from __future__ import annotations

import bisect
import json
import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunRow:
    """Told to the table: the run's line as it is now."""

    run_id: str
    row: dict[str, Any]


def encode_row(row: Any) -> bytes:
    """A row as `GET /runs` writes it: compact JSON, as every answer of the API is (`api/app.py` calls this)."""
    return json.dumps(row, separators=(",", ":")).encode()


def with_member(lines: list[bytes], key: str, value: Any) -> list[bytes]:
    """Each encoded row (a JSON object, `key` not among its members) with `key: value` added last: the bytes
    `encode_row({**row, key: value})` would give, without decoding or encoding any row again."""
    member = b"," + encode_row(key) + b":" + encode_row(value) + b"}"
    return [line[:-1] + member for line in lines]


class RunTable:
    """The live runs' rows under one lock, kept sorted by id with each row's JSON beside it, so a listing (or a
    prefix's: one contiguous span) is a slice and never a sort; a `Recipient` (it takes `RunRow` tells)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: list[str] = []  # sorted
        self._lines: list[bytes] = []  # `_lines[i]` is the JSON of `_rows[_ids[i]]`
        self._rows: dict[str, dict[str, Any]] = {}

    def enter(self, message: RunRow) -> None:
        """The run's first row: it is listed from now until `forget`."""
        encoded = encode_row(message.row)
        with self._lock:
            i = bisect.bisect_left(self._ids, message.run_id)
            if message.run_id in self._rows:
                self._lines[i] = encoded
            else:
                self._ids.insert(i, message.run_id)
                self._lines.insert(i, encoded)
            self._rows[message.run_id] = message.row

    def tell(self, message: Any) -> None:
        """A run's newer row; dropped unless the run is entered and not forgotten since."""
        if not isinstance(message, RunRow):
            raise TypeError(f"the run table takes RunRow, not {type(message).__name__}")
        encoded = encode_row(message.row)  # outside the lock, on the run's own thread
        with self._lock:
            if message.run_id in self._rows:
                self._lines[bisect.bisect_left(self._ids, message.run_id)] = encoded
                self._rows[message.run_id] = message.row

    def forget(self, run_id: str) -> None:
        with self._lock:
            if self._rows.pop(run_id, None) is not None:
                i = bisect.bisect_left(self._ids, run_id)
                del self._ids[i], self._lines[i]

    def _span(self, prefix: str) -> slice:
        """The ids that start with `prefix`: one contiguous span of the sorted ids (the lock is held)."""
        ids = self._ids
        if not prefix:
            return slice(0, len(ids))
        lo = hi = bisect.bisect_left(ids, prefix)
        while hi < len(ids) and ids[hi].startswith(prefix):
            hi += 1
        return slice(lo, hi)

    def rows(self, prefix: str = "") -> list[dict[str, Any]]:
        """The rows of the runs whose id starts with `prefix`, sorted by id, each a copy the caller may change."""
        with self._lock:
            held = [self._rows[run_id] for run_id in self._ids[self._span(prefix)]]
        return [dict(row) for row in held]

    def encoded(self, prefix: str = "") -> list[bytes]:
        """`rows(prefix)` as their JSON, encoded when each was told: a slice under the lock, nothing encoded."""
        with self._lock:
            return self._lines[self._span(prefix)]

    def __contains__(self, run_id: object) -> bool:
        with self._lock:
            return run_id in self._rows

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)
