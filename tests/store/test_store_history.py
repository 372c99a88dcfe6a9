"""The history a store keeps (ADR-0065's week): a finished row compressed and read back equal, a store the
previous schema wrote opening with its rows, and an `Idempotency-Key` kept with a run's first row, found
again after a reopen, and freed with the row by the sweep."""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path

import pytest

from jr2_actors.store import codec
from jr2_actors.store.actor import StoreActor
from jr2_actors.store.files import APPLICATION_ID
from jr2_actors.store.messages import Healthy, Persist, Sweep
from jr2_actors.store.rows import RunStore
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.run_ids import Keyed
from tests.support.metrics_text import samples, value
from tests.support.waiting import wait_until

DAY = 86400.0
T0 = 1_790_000_000.0
FEED = [{"id": i, "at": T0 + i, "kind": "said", "fields": {"agent": "worker", "turn": 1, "text": "Done."}}
        for i in range(1, 40)]
BLOB = {"version": 1, "runId": "r-1", "status": "done", "document": {"name": "w", "start": "s"}, "feed": FEED}


def opened(where: Path) -> RunStore:
    store = RunStore(str(where))
    store.open()
    return store


def stored_blob(store: RunStore, run_id: str) -> object:
    """The history's blob as sqlite holds it, read on a connection of the test's own."""
    with sqlite3.connect(store.history_path) as db:
        (value,) = db.execute("SELECT blob FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return value


def test_a_finished_row_is_kept_compressed_and_reads_back_equal(tmp_path: Path) -> None:
    store = opened(tmp_path)
    store.persist("r-1", "live", BLOB, None, T0, create=True)
    with sqlite3.connect(store.path) as db:  # a live row stays JSON text (ADR-0065)
        assert isinstance(db.execute("SELECT blob FROM runs").fetchone()[0], str)
    store.persist("r-1", "done", BLOB, "ok", T0 + 1)
    kept = stored_blob(store, "r-1")
    text = json.dumps(BLOB, separators=(",", ":"))
    assert isinstance(kept, bytes) and kept[0] == codec.CODEC_ZLIB_1
    assert len(kept) * 3 < len(text.encode())  # the feed's repeated lines compress
    record = store.get("r-1")
    assert record is not None and (record.blob, record.reason, record.updated_at) == (BLOB, "ok", T0 + 1)
    assert [r.blob for r in store.finished("r-", 10)] == [BLOB]
    store.persist("r-1", "done", {**BLOB, "late": True}, "late", T0 + 5)  # a late save of it: compressed too
    assert isinstance(stored_blob(store, "r-1"), bytes)
    late = store.get("r-1")
    assert late is not None and late.blob == {**BLOB, "late": True}


def previous_schema_store(where: Path) -> None:
    """A store as the previous code (schema 2) left it: live rows in state.db, finished ones in history.db as
    JSON text, no key columns."""
    table = ("CREATE TABLE runs (run_id VARCHAR(255) NOT NULL PRIMARY KEY, status VARCHAR(255) NOT NULL, "
             "blob TEXT NOT NULL, reason TEXT, updated_at REAL NOT NULL)")
    for name, rows in (("state.db", [("r-live", "live", '{"n": 1}', None, T0)]),
                       ("history.db", [("r-old", "done", json.dumps(BLOB), "ok", T0 - DAY)])):
        with sqlite3.connect(where / name) as db:
            db.execute("PRAGMA journal_mode = wal")
            db.execute(table)
            if name == "history.db":
                db.execute("CREATE INDEX runs_updated_at ON runs (updated_at)")
                db.execute("CREATE INDEX runs_status ON runs (status)")
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute("PRAGMA user_version = 2")
            db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?)", rows)


def test_a_store_the_previous_code_wrote_opens_and_reads_its_uncompressed_history(tmp_path: Path) -> None:
    previous_schema_store(tmp_path)
    store = opened(tmp_path)
    assert [r.run_id for r in store.restore().runs] == ["r-live"]
    old = store.get("r-old")
    assert old is not None and old.blob == BLOB and isinstance(stored_blob(store, "r-old"), str)
    assert store.keyed("anything") is None  # its rows kept no key
    store.persist("r-new", "live", {"n": 2}, None, T0, create=True, keyed=Keyed("k", "d"))
    store.persist("r-new", "done", BLOB, None, T0 + 1)
    assert [r.run_id for r in store.finished("r-", 10)] == ["r-new", "r-old"]
    assert isinstance(stored_blob(store, "r-new"), bytes) and store.keyed("k") == ("r-new", Keyed("k", "d"))
    store.close()
    with sqlite3.connect(tmp_path / "history.db") as db:
        assert db.execute("PRAGMA user_version").fetchone() == (3,)


