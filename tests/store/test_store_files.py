"""The store's files before sqlite opens them: 0600, a WAL index that cannot be written refused in one line
(sqlite would SIGBUS on it), and a WAL whose committed frames recovery drops said in one line."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sqlite3
import stat
import struct
from pathlib import Path

import pytest

from jr2_actors.store import files
from jr2_actors.store.messages import StoreUnusable
from jr2_actors.store.rows import RunStore

T0 = 1_790_000_000.0


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_store_file_is_0600_new_or_left_wider_by_an_older_start(tmp_path: Path) -> None:
    store = RunStore(str(tmp_path))
    store.open()
    store.persist("r-1", "live", {}, None, T0, create=True)
    store.persist("r-1", "done", {}, None, T0)
    names = ["state.db", "state.db-wal", "state.db-shm", "history.db", "history.db-wal", "history.db-shm"]
    assert {n: mode(tmp_path / n) for n in names} == dict.fromkeys(names, 0o600)
    store.close()
    for name in ("state.db", "history.db"):
        os.chmod(tmp_path / name, 0o644)  # as the previous code left them
    again = RunStore(str(tmp_path))
    again.open()
    assert {n: mode(tmp_path / n) for n in ("state.db", "history.db")} == {"state.db": 0o600, "history.db": 0o600}
    again.close()


def test_a_wal_index_that_cannot_be_opened_for_writing_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "state.db-shm").mkdir()  # root ignores a mode: a directory cannot be opened to write either
    with pytest.raises(StoreUnusable, match=r"state\.db-shm: cannot write the WAL index: Is a directory"):
        RunStore(str(tmp_path)).open()


def test_a_wal_index_the_volume_cannot_back_is_refused_before_sqlite_maps_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(str(tmp_path))
    store.open()
    store.persist("r-1", "live", {}, None, T0, create=True)
    image = tmp_path / "image"  # the files as a crash leaves them: the WAL index is there
    image.mkdir()
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        shutil.copy(tmp_path / name, image / name)
    store.close()

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(StoreUnusable, match=r"state\.db-shm: cannot write the WAL index: No space left on device"):
        RunStore(str(image)).open()


def crash_image(where: Path, transactions: int) -> Path:
    """A store as a SIGKILL leaves it: `transactions` committed runs in the WAL, no checkpoint."""
    store = RunStore(str(where))
    store.open()
    store.db.connection().execute("PRAGMA main.wal_autocheckpoint = 0")  # type: ignore[no-untyped-call]
    for i in range(transactions):
        store.persist(f"r-{i}", "live", {"i": i, "pad": "x" * 3000}, None, T0, create=True)
    image = where / "image"
    image.mkdir()
    for name in ("state.db", "state.db-wal", "history.db"):
        shutil.copy(where / name, image / name)
    store.close()
    return image


def test_a_wal_whose_committed_frames_recovery_drops_is_said_in_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    image = crash_image(tmp_path, 6)
    wal = image / "state.db-wal"
    before = files.wal_commits(str(image / "state.db"))
    assert before is not None and len(before.commits) >= 6
    page_size = struct.unpack(">I", wal.read_bytes()[8:12])[0]
    damaged = before.commits[2]  # a frame in the middle of the log: its page's bytes changed
    with open(wal, "r+b") as f:
        f.seek(files.WAL_HEADER + (damaged - 1) * (files.FRAME_HEADER + page_size) + files.FRAME_HEADER + 100)
        f.write(b"\xff" * 8)
    store = RunStore(str(image))
    with caplog.at_level(logging.ERROR, logger="jr2_actors.store.rows"):
        store.open()
    lines = [r.getMessage() for r in caplog.records if "discarded at open" in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert lines[0].startswith(f"{wal}: ") and "committed transaction(s)" in lines[0]
    restored = [r.run_id for r in store.restore().runs]
    assert len(restored) < 6  # what the line says was lost is what is missing
    store.close()


def test_a_clean_wal_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    image = crash_image(tmp_path, 3)
    store = RunStore(str(image))
    with caplog.at_level(logging.ERROR, logger="jr2_actors.store.rows"):
        store.open()
    assert not caplog.records and len(store.restore().runs) == 3
    store.close()


@pytest.mark.parametrize("content", [
    b"", b"\x00" * 31, b"not a wal" * 10,
    struct.pack(">6I", 0x377F0682, 0, 1000, 0, 1, 2),  # a page size that is no power of two
    struct.pack(">8I", 0x377F0682, 3007000, 4096, 0, 1, 2, 0, 0) + b"\x00" * 10,  # a frame cut short
    struct.pack(">8I", 0x377F0682, 3007000, 2**31, 0, 1, 2, 0, 0),  # a page size far past sqlite's bound
])
def test_a_wal_scan_of_hostile_bytes_is_none_or_no_commits(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "x.db-wal").write_bytes(content)
    found = files.wal_commits(str(tmp_path / "x.db"))
    assert found is None or found.commits == ()
    assert files.discarded(found, 0) is None


def test_a_wal_scan_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert files.wal_commits(str(tmp_path / "none.db")) is None
    with sqlite3.connect(tmp_path / "plain.db") as db:  # a rollback-journal database has no WAL at all
        db.execute("CREATE TABLE t (x)")
    assert files.wal_commits(str(tmp_path / "plain.db")) is None
