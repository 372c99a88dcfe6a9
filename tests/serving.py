"""A `jr2-actors serve` process for tests: its environment, its address read from its log, its API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import requests

TOKEN = "serve-test-token-0123456789abcdef"
KEY = "serve-test-signing-key-0123456789abcdef-0123456789"


def serve_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")}
    env.update({"JR2_INSTANCE_TOKEN": TOKEN, "JR2_SIGNING_KEY": KEY, "PYTHONUNBUFFERED": "1"}, **extra)
    return env


def jr2(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jr2_actors", *args], capture_output=True, text=True,
                          env=env or serve_env(), timeout=timeout, check=False)


class Serve:
    """A `serve` process; its stderr is read on a thread so the API's address is known once it logs it."""

    def __init__(self, kubeconfig: str, state: Path, *, instance_harness: str = "") -> None:
        extra = ["--instance-harness", instance_harness] if instance_harness else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jr2_actors", "--log-level", "info", "serve", "--namespace", "jr2",
             "--state-dir", str(state), "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0", *extra],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=serve_env(TMPDIR=str(_tmp(state))))
        self.lines: list[str] = []
        self.url = ""
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(30):
            self.proc.kill()
            raise AssertionError("serve did not say where it listens:\n" + "".join(self.lines))

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            found = re.search(r"serving the API on (http://\S+);", line)
            if found:
                self.url = found.group(1)
                self._ready.set()
        self._ready.set()

    def call(self, method: str, path: str, **kw: Any) -> requests.Response:
        return requests.request(method, self.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10,
                                **kw)


def _tmp(state: Path) -> Path:
    """The process's temp folder, beside its state in the test's own: even a SIGKILLed `serve` (which
    cannot remove its TLS files) leaves nothing outside the test's folder."""
    folder = state.parent / f"{state.name}-tmp"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
