"""`serve --supervise`: a process of one thread that starts serve as its child, passes SIGTERM and SIGINT on,
reaps, and ends serve at its stop budget if serve has not stopped by then — exit 0, as a pod asked to stop
expects. It is the container's PID 1 in the shipped manifests.

Why a process apart: serve's SIGTERM handler runs on serve's main thread, which must take serve's interpreter
lock first. With 5,000 runs mid-Turn (~15,000 threads) the lock's waiters kept it from running for over two
minutes in two of four replays, so nothing armed inside serve — not its watchdog, not its native exit — was
ever armed. This process holds no lock serve's threads want: the kernel delivers its signals, and its
deadline is a `sigtimedwait` timeout. Ending serve at the budget is safe for the same reason a SIGKILL is
(ADR-0065: each step is written before its side effect; the crash trials kill serve at random).

`Supervision` is the deterministic core (events in, actions out); `supervise` is its shell.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jr2_actors.values.constants import (
    SERVE_STOP_SECONDS,
    SUPERVISED_NICENESS,
    SUPERVISOR_KILL_MARGIN_SECONDS,
    SUPERVISOR_REAP_SECONDS,
)

log = logging.getLogger("jr2_actors.supervisor")

SUPERVISED_ENV = "JR2_SUPERVISED"  # set in the child: a serve started by its supervisor does not supervise again
PASSED_ON = (signal.SIGTERM, signal.SIGINT)
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True)
class Signalled:
    signal: int
    at: float  # monotonic seconds


@dataclass(frozen=True, slots=True)
class Exited:
    code: int  # as a shell reports it: the exit status, or 128 + the signal that ended it


@dataclass(frozen=True, slots=True)
class Tick:
    at: float


@dataclass(frozen=True, slots=True)
class PassOn:
    signal: int


@dataclass(frozen=True, slots=True)
class Kill:
    line: str  # the one line said as the child is ended


@dataclass(frozen=True, slots=True)
class Leave:
    code: int


Event = Signalled | Exited | Tick
Action = PassOn | Kill | Leave


class Supervision:
    """The supervisor's rules. The first SIGTERM or SIGINT starts the budget; every one is passed on. At the
    budget less the margin (the kernel's time to end a process of thousands of threads) the child is killed,
    and once it is reaped — or `reap` seconds later, whatever became of it — the supervisor leaves with 0: the
    stop was asked for and is done. A child that ends by itself leaves its code."""

    def __init__(self, budget: float = SERVE_STOP_SECONDS, margin: float = SUPERVISOR_KILL_MARGIN_SECONDS,
                 reap: float = SUPERVISOR_REAP_SECONDS) -> None:
        if not 0 <= margin < budget:
            raise ValueError(f"a margin of {margin} s leaves nothing of a {budget} s budget")
        self.budget, self.margin, self.reap = budget, margin, reap
        self.stopping_since: float | None = None
        self.killed_at: float | None = None

    def deadline(self) -> float | None:
        """When the next thing is due without an event (monotonic), or None: nothing is."""
        if self.killed_at is not None:
            return self.killed_at + self.reap
        if self.stopping_since is not None:
            return self.stopping_since + self.budget - self.margin
        return None

    def step(self, event: Event) -> list[Action]:
        if isinstance(event, Exited):
            # Ended by the SIGTERM passed on (one that came before serve's handler was in place): stopped as asked.
            asked = self.stopping_since is not None and event.code == 128 + signal.SIGTERM
            return [Leave(0 if self.killed_at is not None or asked else event.code)]
        if isinstance(event, Signalled):
            if self.stopping_since is None:
                self.stopping_since = event.at
            return [] if self.killed_at is not None else [PassOn(event.signal)]
        due = self.deadline()
        if due is None or event.at < due:
            return []
        if self.killed_at is not None:
            return [Leave(0)]  # killed and not reaped in time: the kernel has it; the stop is done
        self.killed_at = event.at
        return [Kill(f"serve did not stop within its {self.budget:g} s budget: its supervisor ended it "
                     f"{event.at - (self.stopping_since or event.at):.1f} s after the stop was asked; every step it "
                     "took is on disk, and a start on its state directory restores every live run")]


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def supervise(command: Sequence[str], *, budget: float = SERVE_STOP_SECONDS,
              margin: float = SUPERVISOR_KILL_MARGIN_SECONDS, reap: float = SUPERVISOR_REAP_SECONDS,
              clock: Callable[[], float] = time.monotonic, stopped: Callable[[], bool] = lambda: False) -> int:
    """Run `command` under supervision until it ends; the code to leave with. Call it from a process's only
    thread: the signals are taken with `sigtimedwait`, which sees them only where they are blocked; a stop
    that came before (`stopped()`) starts nothing."""
    core = Supervision(budget, margin, reap)
    waited = {*PASSED_ON, signal.SIGCHLD}
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # ignored (inherited), the kernel reaps the child unseen
    before = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        if stopped():
            return 0
        child = subprocess.Popen(list(command), env={**os.environ, SUPERVISED_ENV: "1"},
                                 preexec_fn=_as_child(before, os.getpid()))  # safe: this process has one thread
        while True:
            for action in core.step(_next_event(child.pid, waited, core.deadline(), clock)):
                if isinstance(action, Leave):
                    return action.code
                if isinstance(action, PassOn):
                    _signal(child.pid, action.signal)
                else:
                    log.error("%s", action.line)
                    _signal(child.pid, signal.SIGKILL)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _next_event(pid: int, waited: set[signal.Signals], due: float | None, clock: Callable[[], float]) -> Event:
    while True:
        now = clock()
        timeout = 3600.0 if due is None else max(due - now, 0.0)
        info = signal.sigtimedwait(waited, timeout)
        now = clock()
        if info is None:
            return Tick(now)
        if info.si_signo != signal.SIGCHLD:
            return Signalled(info.si_signo, now)
        ended = _reap(pid)  # as PID 1, every orphan that ends is ours to reap too
        if ended is not None:
            return Exited(ended)


def _reap(pid: int) -> int | None:
    """Reap every child that has ended; the code of `pid` if it is one of them."""
    code = None
    while True:
        try:
            reaped, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code
        if reaped == 0:
            return code
        if reaped == pid:
            code = exit_code(status)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already ended: its SIGCHLD is on its way
        os.kill(pid, sig)


def _as_child(mask: set[int | signal.Signals], parent: int) -> Callable[[], None]:
    """What the child does before it runs serve: the signal mask it would have had, its own process group (a
    terminal's Ctrl-C reaches the supervisor, which passes it on once), a niceness that lets the supervisor run
    at its deadline however many of serve's threads crowd the CPU, and its end with the supervisor's."""
    def setup() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.setpgid(0, 0)
        os.nice(SUPERVISED_NICENESS)  # its thousands of threads yield to the supervisor's one when it must run
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the supervisor ended before the line above: end too
                os._exit(1)
    return setup
