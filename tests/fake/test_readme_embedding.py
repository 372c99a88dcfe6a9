"""The README's embedding example runs as written, from the README's own text, in a folder outside the
repository (as in another project: the example workflow comes from the installed package, not a path in a
checkout), and its assert catches a run that ended `failed` (`wait_finished` returns the final RunStatus).
.ci/run runs it once more after the README's non-editable `pip install .`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.readme import readme_python, run_as_a_test_file

pytestmark = pytest.mark.slow


def test_the_readme_embedding_example_runs_as_written(tmp_path: Path) -> None:
    out = run_as_a_test_file(tmp_path, readme_python("embedding-example"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout


def test_its_assert_fails_for_a_run_that_ended_failed(tmp_path: Path) -> None:
    source = readme_python("embedding-example")
    assert 'Pick("finish")' in source
    out = run_as_a_test_file(tmp_path, source.replace('Pick("finish")', 'Pick("dispute")'))  # code → failed
    assert out.returncode == 1 and "1 failed" in out.stdout, out.stdout + out.stderr
    assert "'failed' == 'done'" in out.stdout, out.stdout  # the run's end, not only that it ended


def test_every_data_file_of_the_package_is_declared_package_data() -> None:
    """A file the package reads at run time (an example, a CRD) ships in a non-editable install only when
    setup.cfg declares it: each is matched by its own package's `package_data` globs."""
    import configparser
    import fnmatch

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    globs = {package: [g.strip() for g in line.split(",") if g.strip()]
             for package, line in config["options.package_data"].items()}
    data = [p for p in (ROOT / "jr2_actors").rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
            and "__pycache__" not in p.parts]
    assert any(p.name == "fix-and-review.yaml" for p in data)
    for path in data:
        package_dir = next(d for d in path.parents if (d / "__init__.py").exists())
        package = ".".join(package_dir.relative_to(ROOT).parts)
        rel = path.relative_to(package_dir).as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs.get(package, [])), f"{path} is not package data"
