"""The run store: one sqlite row per run (ADR-0065, CONTRACTS.md §4 "Store").

Theory of operation: the store's files run in WAL with `synchronous=NORMAL` — a persist survives a
process crash, not a power loss (a power loss can lose the transitions since the last checkpoint; the
files stay consistent). One blob per run: the run's whole snapshot with its ledgers, as JSON text, so a
restore is one row per run and never reassembles a tree. `restore` reads `status = 'live'` rows only; a
finished row is never parsed at boot. Every non-live status ages from its terminal write, and `sweep`
deletes what is older than 7 days (fixed, not config). A `live` row is never swept.

Two files, still one row per run: `state.db` holds the live rows, `history.db` (attached as
`history`) the finished ones. A run's row is written where it is; once it has ended, `settle` moves it to
the history — inserted there and committed, then deleted here and committed: a crash between the two
leaves a finished copy here (never restored), moved again at the next open. So `state.db` is as small as
the live rows and a boot reads nothing else, however long the history; and a live persist touches no
secondary index (the history keeps the two its sweep and its count need). A store of schema 1 (one file,
every row) is moved over at its first open: its finished rows into the history, then `VACUUM`.

The files say they are ours: `PRAGMA application_id` is `APPLICATION_ID` (stamped on the first open; a
store from before the stamp, whose only table is our `runs`, is stamped then). `open` refuses anything
else — not sqlite, damaged, another program's file, another `runs` table — with `StoreUnusable`, one line
naming the file, before a row is read. `restore` sets aside a live row it cannot read (not a JSON
object) and reads on.

This module is synchronous and holds one connection per thread (peewee's rule); the StoreActor is its
only caller, so every write happens on one thread, in order.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import peewee

from jr2_actors.store import codec, files
from jr2_actors.store.files import APPLICATION_ID
from jr2_actors.store.messages import RestoredRuns, RunRecord, StoreError, StoreUnusable, Unreadable
from jr2_actors.values.constants import RETENTION_SECONDS
from jr2_actors.values.run_ids import Keyed

log = logging.getLogger(__name__)

STATUSES = ("live", "done", "failed", "error", "cancelled", "lost", "drifted")
PRAGMAS = {"journal_mode": "wal", "synchronous": "normal", "foreign_keys": 1, "busy_timeout": 5000}
DB_FILE = "state.db"  # the live rows
HISTORY_FILE = "history.db"  # the finished rows (never read by a restore)
SCHEMA_VERSION = 3  # `PRAGMA user_version`: 1 was one file holding every row, 2 had no idempotency keys
COLUMNS = frozenset({"run_id", "status", "blob", "reason", "updated_at", "idempotency_key", "request_digest"})
COLUMNS_2 = COLUMNS - {"idempotency_key", "request_digest"}  # schema 1 and 2: the key columns are added


@dataclass(frozen=True)
class Row:
    """One persist of a run's row: what `persist_many` writes."""

    run_id: str
    status: str
    blob: Mapping[str, Any]
    reason: str | None = None
    create: bool = False  # the run's first row: refused when the id is taken
    keyed: Keyed | None = None  # written with the first row only


_TABLE = ("CREATE TABLE IF NOT EXISTS {schema}.runs (run_id VARCHAR(255) NOT NULL PRIMARY KEY, "
          "status VARCHAR(255) NOT NULL, blob TEXT NOT NULL, reason TEXT, updated_at REAL NOT NULL, "
          "idempotency_key TEXT, request_digest TEXT)")
_KEY_COLUMNS = ("ALTER TABLE {schema}.runs ADD COLUMN idempotency_key TEXT",
                "ALTER TABLE {schema}.runs ADD COLUMN request_digest TEXT")
# The history's indexes: the sweep's (by time) and the count's (by status). The live table has none: every
# live save rewrites `updated_at`, and an index on it doubled the write (bench/store_persist.py).
# Both files index the keys, only where there is one: a live save does not change the key, so the live
# file's index costs a keyed create alone.
_HISTORY_INDEXES = ("CREATE INDEX IF NOT EXISTS history.runs_updated_at ON runs (updated_at)",
                    "CREATE INDEX IF NOT EXISTS history.runs_status ON runs (status)")
_KEY_INDEXES = tuple(f"CREATE INDEX IF NOT EXISTS {schema}.runs_key ON runs (idempotency_key) "
                     "WHERE idempotency_key IS NOT NULL" for schema in ("main", "history"))
