"""The run store: WAL + NORMAL, one row per run, restore of live rows only, the 7-day sweep, crash survival."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import cast

import pytest

from jr2_actors.store.actor import StoreActor
from jr2_actors.store.files import APPLICATION_ID
from jr2_actors.store.messages import (
    DiskWriteFailed,
    Fetch,
    Healthy,
    Persist,
    Restore,
    RestoredRuns,
    RunRecord,
    StoreError,
    StoreUnusable,
    Sweep,
)
from jr2_actors.store.rows import Row, RunStore
from jr2_actors.testing.clock import VirtualClock
from tests.support.stores import unwritable

DAY = 86400.0
T0 = 1_790_000_000.0


def rows_on_disk(store: RunStore) -> dict[str, list[str]]:
    """The run ids in each file, read on a connection of the test's own."""
    found = {}
    for name, path in (("live", store.path), ("history", store.history_path)):
        with sqlite3.connect(path) as db:
            found[name] = sorted(str(r) for (r,) in db.execute("SELECT run_id FROM runs"))
    return found


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = RunStore(str(tmp_path))
    s.open()
    return s


def test_wal_and_synchronous_normal_are_read_back(store: RunStore, tmp_path: Path) -> None:
    store.persist("r1", "live", {"state": "code"}, None, T0)
    assert store.journal_mode == "wal"
    assert store.synchronous == 1  # NORMAL
    assert (tmp_path / "state.db-wal").exists()


def test_one_row_per_run_upserted(store: RunStore) -> None:
    store.persist("r1", "live", {"state": "code"}, None, T0)
    store.persist("r1", "live", {"state": "review"}, None, T0 + 1)
    store.persist("r1", "failed", {"state": "failed"}, "provider limit: retries ran out", T0 + 2)
    record = store.get("r1")
    assert record is not None
    assert (record.status, record.blob, record.reason, record.updated_at) == (
        "failed", {"state": "failed"}, "provider limit: retries ran out", T0 + 2)
    assert rows_on_disk(store) == {"live": [], "history": ["r1"]}  # one row: the run's, moved once it ended


def test_restore_reads_live_rows_only_and_never_parses_finished_ones(store: RunStore) -> None:
    store.persist("a", "live", {"n": 1}, None, T0)
    store.persist("b", "done", {"n": 2}, None, T0)
    store.persist("c", "live", {"n": 3}, None, T0 + 1)
    conn = sqlite3.connect(store.path)
    conn.execute("update runs set blob = '{not json' where run_id = 'b'")  # a finished row, damaged
    conn.commit()
    assert [(r.run_id, r.blob) for r in store.restore().runs] == [("a", {"n": 1}), ("c", {"n": 3})]


def test_sweep_removes_finished_rows_older_than_a_week_never_live(store: RunStore) -> None:
    for status in ("done", "failed", "error", "cancelled", "lost", "drifted"):
        store.persist(f"old-{status}", status, {}, None, T0)
    store.persist("recent-done", "done", {}, None, T0 + 6 * DAY)
    store.persist("old-live", "live", {}, None, T0)
    assert store.sweep(T0 + 7 * DAY + 1) == 6
    assert store.get("recent-done") is not None
    assert store.get("old-live") is not None
    assert store.get("old-done") is None


@pytest.mark.parametrize(("status", "blob"), [("running", {}), ("live", {"x": float("nan")}), ("live", {"x": {1, 2}})])
def test_bad_persists_are_refused_by_name(store: RunStore, status: str, blob: dict[str, object]) -> None:
    with pytest.raises(StoreError):
        store.persist("r", status, blob, None, T0)


def test_a_persist_survives_the_process_being_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, signal
        from jr2_actors.store.rows import RunStore
        s = RunStore({str(tmp_path)!r})
        s.open()
        for i in range(50):
            s.persist(f"r{{i}}", "live", {{"i": i}}, None, 1.0)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, check=False)
    assert result.returncode == -9
    after = RunStore(str(tmp_path))
    after.open()
    assert [r.blob["i"] for r in after.restore().runs] == list(range(50))


