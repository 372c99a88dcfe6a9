"""A test's own interpreter switch interval, unlike both CPython's default and serve's, put back after it."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

OWN = 0.008


@contextlib.contextmanager
def at_own_interval() -> Iterator[float]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(OWN)
    try:
        yield OWN
    finally:
        sys.setswitchinterval(before)
