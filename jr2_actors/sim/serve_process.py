"""A `jr2-actors serve` child process whose API address is read from its own log.

The crash trials and the tests both start `serve` this way (a real process on loopback, as a deployed
orchestrator runs), so there is one place that knows the command line and the line that names the address.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO

LISTENING = re.compile(r"serving the API on (http://\S+);")
KEPT_LINES = 2000  # a process that logs without end keeps the head of its log, not all of it


class LogTail:
    """A child's stream read on a thread to its end (a pipe nobody reads blocks the child once it is full):
    the head of its lines kept, and the first line matching `ready` waited for."""

    def __init__(self, stream: IO[str], ready: re.Pattern[str] | None, name: str, *, keep: int = KEPT_LINES) -> None:
        self.lines: list[str] = []
        self._keep = keep
        self.found: re.Match[str] | None = None
        self._stream = stream
        self._ready_pattern = ready
        self._ready = threading.Event()
        self._ended = threading.Event()
        threading.Thread(target=self._read, daemon=True, name=name).start()

    def _read(self) -> None:
        for line in self._stream:
            if len(self.lines) < self._keep:
                self.lines.append(line)
            if self.found is None and self._ready_pattern is not None:
                self.found = self._ready_pattern.search(line)
                if self.found is not None:
                    self._ready.set()
        self._ready.set()  # the stream ended (without the line, if it was not found)
        self._ended.set()

    def ready(self, seconds: float) -> bool:
        """Whether the line came within `seconds` (False also when the stream ended first)."""
        return self._ready.wait(seconds) and self.found is not None

    def whole(self, seconds: float) -> str:
        """The lines kept, once the stream ended (the child exited) or `seconds` passed."""
        self._ended.wait(seconds)
        return "".join(self.lines)


class ServeProcess:
    """One `serve` on `127.0.0.1:0`; its stderr is read on a thread so the address is known once logged."""

    def __init__(self, kubeconfig: str, state: str, *, env: dict[str, str], extra: Sequence[str] = (),
                 keep: int = KEPT_LINES) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jr2_actors", "--log-level", "info", "serve", "--namespace", "jr2",
             "--state-dir", state, "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0", *extra],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        assert self.proc.stderr is not None
        self.log = LogTail(self.proc.stderr, LISTENING, "jr2-serve-log", keep=keep)
        self.lines = self.log.lines

    @property
    def url(self) -> str:
        return "" if self.log.found is None else self.log.found.group(1)

    def ready(self, seconds: float) -> bool:
        """Whether it said where it listens within `seconds` (False also when it ended first)."""
        return self.log.ready(seconds)

    def tracebacks(self) -> list[str]:
        return [line.strip()[:200] for line in self.lines if "Traceback" in line]
