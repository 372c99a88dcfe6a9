"""The packaged example workflows' public way in: `jr2_actors.examples` (names, path, text) and the
`jr2-actors examples` command, both reading the installed package, so they work from any folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from jr2_actors import cli, examples
from jr2_actors.values.workflow import load_workflow


def test_every_example_is_found_by_name_and_is_a_valid_workflow() -> None:
    assert examples.names() == ["fix-and-review", "neighbour"]
    for name in examples.names():
        where = examples.path(name)
        assert where.is_absolute() and where.name == f"{name}.yaml" and where.is_file()
        assert load_workflow(examples.text(name)).name == name
        assert examples.summary(name).endswith(".")


@pytest.mark.parametrize("name", ["nope", "../examples/fix-and-review", "fix-and-review.yaml", "", "__init__"])
def test_an_unknown_example_is_refused_naming_the_ones_there_are(name: str) -> None:
    with pytest.raises(examples.UnknownExample, match="the examples are fix-and-review, neighbour"):
        examples.path(name)


def test_the_command_lists_prints_and_locates_them_from_any_folder(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["examples"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == ["fix-and-review", "neighbour"]
    assert "a coder fixes, a reviewer reviews" in listed[0]
    assert cli.main(["examples", "fix-and-review"]) == 0
    assert capsys.readouterr().out == examples.text("fix-and-review").rstrip("\n") + "\n"
    assert cli.main(["examples", "neighbour", "--path"]) == 0
    assert Path(capsys.readouterr().out.strip()) == examples.path("neighbour")


@pytest.mark.parametrize(("argv", "says"), [
    (["examples", "nope"], "no example 'nope': the examples are fix-and-review, neighbour"),
    (["examples", "--path"], "--path needs an example's NAME"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and says in captured.err and captured.err.count("\n") == 1
