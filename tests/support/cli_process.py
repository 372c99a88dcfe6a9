"""`jr2-actors` as a user runs it, for the tests of commands: a process of its own, with no JR2_ variable of
the test's environment leaking in unless the test sets it."""

from __future__ import annotations

import os
import subprocess
import sys


def clean_env(**extra: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("JR2_")} | extra


def jr2(*args: str, env: dict[str, str] | None = None, token: str | None = None, tz: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(clean_env() if env is None else env)
    if token is not None:
        env["JR2_INSTANCE_TOKEN"] = token
    if tz is not None:
        env["TZ"] = tz
    return subprocess.run([sys.executable, "-m", "jr2_actors", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)
