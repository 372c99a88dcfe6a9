"""`jr2-actors lint` and `graph` as processes (issue 19 item 3): every error names its file and line, the
rules are POST /runs's own (one source, `workflow.parse_workflow`), and the graph is drawn from the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from jr2_actors.values.workflow import WorkflowError, parse_workflow, read_document
from tests.support.cli_process import jr2
from tests.support.paths import DOCS, PACKAGE

EXAMPLE = PACKAGE / "examples" / "fix-and-review.yaml"
DEAD_END = """name: dead-end
start: a
states:
  a:
    after: {seconds: 5, to: b}
  b: {}
  c: {final: done}
"""
LOOP = """name: loop
agents: {triage: {instructions: "You route.", access: none}}
start: a
states:
  a:
    turn: {agent: triage, prompt: "Go."}
    on: {again: a}
  done: {final: done}
"""


def test_lint_passes_the_bundled_examples() -> None:
    out = jr2("lint", str(EXAMPLE), str(EXAMPLE.with_name("neighbour.yaml")))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"{EXAMPLE}: ok", f"{EXAMPLE.with_name('neighbour.yaml')}: ok"]


def test_lint_names_file_and_line_of_every_graph_error_and_exits_2(tmp_path: Path) -> None:
    dead, loop = tmp_path / "dead.yaml", tmp_path / "loop.yaml"
    dead.write_text(DEAD_END)
    loop.write_text(LOOP)
    out = jr2("lint", str(dead), str(loop))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.splitlines() == [
        f"{dead}:4: states.a: can never end: no path from it reaches a final state",  # in each file's order
        f"{dead}:6: states.b: can never end: it is not final and has no `turn` or `after` to leave it",
        f"{dead}:7: states.c: is unreachable: no path from start (a) leads to it",
        f"{loop}:5: states.a: can never end: no path from it reaches a final state",
        f"{loop}:8: states.done: is unreachable: no path from start (a) leads to it",
    ]


@pytest.mark.parametrize(("text", "says"), [
    ("name: x\nstart: a\nstates:\n  a:\n    bogus: 1\n", ":5: states.a.bogus: unknown key"),
    ("name: x\nstart: a\nstates:\n  a:\n    after: {seconds: -1, to: b}\n  b: {final: done}\n",
     ":5: states.a.after.seconds: must be a positive number"),
    ("name: x\nagents: {w: {instructions: i, access: none}}\nstart: a\nstates:\n  a:\n"
     "    turn: {agent: w, prompt: p}\n    on: {Bad-Pick: b}\n  b: {final: done}\n", ":7: states.a.on: 'Bad-Pick'"),
    ("name: [\n", ":2: not valid YAML"),
])
def test_lint_of_a_refused_document_is_one_line_with_its_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    out = jr2("lint", str(path))
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert out.stderr.startswith(f"{path}{says}"), out.stderr


def test_lint_of_a_missing_file_is_one_line_and_the_others_still_checked(tmp_path: Path) -> None:
    out = jr2("lint", str(tmp_path / "none.yaml"), str(EXAMPLE))
    assert out.returncode == 2
    assert out.stderr.strip() == f"jr2-actors: {tmp_path / 'none.yaml'}: No such file or directory", out.stderr
    assert out.stdout.strip() == f"{EXAMPLE}: ok"


def test_post_runs_refuses_what_lint_refuses() -> None:
    """One source: the parser POST /runs calls refuses the dead end, naming the key lint names."""
    with pytest.raises(WorkflowError) as refused:
        parse_workflow(read_document(DEAD_END))
    assert refused.value.key == "states.b"


def test_graph_draws_the_example_as_mermaid_and_dot() -> None:
    mermaid = jr2("graph", str(EXAMPLE))
    assert mermaid.returncode == 0, mermaid.stderr
    assert mermaid.stdout.splitlines()[:3] == ["stateDiagram-v2", "    [*] --> code", "    code --> review: finish"]
    assert "    code --> failed: after 3600s" in mermaid.stdout and "    done --> [*]" in mermaid.stdout
    dot = jr2("graph", str(EXAMPLE), "-o", "dot")
    assert dot.returncode == 0 and dot.stdout.startswith('digraph "fix-and-review" {'), dot.stderr
    assert '    "review" -> "code" [label="reject"];' in dot.stdout and dot.stdout.rstrip().endswith("}")


def test_the_graph_in_docs_workflows_is_the_examples() -> None:
    docs = (DOCS / "workflows.md").read_text()
    assert "```mermaid\n" + jr2("graph", str(EXAMPLE)).stdout + "```" in docs


@pytest.mark.parametrize(("args", "says"), [(("graph", "/no/such.yaml"), "No such file or directory"),
                                            (("graph", "DEAD"), ":6: states.b: can never end"),
                                            (("graph", "EXAMPLE", "-o", "svg"), "invalid choice: 'svg'")])
def test_bad_graph_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    dead = tmp_path / "dead.yaml"
    dead.write_text(DEAD_END)
    argv = [str(dead) if a == "DEAD" else str(EXAMPLE) if a == "EXAMPLE" else a for a in args]
    out = jr2(*argv)
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr
