"""docs/testing.md's example of `jr2_actors.testing` runs as written, from the page's own text."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def page_python(mark: str) -> str:
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    after = text[text.index(f"<!-- {mark} -->"):]
    start = after.index("```python\n") + len("```python\n")
    return after[start:after.index("```", start)]


def run_as_a_test_file(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "test_testing_example.py"
    path.write_text(source, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")} | {"TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), "-c", os.devnull, "--basetemp", str(tmp_path / "base"), str(path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)


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
