"""`RunTable`: every live run's line of `GET /runs`, kept current by the runs' own tells (issue 18 item 2).

The orchestrator `enter`s a run's first row before its actor starts; each RunActor then tells its row
(`RunRow`: `run/wire.py`'s `listing_doc`) after every step it carries out, so the table holds what the run
last persisted or emitted. `GET /runs` reads the table under its own lock and never asks a run: an actor busy
in a long handler (or dead and waiting for its revival) is listed with its last known row.

Each row's JSON is encoded once, on the teller's thread, when the row is told: listing 5,000 runs joins
5,000 byte strings under one lock instead of copying and encoding 5,000 dicts on the request's thread (at
5,000 live runs that encoding alone was 10–18 ms of CPU a call, docs/benchmarks.md). A row told for a run
the table does not hold (it was never entered, or `forget` took it at its `RunFinished`) is dropped: a
finished run is never listed again by a late row.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
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
    """The rows, one per run id, each with its JSON, under one lock; a `Recipient` (it takes `RunRow` tells)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[dict[str, Any], bytes]] = {}

    def enter(self, message: RunRow) -> None:
        """The run's first row: it is listed from now until `forget`."""
        encoded = encode_row(message.row)
        with self._lock:
            self._rows[message.run_id] = (message.row, encoded)

    def tell(self, message: Any) -> None:
        """A run's newer row; dropped unless the run is entered and not forgotten since."""
        if not isinstance(message, RunRow):
            raise TypeError(f"the run table takes RunRow, not {type(message).__name__}")
        encoded = encode_row(message.row)  # outside the lock, on the run's own thread
        with self._lock:
            if message.run_id in self._rows:
                self._rows[message.run_id] = (message.row, encoded)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._rows.pop(run_id, None)

    def rows(self, run_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The rows of `run_ids` (sorted by id) that the table holds, each a copy the caller may change."""
        with self._lock:
            found = [(run_id, self._rows.get(run_id)) for run_id in run_ids]
        return [dict(held[0]) for _, held in sorted(found, key=lambda pair: pair[0]) if held is not None]

    def encoded(self, run_ids: Iterable[str]) -> list[bytes]:
        """The rows of `run_ids` (sorted by id) that the table holds, as their JSON: no row is encoded here."""
        get = self._rows.get
        with self._lock:
            found = [(run_id, get(run_id)) for run_id in run_ids]
        found.sort(key=lambda pair: pair[0])
        return [held[1] for _, held in found if held is not None]

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)