_SCHEMA_1_INDEXES = ("run_status", "run_updated_at")  # peewee named them after its model, `Run`

# ADR-0065: a finished row ages from its terminal write. So once a row is not live, its status and its
# time are kept (a later persist of it may still carry a newer blob and reason), and it never goes back
# to live: `_write` reports that as our bug.
_UPDATE_LIVE = ("UPDATE main.runs SET status = ?, blob = ?, reason = ?, updated_at = ? "
                "WHERE run_id = ? AND status = 'live'")
_INSERT = ("INSERT INTO main.runs (run_id, status, blob, reason, updated_at, idempotency_key, request_digest) "
           "VALUES (?, ?, ?, ?, ?, ?, ?)")
# The history keeps a finished blob compressed (store/codec.py); the live rows stay JSON text (ADR-0065).
_MOVE = ("INSERT OR REPLACE INTO history.runs (run_id, status, blob, reason, updated_at, idempotency_key, "
         "request_digest) SELECT run_id, status, jr2_deflate(blob), reason, updated_at, idempotency_key, "
         "request_digest FROM main.runs WHERE status != 'live'")
_MOVED = "DELETE FROM main.runs WHERE status != 'live'"
_ONE_ID = " AND run_id IN (SELECT value FROM json_each(?))"  # the runs named, as one JSON array
_RESTORE = "SELECT run_id, status, blob, reason, updated_at FROM main.runs WHERE status = 'live' ORDER BY updated_at"
_GET = {"main": "SELECT run_id, status, blob, reason, updated_at FROM main.runs WHERE run_id = ?",
        "history": "SELECT run_id, status, blob, reason, updated_at FROM history.runs WHERE run_id = ?"}
_HAS = {"main": "SELECT 1 FROM main.runs WHERE run_id = ?", "history": "SELECT 1 FROM history.runs WHERE run_id = ?"}
_FINISHED_AGAIN = {"main": "UPDATE main.runs SET blob = ?, reason = ? WHERE run_id = ?",
                   "history": "UPDATE history.runs SET blob = jr2_deflate(?), reason = ? WHERE run_id = ?"}
_KEYED = ("SELECT request_digest, run_id FROM main.runs WHERE idempotency_key = ? UNION ALL "
          "SELECT request_digest, run_id FROM history.runs WHERE idempotency_key = ? LIMIT 1")


