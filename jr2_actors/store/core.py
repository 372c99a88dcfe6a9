"""The run store: one sqlite row per run (ADR-0065, CONTRACTS.md §4 "Store").

Theory of operation: `state.db` runs in WAL with `synchronous=NORMAL` — a persist survives a process
crash, not a power loss (a power loss can lose the transitions since the last checkpoint; the file stays
consistent). One blob per run: the run's whole snapshot with its ledgers, as JSON text, so a restore is
one row per run and never reassembles a tree. `restore` reads `status = 'live'` rows only; a finished
row is never parsed at boot. Every non-live status ages from its terminal write, and `sweep` deletes
what is older than 7 days (fixed, not config). A `live` row is never swept.

The file says it is ours: `PRAGMA application_id` is `APPLICATION_ID` (stamped on the first open; a store
from before the stamp, whose only table is our `runs`, is stamped then). `open` refuses anything else — not
sqlite, damaged, another program's file, another `runs` table — with `StoreUnusable`, one line naming the
file, before a row is read. `restore` sets aside a live row it cannot read (not a JSON object) and reads on.

This module is synchronous and holds one connection per thread (peewee's rule); the StoreActor is its
only caller, so every write happens on one thread, in order.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import peewee

from jr2_actors.constants import RETENTION_SECONDS
from jr2_actors.errors import Jr2Error

STATUSES = ("live", "done", "failed", "error", "cancelled", "lost", "drifted")
PRAGMAS = {"journal_mode": "wal", "synchronous": "normal", "foreign_keys": 1, "busy_timeout": 5000}
DB_FILE = "state.db"
APPLICATION_ID = 0x6A723261  # "jr2a": `PRAGMA application_id`, the mark of a file that is ours
SCHEMA_VERSION = 1  # `PRAGMA user_version`
COLUMNS = frozenset({"run_id", "status", "blob", "reason", "updated_at"})


class StoreError(Exception):
    """A persist the store refuses: our bug (a bad status, a blob that is not JSON, a taken id), never the
    disk's."""


class StoreUnusable(Jr2Error):
    """`state.db` is not a run store of ours (not sqlite, damaged, another program's or another schema's):
    the process cannot start on it. One line, naming the file."""


@dataclass(frozen=True)
class Unreadable:
    """A live row `restore` set aside: it stays on disk as it is."""

    run_id: str
    problem: str


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    status: str
    blob: dict[str, Any]
    reason: str | None
    updated_at: float


@dataclass(frozen=True)
class Restored:
    runs: list[RunRecord]
    unreadable: list[Unreadable]


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


_INSERT = "INSERT INTO runs (run_id, status, blob, reason, updated_at) VALUES (?, ?, ?, ?, ?)"


