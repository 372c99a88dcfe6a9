"""What a module of the package imports, read from its source (the AST), and everything it reaches through
the package: the layout's rule that a core is pure (tests/house/test_layout.py) and the fake's modules that
must stay pure too use it."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import PACKAGE

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


def module_path(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != "jr2_actors":
        return None
    base = PACKAGE.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def reach(core: Path) -> dict[str, Path]:
    """Every outside module `core` imports, directly or through this package, with the file that imports it."""
    seen: set[Path] = set()
    outside: dict[str, Path] = {}
    stack = [core]
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imports_of(path):
            local = module_path(name)
            if local is not None:
                stack.append(local)
            elif not name.startswith("jr2_actors"):
                parts = name.split(".")
                for n in range(1, len(parts) + 1):  # `urllib` and `urllib.parse`: a pure part of a package
                    outside.setdefault(".".join(parts[:n]), path)
    return outside
