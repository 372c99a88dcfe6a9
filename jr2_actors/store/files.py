"""The store's files on the volume: what they weigh (the metrics that size the volume, docs/operations.md),
who may read them (0600), and the checks made before sqlite opens them: a WAL index that cannot be written
(a SIGBUS otherwise), and a WAL whose committed frames sqlite's recovery will drop (said in one line).

`footprint` is read by the StoreActor when it recounts the rows (at boot, after a sweep, a second after
writes): every file's size, the history's bytes in use per finished row, and the volume's room.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sqlite3
import struct
from dataclasses import dataclass

SUFFIXES = ("", "-wal", "-shm")
APPLICATION_ID = 0x6A723261  # "jr2a": `PRAGMA application_id`, the mark of a file that is ours


@dataclass(frozen=True)
class Footprint:
    files: dict[str, int]  # file name → bytes on disk (a missing file is 0)
    history_bytes: int  # history.db's pages in use (its free pages left out)
    history_rows: int
    volume_available: int  # bytes an unprivileged writer may still use
    volume_capacity: int

    @property
    def finished_run_bytes(self) -> float:
        """What a finished run costs the history now: its bytes in use over its rows (0 when empty)."""
        return self.history_bytes / self.history_rows if self.history_rows else 0.0


def footprint(conn: sqlite3.Connection, state_dir: str, names: tuple[str, ...]) -> Footprint:
    files = {}
    for name in names:
        for suffix in SUFFIXES:
            try:
                files[name + suffix] = os.stat(os.path.join(state_dir, name + suffix)).st_size
            except FileNotFoundError:
                files[name + suffix] = 0
    pages = int(conn.execute("PRAGMA history.page_count").fetchone()[0])
    free = int(conn.execute("PRAGMA history.freelist_count").fetchone()[0])
    page_size = int(conn.execute("PRAGMA history.page_size").fetchone()[0])
    rows = int(conn.execute("SELECT COUNT(*) FROM history.runs").fetchone()[0])
    volume = os.statvfs(state_dir)
    return Footprint(files, (pages - free) * page_size, rows, volume.f_bavail * volume.f_frsize,
                     volume.f_blocks * volume.f_frsize)


def make_private(state_dir: str, names: tuple[str, ...]) -> None:
    """Every store file 0600 (the runs' documents and feeds are nobody else's): the databases created so
    before sqlite opens them — sqlite gives a WAL and a WAL index the mode of their database — and any
    file of an older start narrowed."""
    for name in names:
        path = os.path.join(state_dir, name)
        if not os.path.exists(path):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
        for suffix in SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                if os.stat(path + suffix).st_mode & 0o077:
                    os.chmod(path + suffix, 0o600)


class NotOurs(Exception):
    """A file the store cannot start on: one line naming it (the store raises it as `StoreUnusable`)."""


def check_ours(path: str, columns: frozenset[str], older: frozenset[str]) -> bool:
    """Whether the file at `path` carries our stamp; raises `NotOurs` when it is not a store of ours (its
    runs table has `columns`, or the `older` schema's). Read on a read-only connection of its own; what that
    reading made beside a refused file (sqlite makes a WAL database's `-wal` and `-shm` to read it even
    read-only) is removed with the refusal, so the file is left exactly as it was found."""
    made = [path + suffix for suffix in SUFFIXES[1:] if not os.path.lexists(path + suffix)]
    try:
        return _check_ours(path, columns, older)
    except NotOurs:
        for extra in made:  # a -wal this connection made holds no frame: it could write none
            with contextlib.suppress(OSError):
                if os.path.isfile(extra) and (extra.endswith("-shm") or os.path.getsize(extra) == 0):
                    os.remove(extra)
        raise


def _check_ours(path: str, columns: frozenset[str], older: frozenset[str]) -> bool:
    try:
        conn = sqlite3.connect(f"{pathlib.Path(path).as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise NotOurs(f"{path}: cannot open it: {e}") from None
    try:
        app = int(conn.execute("PRAGMA application_id").fetchone()[0])
        tables = {str(t) for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                  if not str(t).startswith("sqlite_")}
        found = {str(c[1]) for c in conn.execute("PRAGMA table_info(runs)")}
    except sqlite3.OperationalError as e:
        raise NotOurs(f"{path}: cannot read it: {e}") from None
    except sqlite3.DatabaseError as e:  # not sqlite at all, or damaged
        raise NotOurs(f"{path}: not a jr2 run store ({e})") from None
    finally:
        conn.close()
    if app not in (0, APPLICATION_ID):
        raise NotOurs(f"{path}: not a jr2 run store (another program's file: application_id "
                            f"{app:#x})")
    if app == 0 and tables - {"runs"}:
        raise NotOurs(f"{path}: not a jr2 run store (its tables: {', '.join(sorted(tables))})")
    if "runs" in tables and found not in (columns, older):
        raise NotOurs(f"{path}: not a jr2 run store (its runs table has the columns "
                            f"{', '.join(sorted(found))})")
    return app == APPLICATION_ID


def check_wal_index(path: str) -> None:
    """`NotOurs` when the WAL index (`-shm`) beside `path` cannot be written. sqlite maps it into memory and
    writes it there: a page the file system cannot back (a full volume, a sparse file past the quota) is a
    SIGBUS that kills the process with no line. So its blocks are allocated now, while a refusal can still
    be said (`posix_fallocate` over its length changes no byte)."""
    shm = path + "-shm"
    try:
        fd = os.open(shm, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return  # sqlite creates it, writing each page as it grows
    except OSError as e:
        raise NotOurs(f"{shm}: cannot write the WAL index: {e.strerror or e}") from None
    try:
        size = os.fstat(fd).st_size
        if size:
            os.posix_fallocate(fd, 0, size)
    except OSError as e:
        raise NotOurs(f"{shm}: cannot write the WAL index: {e.strerror or e}") from None
    finally:
        os.close(fd)


WAL_MAGIC = (0x377F0682, 0x377F0683)
WAL_HEADER = 32
FRAME_HEADER = 24


@dataclass(frozen=True)
class WalCommits:
    """The commit frames of a WAL's current generation (its header's salts), by 1-based frame number."""

    path: str
    commits: tuple[int, ...]


def wal_commits(path: str) -> WalCommits | None:
    """Read before sqlite opens the database: the WAL's commit frames. None when there is no WAL or it is
    not one (sqlite then ignores it too). Reads the frame headers only, never a whole page."""
    wal = path + "-wal"
    try:
        with open(wal, "rb") as f:
            header = f.read(WAL_HEADER)
            if len(header) < WAL_HEADER:
                return None
            magic, _, page_size, _, salt1, salt2 = struct.unpack(">6I", header[:24])
            if magic not in WAL_MAGIC or page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
                return None
            commits = []
            frame = 0
            while True:
                head = f.read(FRAME_HEADER)
                if len(head) < FRAME_HEADER:
                    break
                frame += 1
                _, size_after, s1, s2 = struct.unpack(">4I", head[:16])
                if (s1, s2) == (salt1, salt2) and size_after:
                    commits.append(frame)
                f.seek(page_size, os.SEEK_CUR)
    except FileNotFoundError:
        return None
    return WalCommits(wal, tuple(commits))


def discarded(before: WalCommits | None, kept_frames: int) -> str | None:
    """One line when sqlite's recovery kept fewer frames than the WAL held committed (a damaged frame ends
    the recovery there, and every transaction after it is dropped without a word), else None."""
    if before is None:
        return None
    lost = [frame for frame in before.commits if frame > kept_frames]
    if not lost:
        return None
    return (f"{before.path}: {len(lost)} committed transaction(s) after frame {kept_frames} were discarded at "
            f"open (the WAL is damaged there); what they wrote is lost — runs accepted in them are gone and "
            f"their Sandboxes are left to the cluster")
