"""The layout's first rule (docs/architecture.md): every `*/core.py` is pure.

A core imports nothing that does I/O, keeps time, starts a thread or draws randomness (`FORBIDDEN`: the
file system and the OS, databases, sockets and HTTP, threads and processes, clocks, randomness, logging)
— not itself, and not through any module of this package it imports. The check reads the source (the
AST), so it cannot be satisfied by a lazy import hidden inside a function either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "jr2_actors"
FORBIDDEN = frozenset({
    # the file system and the OS
    "os", "io", "pathlib", "shutil", "tempfile", "glob", "fcntl", "mmap", "signal", "sys", "platform",
    # databases
    "sqlite3", "peewee", "playhouse", "dbm", "shelve",
    # sockets, HTTP, TLS
    "socket", "select", "selectors", "ssl", "http", "urllib.request", "urllib3", "requests", "cheroot",
    # threads, processes, actors
    "threading", "_thread", "queue", "concurrent", "multiprocessing", "subprocess", "asyncio", "pykka",
    # clocks and randomness
    "time", "sched", "random", "secrets", "uuid",
    # output
    "logging", "prometheus_client", "rich",
})
CORES = sorted({*PACKAGE.rglob("core.py"), *PACKAGE.rglob("*_core.py")})  # `seat_core.py` is a core too


def _module_path(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != "jr2_actors":
        return None
    base = PACKAGE.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _reach(core: Path) -> dict[str, Path]:
    """Every outside module `core` imports, directly or through this package, with the file that imports it."""
    seen: set[Path] = set()
    outside: dict[str, Path] = {}
    stack = [core]
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            local = _module_path(name)
            if local is not None:
                stack.append(local)
            elif not name.startswith("jr2_actors"):
                parts = name.split(".")
                for n in range(1, len(parts) + 1):  # `urllib` and `urllib.parse`: a pure part of a package
                    outside.setdefault(".".join(parts[:n]), path)
    return outside


def test_there_are_cores_to_check() -> None:
    names = {str(p.relative_to(PACKAGE)) for p in CORES}
    assert {"watch/core.py", "workspace/core.py", "agent/core.py", "run/core.py"} <= names


@pytest.mark.parametrize("core", CORES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_core_imports_no_io(core: Path) -> None:
    bad = {name: str(where.relative_to(PACKAGE)) for name, where in _reach(core).items() if name in FORBIDDEN}
    assert not bad, f"{core.relative_to(PACKAGE)} reaches I/O: {bad}"


def test_the_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    sneaky = tmp_path / "core.py"
    sneaky.write_text("def f():\n    import threading\n    from jr2_actors.shell.clock import SystemClock\n")
    reached = _reach(sneaky)
    assert "threading" in reached  # directly, even inside a function
    assert "time" in reached  # through jr2_actors.shell.clock
    sneaky.write_text("from urllib.request import urlopen\nfrom urllib.parse import quote\n")
    assert {"urllib.request", "urllib.parse"} <= set(_reach(sneaky))  # urllib.request is forbidden, .parse not


def test_the_stores_sqlite_module_is_io_and_not_a_core() -> None:
    """Issue 17: `store/rows.py` writes the disk, so it is not named a core (the list would refuse it)."""
    assert not (PACKAGE / "store" / "core.py").exists()
    assert {"os", "sqlite3", "peewee"} <= {name for name in _reach(PACKAGE / "store" / "rows.py") if name in FORBIDDEN}