class RunStore:
    def __init__(self, state_dir: str) -> None:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        self.path = os.path.join(state_dir, DB_FILE)
        self.history_path = os.path.join(state_dir, HISTORY_FILE)
        self.db = peewee.SqliteDatabase(self.path, pragmas=PRAGMAS)
        self.db.register_function(codec.deflate, "jr2_deflate", 1, deterministic=True)
        self._ended: set[str] = set()  # runs ended in `state.db`, not yet moved to the history
        self._ended_unknown = True  # which ones is not known (before the first `settle` of an open)

    def open(self) -> None:
        """Make sure the files are ours, then connect (`StoreUnusable` otherwise): a file that is not ours
        is read on a read-only connection of its own and never changed, not even into WAL. A store of
        schema 1 is moved over; rows ended and not yet moved (a crash between the two) are moved now."""
        paths = (self.path, self.history_path)
        try:
            stamped = files.check_ours(self.path, COLUMNS, COLUMNS_2) if os.path.exists(self.path) else False
            if os.path.exists(self.history_path):
                files.check_ours(self.history_path, COLUMNS, COLUMNS_2)
            for path in paths:
                files.check_wal_index(path)
        except files.NotOurs as e:
            raise StoreUnusable(str(e)) from None
        wals = [files.wal_commits(path) for path in paths]  # before sqlite's recovery reads them
        files.make_private(os.path.dirname(self.path), (DB_FILE, HISTORY_FILE))
        path = self.path
        try:
            self.db.connect(reuse_if_open=True)
            conn = self.db.connection()
            version = int(conn.execute("PRAGMA main.user_version").fetchone()[0])
            conn.execute(_TABLE.format(schema="main"))
            path = self.history_path
            conn.execute("ATTACH DATABASE ? AS history", (self.history_path,))
            conn.execute("PRAGMA history.journal_mode = wal")
            conn.execute("PRAGMA history.synchronous = normal")
            conn.execute(_TABLE.format(schema="history"))
            for index in _HISTORY_INDEXES:
                conn.execute(index)
            for schema, wal in zip(("main", "history"), wals, strict=True):
                _say_discarded(conn, schema, wal)
        except sqlite3.OperationalError as e:  # the file is there but cannot be opened (permissions, I/O)
            self.close()
            raise StoreUnusable(f"{path}: cannot open it: {e}") from None
        except sqlite3.DatabaseError as e:  # damaged beyond its header
            self.close()
            raise StoreUnusable(f"{path}: not a jr2 run store ({e})") from None
        # A disk that cannot write now: a later open stamps the files and moves the rows (health says so).
        with contextlib.suppress(sqlite3.OperationalError):
            if version < SCHEMA_VERSION:
                self._migrate(version)
            elif not stamped:
                self._write_meta()
            self.settle()

    def _migrate(self, version: int) -> None:
        """To schema 3. The key columns added where they are missing (schema 1 and 2), and their indexes.
        Schema 1 (or a store from before the stamp): its finished rows into the history, its indexes
        dropped, then `VACUUM`, so the live rows are packed in a small file. Then the files are stamped."""
        conn = self.db.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for schema in ("main", "history"):
                if {str(c[1]) for c in conn.execute(f"PRAGMA {schema}.table_info(runs)")} == COLUMNS_2:
                    for statement in _KEY_COLUMNS:
                        conn.execute(statement.format(schema=schema))
            for index in _KEY_INDEXES:
                conn.execute(index)
            if version < 2:
                conn.execute(_MOVE)
                conn.execute("COMMIT")  # the history first: a crash here leaves copies, moved again next open
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM main.runs WHERE status != 'live'")
                for index in _SCHEMA_1_INDEXES:
                    conn.execute(f"DROP INDEX IF EXISTS main.{index}")
            _stamp(conn)
            conn.execute("COMMIT")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        if version >= 2:
            return
        conn.execute("VACUUM main")
        for schema in ("main", "history"):  # the copies went through the WALs: give that space back now
            conn.execute(f"PRAGMA {schema}.wal_checkpoint(TRUNCATE)")
        self._ended_unknown = False

    def _write_meta(self) -> None:
        """Stamp the files as ours, in one committed transaction (also the health probe's real write)."""
        conn = self.db.connection()
        self.db.execute_sql("BEGIN IMMEDIATE")
        try:
            _stamp(conn)
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
                create: bool = False, keyed: Keyed | None = None) -> int:
        """Write the run's one row; on return the row is in the OS's hands (WAL, NORMAL). Returns the blob's
        size in bytes (as stored: JSON text). `create`: the run's first row, refused when the id is taken
        (a live row set aside at boot is never overwritten). A run that ended is moved to the history."""
        (outcome,) = self.persist_many([Row(run_id, status, blob, reason, create, keyed)], now)
        if isinstance(outcome, StoreError):
            raise outcome
        with contextlib.suppress(sqlite3.OperationalError):  # else moved at the next settle or open
            self.settle()
        return outcome

    def persist_many(self, rows: Sequence[Row], now: float) -> list[int | StoreError]:
        """Write `rows` in order in one transaction (group commit): on return every row answered
        with its size is committed, in the OS's hands. A row the store refuses (our bug: a bad status, a blob
        that is not JSON, a taken id, a finished run made live) is answered its `StoreError` and the others
        still land: a refused statement is backed out alone (sqlite's ABORT), the transaction goes on. What
        the disk refuses raises, and then nothing of the batch is written (rolled back). The runs that
        ended stay here until `settle` (the caller's, after its answers)."""
        outcomes: list[int | StoreError] = []
        ready: list[tuple[int, Row, str]] = []
        for i, row in enumerate(rows):
            text = _encode(row)
            outcomes.append(text if isinstance(text, StoreError) else _size(text))
            if not isinstance(text, StoreError):
                ready.append((i, row, text))
        if not ready:
            return outcomes
        # The connection itself, not peewee's `execute_sql` (which builds a cursor and logs each call): the
        # statements are fixed, and the query builder once cost thirty times the write (bench/store_persist.py).
        conn = self.db.connection()
        alone = len(ready) == 1  # one row writes one statement (the others read): its own transaction
        if not alone:
            conn.execute("BEGIN IMMEDIATE")
        ended: list[str] = []
        try:
            for i, row, text in ready:
                refused = _write(conn, row, text, now)
                if refused is not None:
                    outcomes[i] = refused
                elif row.status != "live":
                    ended.append(row.run_id)
            if not alone:
                conn.execute("COMMIT")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        self._ended.update(ended)
        return outcomes

    def settle(self) -> int:
        """Move the runs that ended to the history: inserted there and committed, then deleted here and
        committed (a crash between leaves a finished copy here, never restored, moved at the next open).
        Returns how many moved; raises what the disk refuses (they are moved by the next call then)."""
        if not self._ended and not self._ended_unknown:
            return 0
        ids = tuple(self._ended)
        named = not self._ended_unknown
        params = (json.dumps(ids),) if named else ()
        conn = self.db.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_MOVE + _ONE_ID if named else _MOVE, params)
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            moved = int(conn.execute(_MOVED + _ONE_ID if named else _MOVED, params).rowcount)
            conn.execute("COMMIT")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        self._ended.difference_update(ids)
        self._ended_unknown = False
        return moved

    def can_write(self) -> None:
        """Take the write lock and give it back: raises when the database cannot be written."""
        self.db.execute_sql("BEGIN IMMEDIATE")
        self.db.execute_sql("ROLLBACK")

    def probe_write(self) -> None:
        """A real committed write (the files' stamps, rewritten): raises when the disk cannot take one."""
        self._write_meta()

    def restore(self) -> RestoredRuns:
        """Live runs only, oldest write first; the history is not read. A live row whose blob is not a JSON
        object is set aside (left as it is), so it cannot keep every other run from its restore."""
        runs: list[RunRecord] = []
        unreadable: list[Unreadable] = []
        cursor = self.db.connection().execute(_RESTORE)
        for row in cursor:
            record = _record(row)
            if isinstance(record, RunRecord):
                runs.append(record)
            else:
                unreadable.append(Unreadable(str(row[0]), record))
        return RestoredRuns(runs, unreadable)

    def get(self, run_id: str) -> RunRecord | None:
        """The run's row; None when there is none, or when its blob cannot be read (a set-aside row)."""
        conn = self.db.connection()
        for schema in ("main", "history"):
            row = conn.execute(_GET[schema], (run_id,)).fetchone()
            if row is not None:
                record = _record(row)
                return record if isinstance(record, RunRecord) else None
        return None

    def keyed(self, key: str) -> tuple[str, Keyed] | None:
        """The run an `Idempotency-Key` made, with what its first row kept, while the run's row is kept."""
        row = self.db.connection().execute(_KEYED, (key, key)).fetchone()
        return None if row is None else (str(row[1]), Keyed(key, str(row[0])))

    def finished(self, prefix: str, limit: int) -> list[RunRecord]:
        """`runs --all`: finished rows whose id starts with `prefix`, newest end first, at most
        `limit` — the history's, and any ended here and not yet moved; a row whose blob cannot be read is
        left out. Reading never touches a row's age (ADR-0065)."""
        conn = self.db.connection()
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = conn.execute(
            "SELECT run_id, status, blob, reason, updated_at FROM ("
            "SELECT run_id, status, blob, reason, updated_at FROM main.runs "
            "WHERE status != 'live' AND run_id LIKE ? ESCAPE '\\' UNION ALL "
            "SELECT run_id, status, blob, reason, updated_at FROM history.runs WHERE run_id LIKE ? ESCAPE '\\' "
            "AND run_id NOT IN (SELECT run_id FROM main.runs)) ORDER BY updated_at DESC LIMIT ?",
            (pattern, pattern, limit)).fetchall()
        records = (_record(row) for row in rows)
        # LIKE ignores case: the exact test is made here
        return [r for r in records if isinstance(r, RunRecord) and r.run_id.startswith(prefix)]

    def count_by_status(self) -> dict[str, int]:
        """Rows by status: the live file's scan and the history's indexed one (the StoreActor runs it at
        most once a second). A run caught between the files is counted once."""
        conn = self.db.connection()
        counts: dict[str, int] = {}
        for status, n in conn.execute(
                "SELECT status, COUNT(*) FROM main.runs WHERE status = 'live' OR run_id NOT IN "
                "(SELECT run_id FROM history.runs) GROUP BY status UNION ALL "
                "SELECT status, COUNT(*) FROM history.runs GROUP BY status"):
            counts[str(status)] = counts.get(str(status), 0) + int(n)
        return counts

    def footprint(self) -> files.Footprint:
        """The files' sizes, the history's bytes a finished run, the volume's room (the metrics)."""
        return files.footprint(self.db.connection(), os.path.dirname(self.path), (DB_FILE, HISTORY_FILE))

    def withdraw(self, run_id: str) -> bool:
        """Delete a live row whose create the client was told failed (its ask timed out); True if one was."""
        cursor = self.db.connection().execute("DELETE FROM main.runs WHERE run_id = ? AND status = 'live'",
                                              (run_id,))
        return int(cursor.rowcount) > 0

    def sweep(self, now: float) -> int:
        """Delete every finished row whose terminal write is older than the retention (7 days)."""
        with contextlib.suppress(sqlite3.OperationalError):
            self.settle()
        cursor = self.db.connection().execute("DELETE FROM history.runs WHERE updated_at < ?",
                                              (now - RETENTION_SECONDS,))
        return int(cursor.rowcount)


