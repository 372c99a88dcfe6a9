"""The suite's own shape: each test file in the folder of the family it tests (tests/support/families.py
names the folders and which file-name prefix goes where), each folder a package so two files of one name
in two folders never collide, and no module of the suite importing a test module — what tests share lives
in tests/support/ (or a family's conftest.py, for fixtures)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import families
from tests.support.families import FAMILIES, PREFIXES, TIERS, family_of

TESTS = families.TESTS
NOT_TESTS = frozenset({"support", "fixtures", "golden"})  # helpers and data, no test file among them


def misplaced(tests: Path) -> list[str]:
    """Each test file outside a family folder or a tier, or in a family its name's prefix does not name."""
    problems = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        folder = rel.parts[0] if len(rel.parts) > 1 else None
        family = family_of(path.name)
        where = f"tests/{family}/" if family else (f"the folder of its family ({', '.join(sorted(FAMILIES))}), "
                                                    "and add its prefix to PREFIXES in tests/support/families.py")
        if folder is None:
            problems.append(f"tests/{rel}: a test file lives in its family's folder: move it to {where}")
        elif folder in TIERS:
            continue
        elif folder not in FAMILIES or len(rel.parts) > 2:
            problems.append(f"tests/{rel}: not a family folder: move it to {where}")
        elif family is not None and family != folder:
            problems.append(f"tests/{rel}: its prefix says tests/{family}/ (PREFIXES in tests/support/families.py)")
    return problems


def stray_folders(tests: Path) -> list[str]:
    """Each folder of tests/ that is neither a family, a tier nor a helper folder, and each that holds tests
    but is not a package (two same-named test files would then import as one module)."""
    problems = []
    for folder in sorted(p for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))):
        if folder.name not in FAMILIES | TIERS | NOT_TESTS:
            problems.append(f"tests/{folder.name}/: not a family ({', '.join(sorted(FAMILIES))}) nor a tier")
        elif folder.name != "outside" and any(folder.glob("*.py")) and not (folder / "__init__.py").exists():
            problems.append(f"tests/{folder.name}/: holds modules but has no __init__.py")
    return problems


def imported_modules(path: Path, root: Path) -> set[str]:
    """Every module `path` imports, by its dotted name from `root` (`from a import b` gives `a` and `a.b`;
    a relative import resolved against the file's own package), at any depth of the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.parent.relative_to(root).parts)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def imports_of_tests(tests: Path) -> list[str]:
    """Each import, anywhere in the suite, of a test module or of a conftest.py."""
    found: set[tuple[str, str]] = set()
    for path in tests.rglob("*.py"):
        for name in imported_modules(path, tests.parent):
            parts = name.split(".")
            if parts[0] != tests.name:
                continue
            hit = next((i for i, part in enumerate(parts) if part.startswith("test_") or part == "conftest"), None)
            if hit is not None:
                found.add((str(path.relative_to(tests.parent)), ".".join(parts[:hit + 1])))
    return [f"{where}: imports {name}: what tests share goes to tests/support/ (a fixture: the family's "
            "conftest.py)" for where, name in sorted(found)]


def test_every_test_file_is_in_its_familys_folder() -> None:
    assert not misplaced(TESTS), "\n".join(misplaced(TESTS))


def test_every_folder_is_a_family_a_tier_or_helpers_and_a_package() -> None:
    assert not stray_folders(TESTS), "\n".join(stray_folders(TESTS))


def test_no_module_of_the_suite_imports_a_test_module() -> None:
    assert not imports_of_tests(TESTS), "\n".join(imports_of_tests(TESTS))


def test_the_outside_suite_imports_nothing_of_the_suite() -> None:
    """tests/outside/ is written from README.md and docs alone: what another project's suite can do."""
    for path in (TESTS / "outside").rglob("*.py"):
        assert not {n for n in imported_modules(path, TESTS.parent) if n.split(".")[0] == "tests"}, path


def test_every_prefix_names_a_family() -> None:
    assert set(PREFIXES.values()) <= FAMILIES
    assert all(prefix.startswith("test_") for prefix in PREFIXES)


