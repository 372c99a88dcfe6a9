"""Every process a test starts, so none outlives it: a test that fails (or a serve slow to stop under load)
before its own cleanup would otherwise leave a `serve` running after the suite. tests/conftest.py installs
the recording and kills what is left after each test; a tier whose process is meant to outlive a test
(tests/real/'s session control plane) takes it out of `STARTED`."""

from __future__ import annotations

import subprocess
import weakref
from typing import Any

STARTED: weakref.WeakSet[subprocess.Popen[Any]] = weakref.WeakSet()
_popen_init = subprocess.Popen.__init__


def _recorded_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
    _popen_init(self, *args, **kwargs)
    STARTED.add(self)


def record_every_process() -> None:
    """Record each `subprocess.Popen` from now on in `STARTED` (once: a second call changes nothing)."""
    if subprocess.Popen.__init__ is not _recorded_init:
        subprocess.Popen.__init__ = _recorded_init  # type: ignore[method-assign]


def kill_what_is_left() -> None:
    for proc in list(STARTED):
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        STARTED.discard(proc)
