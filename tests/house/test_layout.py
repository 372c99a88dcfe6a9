"""The layout's first rule (docs/architecture.md): every `*/core.py` is pure.

A core imports nothing that does I/O, keeps time, starts a thread or draws randomness (`FORBIDDEN`: the
file system and the OS, databases, sockets and HTTP, threads and processes, clocks, randomness, logging)
— not itself, and not through any module of this package it imports. The check reads the source (the
AST), so it cannot be satisfied by a lazy import hidden inside a function either.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.imports import FORBIDDEN, reach
from tests.support.paths import PACKAGE

CORES = sorted({*PACKAGE.rglob("core.py"), *PACKAGE.rglob("*_core.py")})  # `seat_core.py` is a core too


def test_there_are_cores_to_check() -> None:
    names = {str(p.relative_to(PACKAGE)) for p in CORES}
    assert {"watch/core.py", "workspace/core.py", "agent/core.py", "run/core.py"} <= names


@pytest.mark.parametrize("core", CORES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_core_imports_no_io(core: Path) -> None:
    bad = {name: str(where.relative_to(PACKAGE)) for name, where in reach(core).items() if name in FORBIDDEN}
    assert not bad, f"{core.relative_to(PACKAGE)} reaches I/O: {bad}"


def test_the_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    sneaky = tmp_path / "core.py"
    sneaky.write_text("def f():\n    import threading\n    from jr2_actors.shell.clock import SystemClock\n")
    reached = reach(sneaky)
    assert "threading" in reached  # directly, even inside a function
    assert "time" in reached  # through jr2_actors.shell.clock
    sneaky.write_text("from urllib.request import urlopen\nfrom urllib.parse import quote\n")
    assert {"urllib.request", "urllib.parse"} <= set(reach(sneaky))  # urllib.request is forbidden, .parse not


def test_the_stores_sqlite_module_is_io_and_not_a_core() -> None:
    """Issue 17: `store/rows.py` writes the disk, so it is not named a core (the list would refuse it)."""
    assert not (PACKAGE / "store" / "core.py").exists()
    assert {"os", "sqlite3", "peewee"} <= {name for name in reach(PACKAGE / "store" / "rows.py") if name in FORBIDDEN}