class RunStore:
    def __init__(self, state_dir: str) -> None:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        self.path = os.path.join(state_dir, DB_FILE)
        self.db = peewee.SqliteDatabase(self.path, pragmas=PRAGMAS)
        self._run: Any = _model(self.db)

    def open(self) -> None:
        """Make sure the file is ours, then connect (`StoreUnusable` otherwise): a file that is not ours is
        read on a read-only connection of its own and never changed, not even into WAL."""
        stamped = self._check_ours() if os.path.exists(self.path) else False
        try:
            self.db.connect(reuse_if_open=True)
            self.db.create_tables([self._run], safe=True)
        except peewee.OperationalError as e:  # the file is there but cannot be opened (permissions, I/O)
            self.close()
            raise StoreUnusable(f"{self.path}: cannot open it: {e}") from None
        except peewee.DatabaseError as e:  # damaged beyond its header
            self.close()
            raise StoreUnusable(f"{self.path}: not a jr2 run store ({e})") from None
        if not stamped:  # a disk that cannot write now: a later open stamps it (and health says so)
            with contextlib.suppress(peewee.OperationalError):
                self._write_meta()

    def _check_ours(self) -> bool:
        """Whether the file carries our stamp; raises `StoreUnusable` when it is not a store of ours."""
        try:
            conn = sqlite3.connect(f"{pathlib.Path(self.path).as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as e:
            raise StoreUnusable(f"{self.path}: cannot open it: {e}") from None
        try:
            app = int(conn.execute("PRAGMA application_id").fetchone()[0])
            tables = {str(t) for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                      if not str(t).startswith("sqlite_")}
            columns = {str(c[1]) for c in conn.execute("PRAGMA table_info(runs)")}
        except sqlite3.OperationalError as e:
            raise StoreUnusable(f"{self.path}: cannot read it: {e}") from None
        except sqlite3.DatabaseError as e:  # not sqlite at all, or damaged
            raise StoreUnusable(f"{self.path}: not a jr2 run store ({e})") from None
        finally:
            conn.close()
        if app not in (0, APPLICATION_ID):
            raise StoreUnusable(f"{self.path}: not a jr2 run store (another program's file: application_id "
                                f"{app:#x})")
        if app == 0 and tables - {"runs"}:
            raise StoreUnusable(f"{self.path}: not a jr2 run store (its tables: {', '.join(sorted(tables))})")
        if "runs" in tables and columns != COLUMNS:
            raise StoreUnusable(f"{self.path}: not a jr2 run store (its runs table has the columns "
                                f"{', '.join(sorted(columns))})")
        return app == APPLICATION_ID

    def _write_meta(self) -> None:
        """Stamp the file as ours, in one committed transaction (also the health probe's real write)."""
        conn = self.db.connection()
        self.db.execute_sql("BEGIN IMMEDIATE")
        try:
            self.db.execute_sql(f"PRAGMA application_id = {APPLICATION_ID}")
            self.db.execute_sql(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.execute_sql("COMMIT")
        finally:
            if conn.in_transaction:
                self.db.execute_sql("ROLLBACK")

    def close(self) -> None:
        if not self.db.is_closed():
            self.db.close()

    @property
    def journal_mode(self) -> str:
        return str(self.db.journal_mode)

    @property
    def synchronous(self) -> int:
        return int(self.db.synchronous)

    def persist(self, run_id: str, status: str, blob: Mapping[str, Any], reason: str | None, now: float, *,
                create: bool = False) -> int:
        """Upsert the run's one row; on return the row is in the OS's hands (WAL, NORMAL). Returns the blob's
        size in bytes (as stored: JSON text). `create`: the run's first row, refused when the id is taken
        (a live row set aside at boot is never overwritten)."""
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
        if create:
            try:
                self.db.execute_sql(_INSERT, (run_id, status, text, reason, now))
            except peewee.IntegrityError:
                raise StoreError(f"run {run_id} exists") from None
            return len(text.encode())
        cursor = self.db.execute_sql(_UPSERT, (run_id, status, text, reason, now))
        if cursor.rowcount == 0:
            raise StoreError(f"run {run_id} has finished: it cannot be live again")
        return len(text.encode())

    def can_write(self) -> None:
        """Take the write lock and give it back: raises when the database cannot be written."""
        self.db.execute_sql("BEGIN IMMEDIATE")
        self.db.execute_sql("ROLLBACK")

    def probe_write(self) -> None:
        """A real committed write (the file's stamp, rewritten): raises when the disk cannot take one."""
        self._write_meta()

    def restore(self) -> Restored:
        """Live runs only, oldest write first; finished rows are not read. A live row whose blob is not a
        JSON object is set aside (left as it is), so it cannot keep every other run from its restore."""
        run = self._run
        runs: list[RunRecord] = []
        unreadable: list[Unreadable] = []
        for row in run.select().where(run.status == "live").order_by(run.updated_at):
            record = _record(row)
            if isinstance(record, RunRecord):
                runs.append(record)
            else:
                unreadable.append(Unreadable(str(row.run_id), record))
        return Restored(runs, unreadable)

    def get(self, run_id: str) -> RunRecord | None:
        """The run's row; None when there is none, or when its blob cannot be read (a set-aside row)."""
        row = self._run.get_or_none(self._run.run_id == run_id)
        record = _record(row) if row is not None else None
        return record if isinstance(record, RunRecord) else None

    def finished(self, prefix: str, limit: int) -> list[RunRecord]:
        """Issue 19 (`runs --all`): finished rows whose id starts with `prefix`, newest end first, at most
        `limit`; a row whose blob cannot be read is left out. Reading never touches a row's age (ADR-0065)."""
        run = self._run
        query = run.select().where(run.status != "live")
        if prefix:
            query = query.where(run.run_id.startswith(prefix))
        records = (_record(row) for row in query.order_by(run.updated_at.desc()).limit(limit))
        # LIKE ignores case (and reads `_` as any one character): the exact test is made here
        return [r for r in records if isinstance(r, RunRecord) and r.run_id.startswith(prefix)]

    def count_by_status(self) -> dict[str, int]:
        """Rows by status (one indexed scan: the StoreActor runs it at most once a second)."""
        cursor = self.db.execute_sql("SELECT status, COUNT(*) FROM runs GROUP BY status")
        return {str(status): int(n) for status, n in cursor.fetchall()}

    def sweep(self, now: float) -> int:
        """Delete every non-live row whose terminal write is older than the retention (7 days)."""
        run = self._run
        return int(run.delete().where((run.status != "live") & (run.updated_at < now - RETENTION_SECONDS)).execute())


def _record(row: Any) -> RunRecord | str:
    """The row as a record, or what is wrong with its blob."""
    try:
        blob = json.loads(str(row.blob))
    except (ValueError, RecursionError) as e:
        return f"its blob is not JSON: {e}"
    if not isinstance(blob, dict):
        return f"its blob is a JSON {type(blob).__name__}, not an object"
    try:
        return RunRecord(str(row.run_id), str(row.status), blob, row.reason, float(row.updated_at))
    except (TypeError, ValueError) as e:
        return f"its row cannot be read: {e}"