def _say_discarded(conn: sqlite3.Connection, schema: str, wal: files.WalCommits | None) -> None:
    """One line when recovery dropped committed frames of the WAL (sqlite says nothing of it)."""
    if wal is None or not wal.commits:
        return
    with contextlib.suppress(sqlite3.OperationalError):  # a disk that cannot write: not known then
        kept = int(conn.execute(f"PRAGMA {schema}.wal_checkpoint(PASSIVE)").fetchone()[1])
        line = files.discarded(wal, kept)
        if line is not None:
            log.error("%s", line)


def _stamp(conn: sqlite3.Connection) -> None:
    """Both files say they are ours, at this schema (inside the caller's transaction)."""
    for schema in ("main", "history"):
        conn.execute(f"PRAGMA {schema}.application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA {schema}.user_version = {SCHEMA_VERSION}")


# One encoder for every persist: `json.dumps` with options builds a new one each call (a tenth of a 1 KB
# persist, bench/store_persist.py).
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _encode(row: Row) -> str | StoreError:
    """The row's blob as stored (compact JSON), or why the store refuses the row."""
    if row.status not in STATUSES:
        return StoreError(f"status {row.status!r} is not one of {', '.join(STATUSES)}")
    if not row.run_id:
        return StoreError("a run needs an id")
    try:
        return _JSON.encode(row.blob)
    except (TypeError, ValueError, RecursionError) as e:
        return StoreError(f"run {row.run_id}: the snapshot is not JSON: {e}")


