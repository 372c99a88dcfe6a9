"""The client commands (`submit`, `status`, `runs`, `wait` ...) as processes, holding the API token the client
tests' servers take, and what a refused command must look like."""

from __future__ import annotations

import subprocess

from tests.support import cli_process

TOKEN = "cli-test-token-0123456789abcdef"


def jr2(*args: str, token: str | None = TOKEN, timeout: float = 60,
        tz: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli_process.jr2(*args, token=token, tz=tz, timeout=timeout)


def one_line_exit_2(out: subprocess.CompletedProcess[str], says: str) -> None:
    assert out.returncode == 2, out
    assert says in out.stderr and out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr, out.stderr
