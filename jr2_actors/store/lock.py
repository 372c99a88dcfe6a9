"""The state directory's one owner: an exclusive `flock` on `<state-dir>/lock`, held for the process's life.

Two orchestrators on one `state.db` would each restore the same live runs and drive one set of Workspaces
and Leases. The lock is taken by `Orchestrator.start()` (so an embedding is as safe as `serve`) and given
back by its `stop()`; the kernel gives it back when the process dies, SIGKILL included, so a stale lock
file never blocks a restart. The holder writes its pid into the file, so the refusal can name it. An
`flock` is held by an open file description: a second orchestrator in the same process is refused too.
"""

from __future__ import annotations

import fcntl
import os

from jr2_actors.values.errors import Jr2Error

LOCK_FILE = "lock"


class StateDirInUse(Jr2Error):
    """Another process (or orchestrator) owns the state directory."""


class StateLock:
    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, LOCK_FILE)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock now or raise `StateDirInUse` naming the holder's pid; never waits."""
        if self._fd is not None:
            return
        os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise StateDirInUse(f"--state-dir {self.state_dir}: in use by {who} (it holds {self.path}); "
                                "one orchestrator per state directory") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the lock back (the file stays: removing it would race a process that just opened it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
