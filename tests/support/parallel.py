"""How many pytest-xdist workers a run gets when its command line does not say (`-n`): the suite mostly
waits (on loopback HTTP, on subprocesses, on the fake cluster's bookmarks), so it spreads over more workers
than the machine has cores; a run of one file, or one under a debugger, stays on this process.

tests/conftest.py calls `choose` from `pytest_cmdline_main`, before pytest-xdist reads its options. `-n N`
(`-n0`: serially) and `-p no:xdist` still decide; `JR2_TEST_WORKERS=N` changes the default.

The real-cluster tier (tests/real/) shares one control plane a session, so it must run on one worker, not
start one a worker. pytest-xdist's own `xdist_group` mark cannot say so on pytest 9.2: `--dist loadgroup`
rewrites a test's `_nodeid`, which pytest no longer reads, and the groups are silently dropped
(pytest-dev/pytest-xdist#1386). `scheduler` keeps `loadgroup`'s scheduling and reads the group from the
test's path instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

# Measured on two cores (docs/benchmarks.md, "the suite"): 2, 3 and 4 workers against one.
WORKERS = 4
DIST = "loadgroup"
# Tests under these folders (node ids, from the root) run on one worker, each folder as one unit of work.
TOGETHER = ("tests/real/",)


def choose(config: pytest.Config) -> None:
    """Set the worker count and the distribution mode where the command line left them to us."""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    option = config.option
    if option.numprocesses is None and not option.tx:  # else the caller said how many (`-n`, `--tx`): theirs
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


def scheduler(config: pytest.Config, log: Any) -> Any:
    """For `--dist loadgroup`: xdist's own scheduling, each folder of `TOGETHER` one unit of work (the biggest
    units first, so the tier starts at once instead of ending the run alone); None leaves other modes to xdist."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class TogetherScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist is untyped
        def _split_scope(self, nodeid: str) -> str:
            folder = next((f for f in TOGETHER if nodeid.startswith(f)), None)
            return folder if folder is not None else super()._split_scope(nodeid)

    return TogetherScheduling(config, log)