def test_store_actor_persists_by_ask_restores_and_sweeps_at_boot(tmp_path: Path) -> None:
    seed = RunStore(str(tmp_path))
    seed.open()
    seed.persist("stale", "done", {}, None, T0 - 8 * DAY)
    seed.persist("kept", "live", {"s": 1}, None, T0 - 8 * DAY)
    seed.close()
    clock = VirtualClock(wall=T0)
    # The hourly chain is not due within the 8 days advanced below: its own Sweep, told from the timer
    # thread, would race this test's and could take r2 first (the asked Sweep then counts 0).
    ref = StoreActor.start(str(tmp_path), clock=clock, sweep_interval=30 * DAY)
    try:
        assert ref.ask(Fetch("stale"), timeout=10) is None  # swept at boot
        ref.ask(Persist("r2", "live", {"state": "code"}), timeout=10)
        restored = cast(RestoredRuns, ref.ask(Restore(), timeout=10))
        assert [r.run_id for r in restored.runs] == ["kept", "r2"]
        ref.ask(Persist("r2", "done", {"state": "done"}), timeout=10)
        clock.advance(8 * DAY)
        assert ref.ask(Sweep(), timeout=10) == 1
        assert ref.ask(Fetch("r2"), timeout=10) is None
    finally:
        ref.stop(block=True, timeout=10)


def test_re_persisting_a_finished_run_keeps_its_terminal_time(store: RunStore) -> None:
    store.persist("r1", "live", {"s": 1}, None, T0)
    store.persist("r1", "done", {"s": 2}, None, T0 + DAY)
    store.persist("r1", "done", {"s": 3}, "a late save", T0 + 6 * DAY)  # must not restart the 7 days
    record = store.get("r1")
    assert record is not None and record.updated_at == T0 + DAY and record.blob == {"s": 3}
    assert store.sweep(T0 + 8.5 * DAY) == 1  # 7 days after the terminal write, not after the late save


def test_a_finished_run_never_goes_back_to_live(store: RunStore) -> None:
    store.persist("r1", "live", {"s": 1}, None, T0)
    store.persist("r1", "failed", {"s": 2}, "boom", T0 + 1)
    with pytest.raises(StoreError, match="cannot be live again"):
        store.persist("r1", "live", {"s": 3}, None, T0 + 2)
    record = store.get("r1")
    assert record is not None and (record.status, record.blob) == ("failed", {"s": 2})
    assert [r.run_id for r in store.restore().runs] == []


# -- issue 16 item 8: a file that is not ours; a row that cannot be read -----------------------------------

def test_a_file_that_is_not_sqlite_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "state.db").write_bytes(bytes(range(256)) * 32)  # random-looking bytes, not a database
    with pytest.raises(StoreUnusable, match=r"state\.db: not a jr2 run store \(file is not a database\)"):
        RunStore(str(tmp_path)).open()


@pytest.mark.parametrize(("schema", "says"), [
    ("CREATE TABLE runs (id INTEGER, name TEXT)", "its runs table has the columns id, name"),
    ("CREATE TABLE orders (id INTEGER)", "its tables: orders"),
    ("PRAGMA application_id = 1234", "another program's file: application_id 0x4d2"),
])
def test_another_programs_or_another_schemas_file_is_refused_and_left_as_it_is(tmp_path: Path, schema: str,
                                                                                says: str) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as db:
        db.execute(schema)
    before = path.read_bytes()
    with pytest.raises(StoreUnusable, match=re.escape(says)):
        RunStore(str(tmp_path)).open()
    assert path.read_bytes() == before  # nothing of ours was written into someone else's file


def test_a_store_from_before_the_stamp_is_ours_and_is_stamped(tmp_path: Path) -> None:
    old = RunStore(str(tmp_path))
    old.open()
    old.persist("r1", "live", {"s": 1}, None, T0)
    old.close()
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("PRAGMA application_id = 0")  # what a store written before the stamp carries
    again = RunStore(str(tmp_path))
    again.open()
    assert [r.run_id for r in again.restore().runs] == ["r1"]
    again.close()
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)


