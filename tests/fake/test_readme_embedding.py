"""Issue 19 item 7: the README's embedding example runs as written, from the README's own text, and its
assert catches a run that ended `failed` (`wait_finished` returns the final RunStatus)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow


def readme_python(mark: str) -> str:
    text = (ROOT / "README.md").read_text()
    after = text[text.index(f"<!-- {mark} -->"):]
    start = after.index("```python\n") + len("```python\n")
    return after[start:after.index("```", start)]


def run_as_a_test_file(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "test_readme_example.py"
    path.write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")} | {"TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), "-c", os.devnull, "--basetemp", str(tmp_path / "base"), str(path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)


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
