"""`lint` reports every error of a file, not only the first, in the file's order (a hostile file's are cut at
a bound and counted); it warns, without refusing, of a loop of Turns no `after` bounds; and `demo --workflow`
exits by how its run ended, as `submit --wait` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jr2_actors.commands import yaml_lines
from jr2_actors.commands.lint import lint_file
from jr2_actors.values.workflow import WorkflowError, parse_workflow, read_document
from jr2_actors.values.workflow_lint import MAX_REPORTED, _loops, every_error, loop_warnings
from tests.support.cli_process import jr2

EXAMPLE = Path(__file__).resolve().parents[2] / "jr2_actors" / "examples" / "fix-and-review.yaml"
MANY = """name: many
workspaces:
  W: {size: {cpu: "0", memory: "1Gi"}}
agents:
  coder: {instructions: "x", workspace: W, access: write}
  boss: {instructions: "y", workspace: W, access: none}
start: s
states:
  s:
    holds: [W]
    turn: {agent: coder, prompt: "p"}
    on: {give-up: done}
  t:
    turn: {agent: nobody, prompt: "p"}
    on: {x: done}
  done: {final: done}
"""
SHAPES = """name: "bad name!"
colour: red
start: 3
states:
  s: {turn: {agent: a}, on: 5}
"""
LOOP = """name: loop
agents:
  coder: {instructions: "x", access: none}
  reviewer: {instructions: "y", access: none}
start: code
states:
  code:
    turn: {agent: coder, prompt: "Fix."}
    on: {finish: review}
  review:
    turn: {agent: reviewer, prompt: "Review."}
    on: {approve: done, reject: code}
  done: {final: done}
"""


def lint(tmp_path: Path, text: str) -> tuple[int, list[str], str, Path]:
    path = tmp_path / "wf.yaml"
    path.write_text(text)
    out = jr2("lint", str(path))
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, out.stderr.splitlines(), out.stdout, path


def test_lint_reports_every_entrys_error_in_the_files_order(tmp_path: Path) -> None:
    code, err, _, path = lint(tmp_path, MANY)
    assert code == 2
    assert err == [
        f"{path}:3: workspaces.W.size: cpu and memory must be positive",
        f"{path}:6: agents.boss.workspace: a Menu-only agent (access: none) holds no Workspace",
        f"{path}:12: states.s.on: 'give-up' is not a pick name (a lower-case letter, then lower-case letters, "
        "digits or '_', at most 63 characters; give_up is one) nor an event (agent.fault or workspace.lost)",
        f"{path}:14: states.t.turn.agent: names no agent ('nobody')",
    ]  # the Workspace and agent at fault are not also named as missing where states and agents name them


def test_lint_reports_every_fault_of_the_shape(tmp_path: Path) -> None:
    code, err, _, path = lint(tmp_path, SHAPES)
    assert code == 2
    assert [line.split(": ")[0].removeprefix(f"{path}:") + " " + line.split(": ")[1] for line in err] == [
        "1 name", "2 colour", "3 start", "5 states.s.turn.prompt", "5 states.s.on"]


def test_a_hostile_file_of_a_thousand_faults_is_cut_at_the_bound_and_counted(tmp_path: Path) -> None:
    agents = "".join(f"  a{i}: {{instructions: 1, access: x}}\n" for i in range(500))
    code, err, _, path = lint(tmp_path, "name: h\nstart: s\nstates: {s: {final: done}}\nagents:\n" + agents)
    assert code == 2 and len(err) == MAX_REPORTED + 1
    assert err[0] == f"{path}:5: agents.a0.instructions: must be a non-empty string"  # the file's first
    assert err[-1] == f"{path}:1: and 900 more errors"


def test_a_file_of_many_errors_is_composed_once_for_all_their_lines(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Each error's line is looked up in one node tree of the file: once an error made the thousand-fault file
    above take 20 s."""
    composed: list[str] = []
    compose = yaml.compose

    def counted(text: str, **kw: Any) -> Any:
        composed.append(text)
        return compose(text, **kw)

    monkeypatch.setattr(yaml, "compose", counted)
    yaml_lines._composed.cache_clear()
    path = tmp_path / "wf.yaml"
    path.write_text("name: h\nstart: s\nstates: {s: {final: done}}\nagents:\n" +
                    "".join(f"  a{i}: {{instructions: 1, access: x}}\n" for i in range(200)))
    errors = lint_file(str(path))
    assert len(errors) == MAX_REPORTED + 1
    assert errors[2] == f"{path}:6: agents.a1.instructions: must be a non-empty string"  # its own line, still
    assert len(composed) == 1


