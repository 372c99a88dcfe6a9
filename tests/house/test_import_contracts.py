"""The layering contracts (`.importlinter`, import-linter): the floors, no cycle between folders, a core's
purity through everything it imports, and what one family may import of another. The tree keeps them, and
each contract breaks when a module breaks its rule (a copy of the package with one bad import)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"


def lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": str(cwd), "NO_COLOR": "1"}
    return subprocess.run([str(LINT), "--no-cache", "--no-logo", str(ROOT / ".importlinter")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_tree_keeps_every_contract() -> None:
    out = lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "8 kept, 0 broken" in out.stdout, out.stdout


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    shutil.copytree(ROOT / "jr2_actors", root / "jr2_actors", ignore=shutil.ignore_patterns("__pycache__"))
    return root


BREAKS = {
    "a core that starts a thread": ("jr2_actors/watch/core.py", "def _f() -> None:\n    import threading\n",
                                    "A core does no I/O"),
    "a core that reads the time through the shell": ("jr2_actors/agent/core.py",
                                                    "from jr2_actors.shell.clock import SystemClock\n",
                                                    "A core does no I/O"),
    "the values importing the shell": ("jr2_actors/values/errors.py", "import jr2_actors.shell.recipient\n",
                                       "The floors"),
    "a product module importing the testing package": ("jr2_actors/orchestrator.py",
                                                       "import jr2_actors.testing.clock\n", "The floors"),
    "a family importing what composes it": ("jr2_actors/run/listing/table.py", "import jr2_actors.telemetry\n",
                                            "The floors"),
    "a family importing another's core": ("jr2_actors/workspace/actor.py", "import jr2_actors.run.core\n",
                                          "No other family imports the run"),
    "a family importing another's actor": ("jr2_actors/run/feed/hub.py", "import jr2_actors.watch.actor\n",
                                           "imports of the watch only"),
    "a cycle between folders": ("jr2_actors/net/cut.py", "import jr2_actors.kube.kinds\n", "No cycle"),
}


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_each_contract_breaks_when_a_module_breaks_its_rule(package: Path, case: str) -> None:
    rel, line, contract = BREAKS[case]
    path = package / rel
    kept = path.read_text(encoding="utf-8")
    try:
        path.write_text(kept + "\n" + line, encoding="utf-8")
        out = lint(package)
    finally:
        path.write_text(kept, encoding="utf-8")
    assert out.returncode == 1, out.stdout + out.stderr
    broken = [line for line in out.stdout.splitlines() if " BROKEN" in line]
    assert any(contract in line for line in broken), out.stdout  # and maybe others the import breaks too
