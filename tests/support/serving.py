"""A `jr2-actors serve` process for tests: its environment, its address read from its log, its API."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests

from jr2_actors.sim.serve_process import ServeProcess
from tests.support import cli_process

TOKEN = "serve-test-token-0123456789abcdef"
KEY = "serve-test-signing-key-0123456789abcdef-0123456789"


def serve_env(**extra: str) -> dict[str, str]:
    return cli_process.clean_env(**{"JR2_INSTANCE_TOKEN": TOKEN, "JR2_SIGNING_KEY": KEY, "PYTHONUNBUFFERED": "1",
                                    **extra})  # the test's own values win


def jr2(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return cli_process.jr2(*args, env=env or serve_env(), timeout=timeout)


class Serve(ServeProcess):
    """A `serve` process for a test: it has said where it listens before the constructor returns."""

    def __init__(self, kubeconfig: str, state: Path, *, instance_harness: str = "", extra: Sequence[str] = ()) -> None:
        extra = [*extra, *(["--instance-harness", instance_harness] if instance_harness else [])]
        super().__init__(kubeconfig, str(state), env=serve_env(TMPDIR=str(_tmp(state))), extra=extra)
        if not self.ready(30):
            self.proc.kill()
            raise AssertionError("serve did not say where it listens:\n" + "".join(self.lines))

    def call(self, method: str, path: str, **kw: Any) -> requests.Response:
        return requests.request(method, self.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10,
                                **kw)


def _tmp(state: Path) -> Path:
    """The process's temp folder, beside its state in the test's own: even a SIGKILLed `serve` (which
    cannot remove its TLS files) leaves nothing outside the test's folder."""
    folder = state.parent / f"{state.name}-tmp"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