def test_a_live_row_that_cannot_be_read_is_set_aside_and_every_other_run_is_restored(store: RunStore) -> None:
    store.persist("a", "live", {"n": 1}, None, T0)
    store.persist("bad", "live", {"n": 2}, None, T0 + 1)
    store.persist("list", "live", {"n": 3}, None, T0 + 2)
    store.persist("c", "live", {"n": 4}, None, T0 + 3)
    with sqlite3.connect(store.path) as conn:
        conn.execute("update runs set blob = '{not json' where run_id = 'bad'")
        conn.execute("update runs set blob = '[1, 2]' where run_id = 'list'")
    restored = store.restore()
    assert [r.run_id for r in restored.runs] == ["a", "c"]
    assert [(u.run_id, u.problem.split(":")[0]) for u in restored.unreadable] == [
        ("bad", "its blob is not JSON"), ("list", "its blob is a JSON list, not an object")]
    assert store.get("bad") is None  # not served either; the row itself is left as it is
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("select status, blob from runs where run_id = 'bad'").fetchone() == ("live", "{not json")


def test_a_first_row_never_overwrites_a_taken_id(store: RunStore) -> None:
    store.persist("r1", "live", {"s": "set aside"}, None, T0)
    with pytest.raises(StoreError, match="run r1 exists"):
        store.persist("r1", "live", {"s": "new"}, None, T0 + 1, create=True)
    record = store.get("r1")
    assert record is not None and record.blob == {"s": "set aside"}


def test_the_store_actor_answers_a_file_not_ours_to_the_boots_restore(tmp_path: Path) -> None:
    (tmp_path / "state.db").write_bytes(b"\x13not sqlite at all" * 100)
    ref = StoreActor.start(str(tmp_path))
    try:
        with pytest.raises(StoreUnusable, match="not a jr2 run store"):
            ref.ask(Restore(), timeout=10)
        assert "not a jr2 run store" in str(ref.ask(Healthy(), timeout=10))
    finally:
        ref.stop(block=True, timeout=10)


# -- issue 16 item 6: a store that cannot write says so, and says so no longer once it can ------------------

def test_a_store_that_cannot_write_answers_write_failed_and_health_follows_the_present(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse = unwritable(monkeypatch)
    ref = StoreActor.start(str(tmp_path))
    try:
        ref.ask(Persist("r1", "live", {"s": 1}), timeout=10)
        assert ref.ask(Healthy(), timeout=10) is True
        refuse.set()
        with pytest.raises(DiskWriteFailed, match="attempt to write a readonly database"):
            ref.ask(Persist("r1", "live", {"s": 2}), timeout=10)
        assert "readonly" in str(ref.ask(Healthy(), timeout=10))
        assert "readonly" in str(ref.ask(Healthy(), timeout=10))  # still: its probe is a real write
        refuse.clear()
        assert ref.ask(Healthy(), timeout=10) is True  # no run had to write for it to know
        record = ref.ask(Fetch("r1"), timeout=10)
        assert isinstance(record, RunRecord) and record.blob == {"s": 1}  # the last row written is kept
    finally:
        ref.stop(block=True, timeout=10)


# Schema 1, as the previous version wrote it (read back from a file it made): one file, every row, peewee's
# two indexes. Issue 18 moves its finished rows to history.db at the first open.
SCHEMA_1 = (
    'CREATE TABLE "runs" ("run_id" VARCHAR(255) NOT NULL PRIMARY KEY, "status" VARCHAR(255) NOT NULL, '
    '"blob" TEXT NOT NULL, "reason" TEXT, "updated_at" REAL NOT NULL)',
    'CREATE INDEX "run_status" ON "runs" ("status")',
    'CREATE INDEX "run_updated_at" ON "runs" ("updated_at")',
    f"PRAGMA application_id = {APPLICATION_ID}",
    "PRAGMA user_version = 1",
)


def schema_1_store(path: Path, rows: list[tuple[str, str, str, str | None, float]]) -> None:
    with sqlite3.connect(path / "state.db") as db:
        db.execute("PRAGMA journal_mode = wal")
        for statement in SCHEMA_1:
            db.execute(statement)
        db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?)", rows)


