"""README.md's own text, run as written: its shell blocks, its Python blocks, and the environment they run in
(the test's temp folder, this venv's `jr2-actors` first on PATH)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import cli_process
from tests.support.paths import ROOT


def readme_block(mark: str) -> str:
    """The indented block README.md shows under `<!-- mark -->`, as a script."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index(f"<!-- {mark} -->") + 1
    block = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        block.append(line[4:])
    assert block, f"README.md shows nothing under <!-- {mark} -->"
    return "\n".join(block) + "\n"


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = cli_process.clean_env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this venv's jr2-actors
    env["TMPDIR"] = str(tmp_path)  # mktemp -d and every temp folder land in the test's own
    env["PYTHONUNBUFFERED"] = "1"
    return env


def readme_python(mark: str, page: Path = ROOT / "README.md") -> str:
    """The Python block after `<!-- mark -->` on a page (README.md unless another is named)."""
    text = page.read_text(encoding="utf-8")
    after = text[text.index(f"<!-- {mark} -->"):]
    start = after.index("```python\n") + len("```python\n")
    return after[start:after.index("```", start)]


def run_as_a_test_file(tmp_path: Path, source: str, *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`source` run by pytest as a file of another project's (from `tmp_path`, or from `cwd`)."""
    path = tmp_path / "test_readme_example.py"
    path.write_text(source, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")} | {"TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), "-c", os.devnull, "--basetemp", str(tmp_path / "base"), str(path)],
                          cwd=cwd or tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
