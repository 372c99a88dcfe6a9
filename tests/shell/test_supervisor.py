"""`serve --supervise`'s supervisor (shell/supervisor.py): its rules as a core, and as a process of one thread
whose child ignores a SIGTERM, stops at it, ends by itself, or outlives a SIGKILLed supervisor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from jr2_actors.shell.supervisor import (
    Exited,
    Kill,
    Leave,
    PassOn,
    Signalled,
    Supervision,
    Tick,
    exit_code,
    supervise,
)
from jr2_actors.testing.processes import ended
from jr2_actors.values.constants import SUPERVISED_NICENESS
from tests.support.waiting import WAIT, wait_until

# -- the core -----------------------------------------------------------------------------------------


def test_the_first_signal_starts_the_budget_and_each_is_passed_on() -> None:
    core = Supervision(budget=10, margin=1, reap=0.5)
    assert core.deadline() is None and core.step(Tick(100.0)) == []
    assert core.step(Signalled(signal.SIGTERM, 100.0)) == [PassOn(signal.SIGTERM)]
    assert core.deadline() == 109.0  # the budget less the margin the kernel takes to end it
    assert core.step(Signalled(signal.SIGINT, 104.0)) == [PassOn(signal.SIGINT)]
    assert core.deadline() == 109.0  # a second signal does not move the budget on


def test_a_child_still_stopping_at_the_budget_is_killed_and_the_supervisor_leaves_with_0() -> None:
    core = Supervision(budget=10, margin=1, reap=0.5)
    core.step(Signalled(signal.SIGTERM, 100.0))
    assert core.step(Tick(108.9)) == []
    [kill] = core.step(Tick(109.0))
    assert isinstance(kill, Kill) and "did not stop within its 10 s budget" in kill.line and "9.0 s" in kill.line
    assert core.step(Signalled(signal.SIGTERM, 109.1)) == []  # killed: nothing more to pass on
    assert core.step(Exited(128 + signal.SIGKILL)) == [Leave(0)]  # the stop was asked, and it is done


def test_a_kill_not_reaped_in_time_still_leaves_by_the_budget() -> None:
    core = Supervision(budget=10, margin=1, reap=0.5)
    core.step(Signalled(signal.SIGTERM, 100.0))
    core.step(Tick(109.0))
    assert core.deadline() == 109.5
    assert core.step(Tick(109.4)) == [] and core.step(Tick(109.5)) == [Leave(0)]


def test_a_child_that_ends_leaves_its_own_code() -> None:
    assert Supervision().step(Exited(3)) == [Leave(3)]  # ended by itself, or by its own stop
    core = Supervision()
    core.step(Signalled(signal.SIGTERM, 0.0))
    assert core.step(Exited(0)) == [Leave(0)] and core.step(Exited(130)) == [Leave(130)]


def test_a_child_ended_by_the_sigterm_passed_on_stopped_as_asked() -> None:
    """A SIGTERM passed on before serve's handler is in place ends it by the default action: the stop asked."""
    core = Supervision()
    core.step(Signalled(signal.SIGTERM, 0.0))
    assert core.step(Exited(128 + signal.SIGTERM)) == [Leave(0)]
    assert Supervision().step(Exited(128 + signal.SIGTERM)) == [Leave(128 + signal.SIGTERM)]  # not asked


def test_a_stop_that_came_before_the_signals_were_blocked_starts_nothing() -> None:
    """serve's own handler took it (it notes a stop): nothing would pass it on, and serve would never stop."""
    assert supervise([sys.executable, "-c", "raise SystemExit(5)"], stopped=lambda: True) == 0  # 5 if started


def test_a_margin_that_leaves_no_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="leaves nothing"):
        Supervision(budget=1, margin=1)
    with pytest.raises(ValueError, match="leaves nothing"):
        Supervision(budget=1, margin=-0.1)


def test_a_wait_status_reads_as_a_shell_reports_it() -> None:
    assert exit_code(0) == 0 and exit_code(3 << 8) == 3
    assert exit_code(signal.SIGKILL) == 128 + signal.SIGKILL


# -- the process --------------------------------------------------------------------------------------

SUPERVISOR = """
import logging, sys
from jr2_actors.shell.supervisor import supervise
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
sys.exit(supervise([sys.executable, "-c", sys.argv[1]], budget=float(sys.argv[2]), margin=0.2, reap=0.5))
"""
# Each child says its pid and that its handlers are in place, then waits on stdin (which nobody closes).
CHILD = "import os, signal, sys\n{setup}\nprint(os.getpid(), flush=True)\nsys.stdin.read()\n"