def test_lint_warns_of_a_loop_of_turns_no_after_bounds_and_passes_it(tmp_path: Path) -> None:
    code, err, out, path = lint(tmp_path, LOOP)
    assert code == 0 and out == f"{path}: ok (1 warning)\n"
    assert err == [f"{path}:7: warning: states.code: a loop of Turns (code → review → code) with no `after` on "
                   "its way: a run may go round it for ever; an `after` on one of them bounds it"]
    bounded = LOOP.replace("{finish: review}\n", "{finish: review}\n    after: {seconds: 9, to: done}\n")
    code, err, out, path = lint(tmp_path, bounded)
    assert (code, err, out) == (0, [], f"{path}: ok\n")


def test_the_bundled_examples_loop_is_bounded_so_lint_says_only_ok() -> None:
    out = jr2("lint", str(EXAMPLE))
    assert (out.returncode, out.stderr, out.stdout) == (0, "", f"{EXAMPLE}: ok\n")


def test_loops_are_found_by_their_strongly_connected_parts() -> None:
    assert _loops({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert _loops({"a": {"a"}}) == [{"a"}]
    found = _loops({"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}, "e": {"a"}})
    assert sorted(map(sorted, found)) == [["a", "b"], ["c", "d"]]
    chain = {f"s{i}": {f"s{i + 1}"} for i in range(5000)} | {"s5000": {"s0"}}  # deep: no recursion limit
    assert _loops(chain) == [set(chain)]


def test_a_self_loop_is_warned_of_and_a_loop_through_a_non_turn_state_is_not() -> None:
    doc = read_document(LOOP.replace("on: {finish: review}", "on: {finish: review, again: code}")
                        .replace("on: {approve: done, reject: code}", "on: {approve: done}"))
    warned = loop_warnings(parse_workflow(doc).states)
    assert [(w.key, "(code → code)" in str(w)) for w in warned] == [("states.code", True)]


@pytest.mark.parametrize("text", [MANY, SHAPES, LOOP, EXAMPLE.read_text()], ids=["many", "shapes", "loop", "example"])
def test_every_error_agrees_with_what_post_runs_refuses(text: str) -> None:
    doc = read_document(text)
    errors = every_error(doc)
    refused: WorkflowError | None = None
    try:
        parse_workflow(doc)
    except WorkflowError as e:
        refused = e
    if refused is None:
        assert errors == []
    else:  # the one POST /runs names is among those lint names
        assert str(refused) in {str(x) for x in errors}


@pytest.mark.slow
def test_demo_of_your_own_workflow_exits_by_how_its_run_ended(tmp_path: Path) -> None:
    path = tmp_path / "gives-up.yaml"
    path.write_text("name: gives-up\nagents:\n  quitter: {instructions: q, access: none}\nstart: try\nstates:\n"
                    "  try:\n    turn: {agent: quitter, prompt: Try.}\n    on: {give_up: gave_up, finish: done}\n"
                    "  gave_up: {final: failed}\n  done: {final: done}\n")  # the fake's agents pick the first
    out = jr2("demo", "--workflow", str(path))
    assert out.returncode == 3 and "ended failed" in out.stdout, (out.returncode, out.stdout[-500:], out.stderr)
