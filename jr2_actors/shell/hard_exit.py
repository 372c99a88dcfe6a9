"""`HardExit`: a process exit that needs no interpreter lock — a POSIX timer whose expiry runs libc's `_exit` on a
thread of its own (`SIGEV_THREAD`), so it fires even while thousands of threads keep every Python thread from
running (serve's stop watchdog is the one user).

Why not a Python timer alone: a Python thread must take the interpreter lock to run, and with 5,000 seats'
threads waking at once the lock's waiters spent the machine in the kernel; serve's own watchdog timer ran 65 s
late. The kernel's timer and glibc's notification thread take no lock of ours. Linux with glibc (where serve
runs); elsewhere `arm` says so and returns None, and the Python watchdog stands alone.
"""

from __future__ import annotations

import ctypes
import logging
import math
import sys

log = logging.getLogger(__name__)

_CLOCK_MONOTONIC = 1
_SIGEV_THREAD = 2


class _SigVal(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]


class _Thread(ctypes.Structure):
    _fields_ = [("function", ctypes.c_void_p), ("attribute", ctypes.c_void_p)]


class _Notify(ctypes.Union):
    _fields_ = [("pad", ctypes.c_int * 12), ("thread", _Thread)]


class _SigEvent(ctypes.Structure):  # struct sigevent: 64 bytes on glibc's 64-bit ABIs
    _fields_ = [("value", _SigVal), ("signo", ctypes.c_int), ("notify", ctypes.c_int), ("un", _Notify)]


class _TimeSpec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("interval", _TimeSpec), ("value", _TimeSpec)]


class HardExit:
    """Armed: `_exit(code)` in `seconds` unless cancelled first. `_exit` takes the notification's value as its
    status: a `union sigval` holding the code is passed in the first argument's register on glibc's ABIs."""

    def __init__(self, libc: ctypes.CDLL, seconds: float, code: int) -> None:
        self._libc = libc
        self._timer: ctypes.c_void_p | None = ctypes.c_void_p()
        event = _SigEvent()
        event.value.sival_ptr = code  # the whole union: its low half is the int `_exit` reads
        event.notify = _SIGEV_THREAD
        event.un.thread.function = ctypes.cast(libc._exit, ctypes.c_void_p).value
        if libc.timer_create(_CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(self._timer)) != 0:
            raise OSError(ctypes.get_errno(), "timer_create")
        whole = math.floor(seconds)
        due = _ITimerSpec(value=_TimeSpec(whole, max(int((seconds - whole) * 1e9), 1 if whole == 0 else 0)))
        if libc.timer_settime(self._timer, 0, ctypes.byref(due), None) != 0:
            libc.timer_delete(self._timer)
            raise OSError(ctypes.get_errno(), "timer_settime")

    def cancel(self) -> None:
        """Disarm (idempotent): a stop that finished in time lets the process go on (a test's, an embedder's)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            self._libc.timer_delete(timer)


def arm(seconds: float, code: int = 0) -> HardExit | None:
    """A `HardExit` in `seconds`, or None where this platform has no such timer (said at DEBUG)."""
    if not sys.platform.startswith("linux") or seconds <= 0:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.timer_create.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        libc.timer_settime.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        libc.timer_delete.argtypes = [ctypes.c_void_p]
        return HardExit(libc, seconds, code)
    except (OSError, AttributeError) as e:  # no timer_create in this libc (glibc before 2.34 keeps it in librt)
        log.debug("no native exit timer here (%s): the stop's watchdog is the interpreter's alone", e)
        return None
