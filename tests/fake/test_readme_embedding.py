"""Issue 19 item 7: the README's embedding example runs as written, from the README's own text, and its
assert catches a run that ended `failed` (`wait_finished` returns the final RunStatus)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.readme import readme_python, run_as_a_test_file

pytestmark = pytest.mark.slow


def test_the_readme_embedding_example_runs_as_written(tmp_path: Path) -> None:
    out = run_as_a_test_file(tmp_path, readme_python("embedding-example"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout


def test_its_assert_fails_for_a_run_that_ended_failed(tmp_path: Path) -> None:
    source = readme_python("embedding-example")
    assert 'Pick("finish")' in source
    out = run_as_a_test_file(tmp_path, source.replace('Pick("finish")', 'Pick("dispute")'))  # code → failed
    assert out.returncode == 1 and "1 failed" in out.stdout, out.stdout + out.stderr
    assert "'failed' == 'done'" in out.stdout, out.stdout  # the run's end, not only that it ended
