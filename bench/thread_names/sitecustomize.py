"""Loaded by `serve` when a bench puts this folder on its PYTHONPATH (`bench/serve_runs.py --threads-cpu`): each
thread's OS name (what /proc shows) becomes its Python name's kind, so the bench can sum the kernel's run time
by kind. A bench's instrument, never the product's: it uses `threading.setprofile`, which a profiler also uses.

The kind: the Python name before " (" (pykka's actor urn), less a trailing number (`-3`, `_3`), and, for our
threads named after a run or an author's word (`jr2-agent-<agent>`, `jr2-ws-timers-<sandbox>`), their first two
words; at most 15 bytes (the kernel's limit).
"""

from __future__ import annotations

import contextlib
import ctypes
import re
import sys
import threading
from typing import Any

_PR_SET_NAME = 15
_TRAILING_NUMBER = re.compile(r"[-_ ]?\d+$")
_NAMED_AFTER_A_RUN = re.compile(r"^(jr2-(?:agent|ws|revive))-.*")


def kind(name: str) -> str:
    name = _TRAILING_NUMBER.sub("", name.split(" (", 1)[0])
    return _NAMED_AFTER_A_RUN.sub(r"\1", name)[:15] or "thread"


try:
    _libc: Any = ctypes.CDLL(None, use_errno=True)
    _prctl = _libc.prctl
except (OSError, AttributeError):  # not Linux: nothing to name
    _prctl = None


def _name_then_stop(frame: object, event: str, arg: object) -> None:
    sys.setprofile(None)  # once, on the thread's first call: no cost after
    with contextlib.suppress(Exception):  # a name is a nicety: the thread runs regardless
        _prctl(_PR_SET_NAME, kind(threading.current_thread().name).encode()[:15], 0, 0, 0)


if _prctl is not None:
    threading.setprofile(_name_then_stop)
