"""The README's demo command, run from the README's own text (issue 19 "Done when"): what follows its
`pip install .` (the test's environment has the package installed already) runs as written and ends with
the summary of both runs and their timeline."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.readme import clean_env, readme_block

pytestmark = pytest.mark.slow
INSTALL = "python3 -m pip install . && "


def test_the_readme_demo_command_runs_as_written(tmp_path: Path) -> None:
    script = readme_block("demo-command")
    assert script.startswith(INSTALL), script
    out = subprocess.run(["bash", "-e", "-c", script.removeprefix(INSTALL)], cwd=ROOT, env=clean_env(tmp_path),
                         capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stdout.rstrip().splitlines()
    assert lines[-1].startswith("timeline: 0.0s neighbour started") and lines[-1].endswith("example ended done")
    assert any(line.split()[:2] == ["example", "done"] for line in lines[-5:]), lines[-5:]
    assert list(tmp_path.iterdir()) == []  # nothing left behind in its temp folder
