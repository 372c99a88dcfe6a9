"""docs/testing.md's example of `jr2_actors.testing` runs as written, from the page's own text."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.readme import readme_python
from tests.support.readme import run_as_a_test_file as run_in

pytestmark = pytest.mark.slow


def page_python(mark: str) -> str:
    return readme_python(mark, ROOT / "docs" / "testing.md")


def run_as_a_test_file(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    return run_in(tmp_path, source, cwd=ROOT)  # the page's example runs from the repository's root


def test_the_testing_pages_example_runs_as_written(tmp_path: Path) -> None:
    out = run_as_a_test_file(tmp_path, page_python("testing-example"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout


def test_its_assert_fails_for_a_run_that_ended_failed(tmp_path: Path) -> None:
    source = page_python("testing-example")
    assert 'Pick("finish")' in source
    out = run_as_a_test_file(tmp_path, source.replace('Pick("finish")', 'Pick("dispute")'))  # code → failed
    assert out.returncode == 1 and "1 failed, 1 passed" in out.stdout, out.stdout + out.stderr
    assert "'failed' == 'done'" in out.stdout, out.stdout
