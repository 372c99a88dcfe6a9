"""How many pytest-xdist workers a run gets when its command line does not say (`-n`): the suite mostly
waits (on loopback HTTP, on subprocesses, on the fake cluster's bookmarks), so it spreads over more workers
than the machine has cores; a run of one file, or one under a debugger, stays on this process.

tests/conftest.py calls `choose` from `pytest_cmdline_main`, before pytest-xdist reads its options. `-n N`
(`-n0`: serially) and `-p no:xdist` still decide; `JR2_TEST_WORKERS=N` changes the default.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Measured on two cores (docs/benchmarks.md, "the suite"): 2, 3 and 4 workers against one.
WORKERS = 3
# Grouped tests (`@pytest.mark.xdist_group`) share a worker: the real-cluster tier's one control plane.
DIST = "loadgroup"


def choose(config: pytest.Config) -> None:
    """Set the worker count and the distribution mode where the command line left them to us."""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    option = config.option
    if option.numprocesses is not None or option.tx:
        return  # the caller said how many (`-n`, `--tx`): theirs
    if option.usepdb or option.collectonly or _one_file(config.args):
        return
    option.numprocesses = _workers()
    if option.dist == "no":  # a `--dist` of the caller's stays
        option.dist = DIST


def _workers() -> int:
    text = os.environ.get("JR2_TEST_WORKERS", "")
    if text.isdigit():
        return int(text)
    if text:
        raise pytest.UsageError(f"JR2_TEST_WORKERS={text!r} is not a count of workers (0 runs serially)")
    return WORKERS


def _one_file(args: list[str]) -> bool:
    """Whether every argument names a test in the same single file (a folder may hold many: it spreads)."""
    files = {arg.split("::", 1)[0] for arg in args}
    return len(files) == 1 and Path(next(iter(files))).is_file()