def test_a_key_is_kept_with_the_first_row_across_a_reopen_and_swept_with_it(tmp_path: Path) -> None:
    store = opened(tmp_path)
    store.persist("r-1", "live", {"n": 1}, None, T0, create=True, keyed=Keyed("k-1", "digest-1"))
    store.persist("r-2", "live", {"n": 1}, None, T0, create=True)
    store.persist("r-1", "live", {"n": 2}, None, T0 + 1)  # a later save keeps the key
    store.close()
    store = opened(tmp_path)
    assert store.keyed("k-1") == ("r-1", Keyed("k-1", "digest-1")) and store.keyed("k-2") is None
    store.persist("r-1", "done", {"n": 3}, None, T0 + 2)  # moved to the history: the key goes with it
    assert store.keyed("k-1") == ("r-1", Keyed("k-1", "digest-1"))
    assert store.sweep(T0 + 2 + 7 * DAY - 1) == 0 and store.keyed("k-1") is not None
    assert store.sweep(T0 + 2 + 7 * DAY + 1) == 1
    assert store.keyed("k-1") is None  # swept with its run: free again
    store.persist("r-3", "live", {}, None, T0, create=True, keyed=Keyed("k-3", "d"))
    assert store.withdraw("r-3") and store.keyed("k-3") is None  # a create taken back frees its key


@pytest.mark.parametrize(("stored", "problem"), [
    (b"", "empty"),
    (b"\x02" + zlib.compress(b"{}"), "unknown codec"),
    (b"\x01not zlib at all", "damaged"),
    (codec.deflate("{}")[:-3], "cut short"),
    (codec.deflate(b"\xff\xfe{}"), "not UTF-8"),
    (b"\x01" + (lambda c: c.compress(b"{}") + c.flush())(zlib.compressobj(zdict=b"another")), "damaged"),
    (12, "not int"),
])
def test_a_stored_blob_that_cannot_be_read_is_a_clear_error(stored: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        codec.inflate(stored)


def test_a_blob_that_inflates_past_the_bound_is_refused_without_inflating_it(monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = codec.deflate(b"{" + b" " * (4 * 1024 * 1024) + b"}")
    assert len(bomb) < 8 * 1024
    monkeypatch.setattr(codec, "MAX_INFLATED_BYTES", 1024 * 1024)
    with pytest.raises(ValueError, match="over 1048576 bytes"):
        codec.inflate(bomb)


def test_a_history_row_that_cannot_be_inflated_is_left_out_and_the_others_read(tmp_path: Path) -> None:
    store = opened(tmp_path)
    for run_id in ("r-1", "r-2"):
        store.persist(run_id, "live", BLOB, None, T0, create=True)
        store.persist(run_id, "done", BLOB, None, T0 + 1)
    with sqlite3.connect(store.history_path) as db:
        db.execute("UPDATE runs SET blob = ? WHERE run_id = 'r-1'", (b"\x01garbage",))
    assert store.get("r-1") is None
    assert [r.run_id for r in store.finished("r-", 10)] == ["r-2"]


def test_the_footprint_metrics_move_as_finished_runs_land_and_are_swept(tmp_path: Path) -> None:
    clock = VirtualClock(wall=T0)
    telemetry = Telemetry(clock=clock)
    ref = StoreActor.start(str(tmp_path), clock=clock, telemetry=telemetry)
    try:
        assert ref.ask(Healthy(), timeout=10) is True  # after the boot's recount
        boot = samples(telemetry.exposition().decode())
        assert value(boot, "jr2_store_finished_run_bytes") == 0
        capacity, available = (value(boot, f"jr2_store_volume_{n}_bytes") for n in ("capacity", "available"))
        assert isinstance(capacity, float) and isinstance(available, float) and capacity > available > 0
        for i in range(50):
            ref.ask(Persist(f"r-{i}", "live", BLOB, create=True), timeout=10)
            ref.ask(Persist(f"r-{i}", "done", BLOB), timeout=10)
        clock.advance(1.0)  # the recount a second after the writes
        wait_until(lambda: (value(telemetry.exposition().decode(), "jr2_store_finished_run_bytes") or 0) > 0)
        landed = samples(telemetry.exposition().decode())
        per_run = value(landed, "jr2_store_finished_run_bytes")
        assert isinstance(per_run, float) and 0 < per_run < len(json.dumps(BLOB))  # compressed
        assert (value(landed, "jr2_store_file_bytes", file="history.db-wal") or 0) > 0  # the moves went through the WAL
        clock.advance(8 * DAY)
        assert ref.ask(Sweep(), timeout=10) == 50
        clock.advance(1.0)
        wait_until(lambda: value(telemetry.exposition().decode(), "jr2_store_finished_run_bytes") == 0)
    finally:
        ref.stop(block=True, timeout=10)
