"""The native exit: it ends the process at its time even while no Python thread can run, with the code asked;
cancelled, it leaves the process alone. Each case runs in a process of its own (an exit ends the whole one)."""

from __future__ import annotations

import subprocess
import sys

from jr2_actors.shell.hard_exit import arm

# `sum` over a huge range runs in C holding the interpreter lock throughout: a Python timer's thread never runs.
HOLD_THE_LOCK = """
import threading
from jr2_actors.shell.hard_exit import arm
from jr2_actors.shell.watchdog import past_budget
{arm}
threading.Timer(0.05, lambda: print("a Python thread ran", flush=True)).start()
sum(range(10**12))
print("not ended", flush=True)
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_it_ends_a_process_whose_interpreter_lock_is_held_with_the_code_asked() -> None:
    done = run(HOLD_THE_LOCK.format(arm="armed = arm(0.3, 7)\nprint('armed', armed is not None, flush=True)"))
    assert done.stdout.splitlines() == ["armed True"]  # no Python thread ran, and the process did not go on
    assert done.returncode == 7


def test_serves_stop_watchdog_ends_at_its_budget_with_exit_0_when_no_python_thread_can_run() -> None:
    done = run(HOLD_THE_LOCK.format(arm="past_budget(0.6, hard=True)"))
    assert "a Python thread ran" not in done.stdout and "not ended" not in done.stdout
    assert done.returncode == 0
    assert done.stderr == ""  # the interpreter's line could not be said: the native exit is silent


def test_cancelled_it_leaves_the_process_alone() -> None:
    # The process waits on an event nobody sets; a second exit armed later (code 0) ends it, so a code of 7 would
    # mean the cancelled one fired after all.
    done = run("import threading\nfrom jr2_actors.shell.hard_exit import arm\n"
               "armed = arm(0.2, 7)\narmed.cancel()\narmed.cancel()\narm(0.5, 0)\nprint('went on', flush=True)\n"
               "threading.Event().wait()")
    assert (done.returncode, done.stdout) == (0, "went on\n")


def test_a_time_not_ahead_arms_nothing() -> None:
    assert arm(0) is None and arm(-1) is None