@pytest.mark.parametrize(("name", "family"), [
    ("test_store_faults.py", "store"), ("test_rbac_log.py", "deploy"), ("test_rbac.py", "fake"),
    ("test_runs_on_fake", "orchestrator"), ("test_run_core.py", "run"), ("test_cli_wait.py", "cli"),
    ("test_client.py", "kube"), ("test_nothing_says.py", None),
])
def test_the_longest_prefix_names_the_family(name: str, family: str | None) -> None:
    assert family_of(name) == family


# -- each check catches what it names, on a planted tree -------------------------------------------------

def _tree(root: Path, files: dict[str, str]) -> Path:
    tests = root / "tests"
    for rel, text in files.items():
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_text(text, encoding="utf-8")
    return tests


def test_a_flat_test_file_is_refused_with_the_folder_it_belongs_in(tmp_path: Path) -> None:
    tests = _tree(tmp_path, {"__init__.py": "", "test_store_new.py": "", "test_whatever.py": "",
                             "store/__init__.py": "", "store/test_store.py": "", "run/__init__.py": "",
                             "run/test_store_x.py": "", "real/test_r.py": ""})
    assert misplaced(tests) == [
        "tests/run/test_store_x.py: its prefix says tests/store/ (PREFIXES in tests/support/families.py)",
        "tests/test_store_new.py: a test file lives in its family's folder: move it to tests/store/",
        "tests/test_whatever.py: a test file lives in its family's folder: move it to the folder of its family "
        f"({', '.join(sorted(FAMILIES))}), and add its prefix to PREFIXES in tests/support/families.py",
    ]


def test_a_folder_without_init_or_outside_the_families_is_refused(tmp_path: Path) -> None:
    tests = _tree(tmp_path, {"store/test_store.py": "", "misc/__init__.py": "", "outside/test_o.py": "",
                             "support/__init__.py": ""})
    assert stray_folders(tests) == [
        f"tests/misc/: not a family ({', '.join(sorted(FAMILIES))}) nor a tier",
        "tests/store/: holds modules but has no __init__.py",
    ]


def test_an_import_of_a_test_module_is_refused_in_every_form(tmp_path: Path) -> None:
    tests = _tree(tmp_path, {
        "__init__.py": "", "store/__init__.py": "", "support/__init__.py": "",
        "store/test_a.py": "from tests.store.test_b import helper\n",
        "store/test_b.py": "from . import test_a\n",
        "store/test_c.py": "import tests.run.test_d\n",
        "store/test_e.py": "from .test_b import helper\n",
        "store/test_f.py": "from tests.conftest import STARTED\n",
        "store/test_ok.py": "from tests.support.waiting import wait_until\nfrom tests.store import helpers\n",
        "support/helpers.py": "def f():\n    from tests.store.test_a import helper\n",  # inside a function too
    })
    assert [line.split(": what")[0] for line in imports_of_tests(tests)] == [
        "tests/store/test_a.py: imports tests.store.test_b", "tests/store/test_b.py: imports tests.store.test_a",
        "tests/store/test_c.py: imports tests.run.test_d", "tests/store/test_e.py: imports tests.store.test_b",
        "tests/store/test_f.py: imports tests.conftest", "tests/support/helpers.py: imports tests.store.test_a",
    ]


def test_the_placing_script_prints_a_git_mv_for_each_flat_file(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    tests = _tree(tmp_path, {"test_sim_new.py": "", "test_zzz.py": "", "sim/test_sim.py": ""})
    assert families.flat_test_files(tests) == [tests / "test_sim_new.py", tests / "test_zzz.py"]
    assert families.main([str(p) for p in families.flat_test_files(tests)]) == 1  # one it cannot place
    out, err = capsys.readouterr()
    assert out == "git mv tests/test_sim_new.py tests/sim/test_sim_new.py\n"
    assert err.startswith("# test_zzz.py: no prefix names its family")


def test_a_documents_mentions_of_flat_test_files_are_rewritten_to_their_folders() -> None:
    text = "see tests/test_store.py::test_x, tests/test_rbac_log.py and tests/test_unknown.py; tests/real/x.py"
    assert families.placed_mentions(text) == ("see tests/store/test_store.py::test_x, tests/deploy/test_rbac_log.py "
                                              "and tests/test_unknown.py; tests/real/x.py")
