"""`switch_interval`: a function run under an interpreter switch interval of its own (`sys.setswitchinterval`).

Each thread waiting for CPython's interpreter lock wakes once a switch interval to ask for it, so a process of
thousands of threads (serve runs ~3 a live run) spends its cores in the kernel on those wakes at CPython's 5 ms.
The process's own interval comes back when the last such function of the process returns: serve runs inside a
test's process too, and an embedding process keeps its own.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import ParamSpec

P = ParamSpec("P")


class _Switched:
    """The functions running under it in this process, and the interval the process had before the first."""

    lock = threading.Lock()
    running = 0
    previous = 0.0


def switch_interval(seconds: float) -> Callable[[Callable[P, int]], Callable[P, int]]:
    def wrap(fn: Callable[P, int]) -> Callable[P, int]:
        @functools.wraps(fn)
        def tuned(*args: P.args, **kwargs: P.kwargs) -> int:
            with _Switched.lock:
                if _Switched.running == 0:
                    _Switched.previous = sys.getswitchinterval()
                    sys.setswitchinterval(seconds)
                _Switched.running += 1
            try:
                return fn(*args, **kwargs)
            finally:
                with _Switched.lock:
                    _Switched.running -= 1
                    if _Switched.running == 0:
                        sys.setswitchinterval(_Switched.previous)
        return tuned
    return wrap