def test_a_store_of_the_previous_schema_opens_restores_and_keeps_its_history(tmp_path: Path) -> None:
    schema_1_store(tmp_path, [("old-done", "done", '{"n": 1}', None, T0 - 8 * DAY),
                              ("live-a", "live", '{"n": 2}', None, T0 - 9 * DAY),
                              ("failed", "failed", '{"n": 3}', "boom", T0 - DAY),
                              ("live-b", "live", '{"n": 4}', None, T0)])
    store = RunStore(str(tmp_path))
    store.open()
    assert [(r.run_id, r.blob) for r in store.restore().runs] == [("live-a", {"n": 2}), ("live-b", {"n": 4})]
    assert rows_on_disk(store) == {"live": ["live-a", "live-b"], "history": ["failed", "old-done"]}
    failed = store.get("failed")
    assert failed is not None and (failed.status, failed.reason, failed.updated_at) == ("failed", "boom", T0 - DAY)
    assert store.count_by_status() == {"live": 2, "done": 1, "failed": 1}
    assert store.sweep(T0) == 1  # the week still counts from the terminal write
    with pytest.raises(StoreError, match="exists"):
        store.persist("failed", "live", {}, None, T0, create=True)  # a finished id is still taken
    with pytest.raises(StoreError, match="cannot be live again"):
        store.persist("failed", "live", {}, None, T0)
    store.close()
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("PRAGMA user_version").fetchone() == (3,)
        assert db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall() == [
            ("runs_key",)]  # schema 1's are gone; the idempotency keys' (schema 3) is the one left
    again = RunStore(str(tmp_path))  # and it opens again as it is now
    again.open()
    assert [r.run_id for r in again.restore().runs] == ["live-a", "live-b"]


def test_a_run_that_ends_moves_to_the_history_and_a_crash_between_the_moves_leaves_it_finished(
        store: RunStore, tmp_path: Path) -> None:
    store.persist("r1", "live", {"s": 1}, None, T0, create=True)
    store.persist("r2", "live", {"s": 1}, None, T0, create=True)
    store.persist_many([Row("r1", "done", {"s": 2})], T0 + 1)  # ended; the StoreActor settles after answering
    assert rows_on_disk(store) == {"live": ["r1", "r2"], "history": []}
    assert [r.run_id for r in store.restore().runs] == ["r2"]  # an ended row not yet moved is not restored
    store.close()  # as if killed before the move: the next open moves it
    again = RunStore(str(tmp_path))
    again.open()
    assert rows_on_disk(again) == {"live": ["r2"], "history": ["r1"]}
    record = again.get("r1")
    assert record is not None and (record.status, record.blob, record.updated_at) == ("done", {"s": 2}, T0 + 1)
    with sqlite3.connect(again.path) as db:  # the other crash: copied to the history, not yet deleted here
        db.execute("INSERT INTO runs (run_id, status, blob, reason, updated_at) "
                   "VALUES ('r1', 'done', '{\"s\": 2}', NULL, ?)", (T0 + 1,))
    assert again.count_by_status() == {"live": 1, "done": 1}  # counted once
    again.close()
    third = RunStore(str(tmp_path))
    third.open()
    assert rows_on_disk(third) == {"live": ["r2"], "history": ["r1"]}
    third.persist("r1", "done", {"s": 3}, "late", T0 + 5)  # a late save of a finished run: in the history
    record = third.get("r1")
    assert record is not None and (record.blob, record.reason, record.updated_at) == ({"s": 3}, "late", T0 + 1)


def test_a_history_file_that_is_not_ours_is_refused_by_name_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA application_id = 1234")
    before = path.read_bytes()
    with pytest.raises(StoreUnusable, match=re.escape(f"{path}: not a jr2 run store (another program's file")):
        RunStore(str(tmp_path)).open()
    assert path.read_bytes() == before