def _size(text: str) -> int:
    """The blob's size in bytes as stored (UTF-8), without encoding it when it is ASCII (a flag read)."""
    return len(text) if text.isascii() else len(text.encode())


def _write(conn: sqlite3.Connection, row: Row, text: str, now: float) -> StoreError | None:
    """One row's write, where its row is; the refusal that is our bug, if any (the disk's raises)."""
    if row.create:
        # A taken id is refused wherever its row is: here, or finished in the history.
        if conn.execute(_HAS["history"], (row.run_id,)).fetchone():
            return StoreError(f"run {row.run_id} exists")
        try:
            conn.execute(_INSERT, (row.run_id, row.status, text, row.reason, now, *_key(row)))
        except sqlite3.IntegrityError:
            return StoreError(f"run {row.run_id} exists")
        return None
    if conn.execute(_UPDATE_LIVE, (row.status, text, row.reason, now, row.run_id)).rowcount:
        return None  # the common case: a live run's next save
    for schema in ("main", "history"):  # finished: here (not yet moved), or in the history
        if conn.execute(_HAS[schema], (row.run_id,)).fetchone():
            if row.status == "live":
                return StoreError(f"run {row.run_id} has finished: it cannot be live again")
            conn.execute(_FINISHED_AGAIN[schema], (text, row.reason, row.run_id))
            return None
    conn.execute(_INSERT, (row.run_id, row.status, text, row.reason, now, *_key(row)))  # no row yet: its first
    return None


def _key(row: Row) -> tuple[str | None, str | None]:
    return (None, None) if row.keyed is None else (row.keyed.key, row.keyed.digest)


def _record(row: tuple[Any, ...]) -> RunRecord | str:
    """A row (run_id, status, blob, reason, updated_at) as a record, or what is wrong with its blob."""
    run_id, status, stored, reason, updated_at = row
    try:
        text = codec.inflate(stored)
    except ValueError as e:
        return f"its blob cannot be read: {e}"
    try:
        blob = json.loads(text)
    except (ValueError, RecursionError) as e:
        return f"its blob is not JSON: {e}"
    if not isinstance(blob, dict):
        return f"its blob is a JSON {type(blob).__name__}, not an object"
    try:
        return RunRecord(str(run_id), str(status), blob, reason, float(updated_at))
    except (TypeError, ValueError) as e:
        return f"its row cannot be read: {e}"
