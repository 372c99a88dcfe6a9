"""CONTRIBUTING.md's habits are real: each `make` target it names exists and runs what it says, and the
pre-commit configuration is valid and fetches nothing (local hooks only) for the checks CI runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"test", "lint", "bench", "sim", "fast", "slow", "real", "size-budget"}


def make_dry_run(target: str) -> list[str]:
    out = subprocess.run(["make", "-n", "-C", str(ROOT), "--no-print-directory", target], capture_output=True,
                         text=True, timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_the_makefile_has_the_targets_contributing_names() -> None:
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE))
    named = set(re.findall(r"make ([a-z-]+)", (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")))
    assert targets >= REQUIRED
    assert named <= targets, named - targets


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_each_target_runs_what_it_says() -> None:
    assert make_dry_run("lint") == ["ruff check .", "mypy", "lint-imports --no-cache --no-logo",
                                    "python3 -m tests.support.size_budget"]
    assert make_dry_run("fast") == ["python3 -m pytest -q -m 'not slow and not realcluster'"]
    assert make_dry_run("sim") == ["jr2-actors sim --seeds 1-20 --jobs 2"]
    assert make_dry_run("bench") == ["python3 -m bench"]
    assert make_dry_run("size-budget") == ["python3 -m tests.support.size_budget --update"]


def test_pre_commit_runs_ruff_mypy_and_the_contracts_from_local_hooks_only() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert [repo["repo"] for repo in config["repos"]] == ["local"]  # nothing to fetch
    hooks = {hook["id"]: hook for hook in config["repos"][0]["hooks"]}
    assert {"ruff", "mypy", "lint-imports"} <= set(hooks)
    assert all(hook["language"] == "system" for hook in hooks.values())
    assert hooks["lint-imports"]["entry"].startswith("lint-imports")


def test_pre_commit_finds_its_configuration_valid() -> None:
    out = subprocess.run([sys.executable, "-m", "pre_commit", "validate-config", ".pre-commit-config.yaml"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
