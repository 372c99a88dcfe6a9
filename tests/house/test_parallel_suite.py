"""The suite on pytest-xdist workers (tests/support/parallel.py): how many a run gets when it says nothing, and
the real-cluster tier kept on one worker so one control plane serves it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests.support import parallel

ROOT = Path(__file__).resolve().parents[2]


def config(*args: str, xdist: bool = True, worker: bool = False, **option: Any) -> Any:
    options = {"numprocesses": None, "tx": [], "dist": "no", "usepdb": False, "collectonly": False} | option
    made = SimpleNamespace(args=list(args) or ["tests"], option=SimpleNamespace(**options),
                           pluginmanager=SimpleNamespace(hasplugin=lambda name: xdist and name == "xdist"))
    if worker:
        made.workerinput = {"workerid": "gw0"}
    return made


def chosen(made: Any) -> tuple[int | None, str]:
    parallel.choose(cast(pytest.Config, made))
    return made.option.numprocesses, made.option.dist


def test_a_run_that_says_nothing_gets_the_workers_and_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JR2_TEST_WORKERS", raising=False)
    assert chosen(config()) == (parallel.WORKERS, "loadgroup")
    assert chosen(config("tests/watch", "tests/run")) == (parallel.WORKERS, "loadgroup")
    assert chosen(config("tests/real/test_fidelity.py", "tests/house/test_contributing.py")) == (parallel.WORKERS,
                                                                                               "loadgroup")


def test_one_file_a_debugger_or_a_collection_stays_on_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JR2_TEST_WORKERS", raising=False)
    one = "tests/house/test_parallel_suite.py"
    assert chosen(config(one)) == (None, "no")
    assert chosen(config(f"{one}::test_a", f"{one}::test_b")) == (None, "no")
    assert chosen(config(usepdb=True)) == (None, "no")
    assert chosen(config(collectonly=True)) == (None, "no")


def test_what_the_caller_says_stays_theirs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JR2_TEST_WORKERS", raising=False)
    assert chosen(config(numprocesses=0)) == (0, "loadgroup")  # -n0: xdist itself then turns the mode off
    assert chosen(config(numprocesses=5)) == (5, "loadgroup")  # a count alone keeps the tier on one worker
    assert chosen(config(dist="worksteal")) == (parallel.WORKERS, "worksteal")
    assert chosen(config(xdist=False)) == (None, "no")  # -p no:xdist, or not installed
    assert chosen(config(worker=True)) == (None, "no")  # a worker parses the command line again: not ours
    monkeypatch.setenv("JR2_TEST_WORKERS", "6")
    assert chosen(config()) == (6, "loadgroup")


def test_a_worker_count_that_is_not_one_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JR2_TEST_WORKERS", "many")
    with pytest.raises(pytest.UsageError, match="JR2_TEST_WORKERS='many' is not a count of workers"):
        parallel.choose(cast(pytest.Config, config()))


PROJECT_CONFTEST = """\
from tests.support.parallel import scheduler

def pytest_xdist_make_scheduler(config, log):
    return scheduler(config, log)
"""
RECORD = """\
import os
import pytest

@pytest.mark.parametrize("n", range(8))
def test_it(n):
    with open(os.environ["WORKERS_SEEN"], "a") as f:
        f.write(f"{__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""


@pytest.mark.slow
def test_the_real_cluster_tier_runs_on_one_worker_and_the_rest_spreads(tmp_path: Path) -> None:
    """Two folders of the tier (as tests/real/'s files are) on three workers: one worker takes every test of
    it; the other tests are shared out. With xdist's own `xdist_group` mark on pytest 9.2 the tier spread."""
    project = tmp_path / "project"
    for folder, count in (("tests/real", 3), ("tests/watch", 3)):
        (project / folder).mkdir(parents=True)
        for i in range(count):
            (project / folder / f"test_{folder.split('/')[1]}_{i}.py").write_text(RECORD)
    (project / "conftest.py").write_text(PROJECT_CONFTEST)
    seen = tmp_path / "seen"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKERS_SEEN": str(seen)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
                           "--rootdir", str(project), "-n", "3", "--dist", "loadgroup", "tests"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=100, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    rows = [line.split() for line in seen.read_text().splitlines()]
    assert len(rows) == 48
    tier = {worker for module, worker in rows if module.startswith("test_real")}
    rest = {worker for module, worker in rows if module.startswith("test_watch")}
    assert len(tier) == 1 and len(rest) >= 2
