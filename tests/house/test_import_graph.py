"""The house, drawn from its own imports (docs/architecture.md "Layout"): the import graph between the
package's folders (and its root modules), computed from the code's AST, and the rules it holds.

- No cycle between folders.
- The pure values (`values/`) import nothing of the package; the shell (`shell/`) only the values.
- No module outside `testing/` imports it: the virtual clock is the tests' (as `trio.testing` is).
- The families import the shell, the values, the HTTP helpers (`net/`) and the two clients, never what
  composes them: `telemetry.py`, `orchestrator.py`, `api/`, `commands/`, the CLI, the sim, the fake.
- One actor family imports of another only its messages and values (`ALLOWED`); what is left of a
  crossing beyond them is named in `DEBT`, which may only shrink.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.support.paths import PACKAGE

VALUES = {"values"}
SHELL = {"shell"}
NET = {"net"}
CLIENTS = {"kube", "harness"}  # the two HTTP clients: any family may call them; they call no family
FAMILIES = {"watch", "store", "workspace", "agent", "run"}  # the actor families
DATA = {"examples"}  # the packaged example workflows and their one way in: they import nothing of the package
ABOVE = {"telemetry", "orchestrator", "revival", "api", "console", "commands", "cli", "__main__", "sim", "fake"}
TESTING = {"testing"}  # what tests drive the product with (the virtual clock): the product never imports it
# A family's rooms beside its engine: the run's feed and what is shown of the runs (docs/architecture.md).
ROOMS = {"run": {"feed", "listing"}}

# Of an actor family, what another family may import: its messages and its values.
MESSAGES = {
    "watch": {"watch.deliveries", "watch.messages", "watch.identity", "watch.sandbox"},
    "workspace": {"workspace.core", "workspace.messages", "workspace.manifest", "workspace.metrics"},  # reports
    "agent": {"agent.messages", "agent.metrics"},  # the seat's messages and reports (the run takes them as they
    # are), and what its actors are counted in (the run's telemetry carries it)
    "store": {"store.messages", "store.actor"},  # Persist, Restore, ...; `save` and `STORE_DOWN` of the actor
}
# Crossings still left beyond the messages: the RunActor starts its Workspaces' and seats' actors itself
# (a factory the orchestrator hands it would end both).
DEBT = {("run/actor.py", "workspace.actor"), ("run/actor.py", "agent.actor")}


def _unit(module: str) -> str:
    """`jr2_actors.watch.core` → `watch`; a root module is its own unit (`telemetry`)."""
    return module.split(".")[1]


def _imports() -> dict[str, set[str]]:
    """Each file (relative path) → the package modules it imports (`watch.core`, `values.errors`, ...)."""
    out: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "jr2_actors":
                    names.update(f"jr2_actors.{a.name}" for a in node.names)
                else:  # `from jr2_actors.watch import core`: the submodule; `... import SandboxSeen`: the module
                    folder = PACKAGE.joinpath(*node.module.split(".")[1:])
                    for alias in node.names:
                        sub = (folder / f"{alias.name}.py").exists() or (folder / alias.name).is_dir()
                        names.add(f"{node.module}.{alias.name}" if sub else node.module)
            elif isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{rel}: a relative import (the graph reads absolute ones)")
        out[str(rel)] = {n.removeprefix("jr2_actors.") for n in names
                         if n.startswith("jr2_actors.") and n != "jr2_actors.__version__"}
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for rel, modules in _imports().items():
        source = Path(rel).parts[0].removesuffix(".py")
        for module in modules:
            target = module.split(".")[0]
            if target != source:
                graph[source].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_every_folder_and_root_module_has_its_place() -> None:
    units = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}
    assert units == VALUES | SHELL | NET | CLIENTS | FAMILIES | ABOVE | TESTING | DATA
    rooms = {family: {p.name for p in (PACKAGE / family).iterdir() if (p / "__init__.py").exists()}
             for family in FAMILIES}
    assert {family: found for family, found in rooms.items() if found} == ROOMS


def test_no_cycle_between_folders() -> None:
    assert _cycle(_graph()) is None, _cycle(_graph())


def test_the_cycle_check_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


def test_values_import_nothing_of_the_package_and_the_shell_only_values() -> None:
    graph = _graph()
    assert graph.get("values", set()) == set()
    assert graph.get("examples", set()) == set()
    assert graph.get("shell", set()) <= VALUES
    assert graph.get("net", set()) <= VALUES | SHELL


def test_clients_and_families_never_import_what_composes_them() -> None:
    graph = _graph()
    for client in CLIENTS:
        assert graph.get(client, set()) <= VALUES | SHELL | NET, client
    for family in FAMILIES:
        up = graph.get(family, set()) & ABOVE
        assert not up, f"{family} imports {up}"
        assert graph.get(family, set()) <= VALUES | SHELL | NET | CLIENTS | FAMILIES, family


def test_no_product_module_imports_the_testing_package() -> None:
    users = {rel for rel, modules in _imports().items()
             if Path(rel).parts[0] not in TESTING and any(m.split(".")[0] in TESTING for m in modules)}
    assert not users, f"{sorted(users)} import jr2_actors.testing: the product reaches a test's clock by name only"


def test_the_composers_import_the_families() -> None:
    graph = _graph()
    assert FAMILIES - {"agent", "workspace"} <= graph["telemetry"] | graph["orchestrator"]
    assert {"watch", "store", "run"} <= graph["orchestrator"]


def test_one_family_imports_of_another_only_its_messages() -> None:
    crossings = set()
    for rel, modules in _imports().items():
        source = Path(rel).parts[0]
        if source not in FAMILIES:
            continue
        for module in modules:
            target = module.split(".")[0]
            if target in FAMILIES and target != source and module != target:
                if module not in MESSAGES.get(target, set()):
                    crossings.add((rel, module))
            elif target in FAMILIES and target != source:
                crossings.add((rel, module))  # `from jr2_actors import run`: the whole family
    assert crossings == DEBT
