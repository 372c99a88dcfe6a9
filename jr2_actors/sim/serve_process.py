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

LISTENING = re.compile(r"serving the API on (http://\S+);")
KEPT_LINES = 2000  # a process that logs without end keeps the head of its log, not all of it


class ServeProcess:
    """One `serve` on `127.0.0.1:0`; its stderr is read on a thread so the address is known once logged."""

    def __init__(self, kubeconfig: str, state: str, *, env: dict[str, str], extra: Sequence[str] = ()) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jr2_actors", "--log-level", "info", "serve", "--namespace", "jr2",
             "--state-dir", state, "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0", *extra],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        self.lines: list[str] = []
        self.url = ""
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True, name="jr2-serve-log").start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if len(self.lines) < KEPT_LINES:
                self.lines.append(line)
            found = LISTENING.search(line)
            if found:
                self.url = found.group(1)
                self._ready.set()
        self._ready.set()  # the process ended without saying where it listens

    def ready(self, seconds: float) -> bool:
        """Whether it said where it listens within `seconds` (False also when it ended first)."""
        return self._ready.wait(seconds) and bool(self.url)

    def tracebacks(self) -> list[str]:
        return [line.strip()[:200] for line in self.lines if "Traceback" in line]
