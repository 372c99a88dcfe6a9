"""The run store: one sqlite row per run (ADR-0065, CONTRACTS.md §4 "Store").

Theory of operation: `state.db` runs in WAL with `synchronous=NORMAL` — a persist survives a process
crash, not a power loss (a power loss can lose the transitions since the last checkpoint; the file stays
consistent). One blob per run: the run's whole snapshot with its ledgers, as JSON text, so a restore is
one row per run and never reassembles a tree. `restore` reads `status = 'live'` rows only; a finished
row is never parsed at boot. Every non-live status ages from its terminal write, and `sweep` deletes
what is older than 7 days (fixed, not config). A `live` row is never swept.

This module is synchronous and holds one connection per thread (peewee's rule); the StoreActor is its
only caller, so every write happens on one thread, in order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import peewee

from jr2_actors.constants import RETENTION_SECONDS

STATUSES = ("live", "done", "failed", "error", "cancelled", "lost", "drifted")
PRAGMAS = {"journal_mode": "wal", "synchronous": "normal", "foreign_keys": 1, "busy_timeout": 5000}
DB_FILE = "state.db"


class StoreError(Exception):
    """A persist the store refuses: our bug (a bad status, a blob that is not JSON), never the disk's."""


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    status: str
    blob: dict[str, Any]
    reason: str | None
    updated_at: float


def _model(db: peewee.SqliteDatabase) -> type[peewee.Model]:
    """A model class bound to one database: binding at class level would be shared by every store."""

    class Run(peewee.Model):
        run_id = peewee.CharField(primary_key=True)
        status = peewee.CharField(index=True)
        blob = peewee.TextField()
        reason = peewee.TextField(null=True)
        updated_at = peewee.DoubleField(index=True)

        class Meta:
            database = db
            table_name = "runs"

    return Run


# ADR-0065: a finished row ages from its terminal write. So once a row is not live, its status and its
# time are kept (a later persist of it may still carry a newer blob and reason), and it never goes back
# to live: the conditional update then changes nothing, which `persist` reports as our bug.
_UPSERT = ("INSERT INTO runs (run_id, status, blob, reason, updated_at) VALUES (?, ?, ?, ?, ?) "
           "ON CONFLICT (run_id) DO UPDATE SET "
           "status = CASE WHEN runs.status = 'live' THEN excluded.status ELSE runs.status END, "
           "blob = excluded.blob, reason = excluded.reason, "
           "updated_at = CASE WHEN runs.status = 'live' THEN excluded.updated_at ELSE runs.updated_at END "
           "WHERE runs.status = 'live' OR excluded.status != 'live'")


class RunStore:
    def __init__(self, state_dir: str) -> None:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        self.path = os.path.join(state_dir, DB_FILE)
        self.db = peewee.SqliteDatabase(self.path, pragmas=PRAGMAS)
        self._run: Any = _model(self.db)

    def open(self) -> None:
        self.db.connect(reuse_if_open=True)
        self.db.create_tables([self._run], safe=True)

    def close(self) -> None:
        if not self.db.is_closed():
            self.db.close()

    @property
    def journal_mode(self) -> str:
        return str(self.db.journal_mode)

    @property
    def synchronous(self) -> int:
        return int(self.db.synchronous)

    def persist(self, run_id: str, status: str, blob: Mapping[str, Any], reason: str | None, now: float) -> int:
        """Upsert the run's one row; on return the row is in the OS's hands (WAL, NORMAL). Returns the blob's
        size in bytes (as stored: JSON text)."""
        if status not in STATUSES:
            raise StoreError(f"status {status!r} is not one of {', '.join(STATUSES)}")
        if not run_id:
            raise StoreError("a run needs an id")
        try:
            text = json.dumps(blob, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as e:
            raise StoreError(f"run {run_id}: the snapshot is not JSON: {e}") from e
        # One prepared statement, not peewee's query builder: building the upsert cost ~0.3 ms a persist,
        # thirty times the write itself (bench/store_persist.py).
        cursor = self.db.execute_sql(_UPSERT, (run_id, status, text, reason, now))
        if cursor.rowcount == 0:
            raise StoreError(f"run {run_id} has finished: it cannot be live again")
        return len(text.encode())

    def can_write(self) -> None:
        """Take the write lock and give it back: raises when the database cannot be written."""
        self.db.execute_sql("BEGIN IMMEDIATE")
        self.db.execute_sql("ROLLBACK")

    def restore(self) -> list[RunRecord]:
        """Live runs only, oldest write first; finished rows are not read."""
        run = self._run
        return [_record(r) for r in run.select().where(run.status == "live").order_by(run.updated_at)]

    def get(self, run_id: str) -> RunRecord | None:
        row = self._run.get_or_none(self._run.run_id == run_id)
        return _record(row) if row is not None else None

    def count_by_status(self) -> dict[str, int]:
        """Rows by status (one indexed scan: the StoreActor runs it at most once a second)."""
        cursor = self.db.execute_sql("SELECT status, COUNT(*) FROM runs GROUP BY status")
        return {str(status): int(n) for status, n in cursor.fetchall()}

    def sweep(self, now: float) -> int:
        """Delete every non-live row whose terminal write is older than the retention (7 days)."""
        run = self._run
        return int(run.delete().where((run.status != "live") & (run.updated_at < now - RETENTION_SECONDS)).execute())


def _record(row: Any) -> RunRecord:
    return RunRecord(str(row.run_id), str(row.status), json.loads(str(row.blob)), row.reason,
                     float(row.updated_at))