@contextmanager
def supervised(setup: str, budget: float = 3.0, *,
               ignore_sigchld: bool = False) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A supervisor in a session of its own (a signal to its group reaches it alone), and its child's pid."""
    def inherit() -> None:
        if ignore_sigchld:  # as a parent that ignores it hands it on through exec
            signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    proc = subprocess.Popen([sys.executable, "-c", SUPERVISOR, CHILD.format(setup=setup), str(budget)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=inherit)
    try:
        assert proc.stdout is not None
        yield proc, int(proc.stdout.readline())
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(WAIT)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_a_child_that_ignores_sigterm_is_ended_at_the_budget_and_the_supervisor_exits_0() -> None:
    with supervised("signal.signal(signal.SIGTERM, signal.SIG_IGN)", budget=1.5) as (proc, child):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT) == 0
        wait_until(lambda: ended(child), what="the child ended")
        _, err = proc.communicate(timeout=WAIT)
    assert err.count("\n") == 1 and "ERROR serve did not stop within its 1.5 s budget" in err, err


def test_a_child_that_stops_at_sigterm_leaves_its_code_and_no_line() -> None:
    setup = "signal.signal(signal.SIGTERM, lambda *_: os._exit(3))"
    with supervised(setup) as (proc, child):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT) == 3
        _, err = proc.communicate(timeout=WAIT)
    assert err == "" and ended(child)


def test_a_child_that_ends_by_itself_or_by_a_signal_leaves_its_code() -> None:
    with supervised("") as (proc, child):
        os.kill(child, signal.SIGABRT)
        assert proc.wait(WAIT) == 128 + signal.SIGABRT
    with supervised("") as (proc, _):
        assert proc.stdin is not None
        proc.stdin.close()  # the child's read ends; it exits 0
        assert proc.wait(WAIT) == 0


def test_an_ignored_sigchld_handed_on_does_not_hide_the_childs_end() -> None:
    """Ignored, SIGCHLD has the kernel reap the child unseen: the supervisor would wait for ever."""
    with supervised("", ignore_sigchld=True) as (proc, _):
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(WAIT) == 0


def test_a_terminals_ctrl_c_reaches_the_child_once_through_the_supervisor() -> None:
    """The child has a process group of its own: Ctrl-C (SIGINT to the terminal's foreground group) reaches
    the supervisor alone, which passes it on; in the supervisor's group the child would have it twice."""
    # The handler writes with os.write, not print: the SIGINT can come while the child's print of its pid is still
    # in its buffered writer, and a print then is a reentrant call that ends the child (it did so in CI).
    setup = ("got = []\n"
             "def on_int(*_):\n    got.append(1); os.write(1, b'INT\\n')\n"
             "signal.signal(signal.SIGINT, on_int)\n"
             "signal.signal(signal.SIGTERM, lambda *_: os._exit(len(got)))")
    with supervised(setup) as (proc, child):
        assert proc.stdout is not None
        os.killpg(proc.pid, signal.SIGINT)  # the group the supervisor leads, as a terminal's Ctrl-C
        line = proc.stdout.readline().strip()
        if line != "INT":  # what the supervisor and its child said, for a failure to explain itself
            assert proc.stderr is not None
            raise AssertionError(f"no INT from the child but {line!r}; the supervisor ended "
                                 f"{proc.wait(WAIT)}, saying {proc.stderr.read()!r}; the child ended: {ended(child)}")
        assert os.getpgid(child) == child
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT) == 1  # one SIGINT came


def test_the_child_runs_niced_so_that_the_supervisor_runs_at_its_deadline() -> None:
    """At 5,000 runs mid-Turn 15,000 runnable threads of serve delayed the supervisor's one by ~1 s past its
    deadline; niced, each of them yields to it."""
    with supervised("") as (proc, child):
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, child) == min(19, ours + SUPERVISED_NICENESS)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == ours  # the supervisor keeps its own


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_sigkilled_supervisor_takes_its_child_with_it() -> None:
    with supervised("signal.signal(signal.SIGTERM, signal.SIG_IGN)") as (proc, child):
        proc.kill()
        proc.wait(WAIT)
        wait_until(lambda: ended(child), what="the child ended with its supervisor")
