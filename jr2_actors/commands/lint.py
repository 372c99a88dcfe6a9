"""`jr2-actors lint FILE…` and `jr2-actors graph FILE`: a workflow file checked, or drawn, offline.

`lint` applies the rules `POST /runs` applies — `workflow.parse_workflow`, the one source: unknown keys, pick
names, `after` bounds, states nothing moves on, unreachable states, loops with no way to a final state —
and prints each error as `FILE:LINE: key: problem` (the line of the key at fault, read from the YAML's own
nodes). `graph` prints the state graph as Mermaid (`-o mermaid`, the default) or Graphviz DOT (`-o dot`).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import TYPE_CHECKING, Any

from jr2_actors.commands.common import UsageError
from jr2_actors.commands.completion import files
from jr2_actors.commands.yaml_lines import line_of

if TYPE_CHECKING:  # the workflow rules (jsonschema, yaml) load when a file is read, not for every command
    from jr2_actors.values.workflow import Workflow, WorkflowError


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("lint", help="check workflow files offline, as POST /runs would (no server needed)",
                       description="Check workflow files with the rules POST /runs applies; each error is "
                                   "FILE:LINE: key: problem. Exit 0 when every file is good, else 2. "
                                   "Example: jr2-actors lint fix.yaml review.yaml")
    files(p.add_argument("files", metavar="FILE", nargs="+", help="workflow files, YAML or JSON (required)"))
    p = sub.add_parser("graph", help="print a workflow's state graph (Mermaid, or DOT with -o dot)",
                       description="Print a workflow's states and the picks, events and timeouts between them. "
                                   "Example: jr2-actors graph fix.yaml -o dot | dot -Tsvg > fix.svg")
    files(p.add_argument("file", metavar="FILE", help="a workflow file, YAML or JSON (required)"))
    p.add_argument("-o", "--output", choices=("mermaid", "dot"), default="mermaid",
                   help="mermaid (a stateDiagram-v2) or dot (Graphviz) (default: mermaid)")


def run(args: argparse.Namespace) -> int:
    if args.command == "lint":
        bad = 0
        for path in args.files:
            errors, warnings = check_file(path)
            for line in errors + warnings:
                print(line, file=sys.stderr, flush=True)
            if not errors:
                said = f" ({len(warnings)} warning{'s' if len(warnings) > 1 else ''})" if warnings else ""
                print(f"{path}: ok{said}", flush=True)
            bad += bool(errors)
        return 2 if bad else 0
    try:
        workflow, _ = _load(args.file)
    except _Refused as e:
        raise UsageError(f"{args.file}:{e.line}: {e.error}" if e.line else f"{args.file}: {e.error}") from None
    print("\n".join(dot(workflow) if args.output == "dot" else mermaid(workflow)))
    return 0


def lint_file(path: str) -> list[str]:
    """Every error in the file, each `FILE:LINE: key: problem` (LINE when the key is found in the text)."""
    return check_file(path)[0]


def check_file(path: str) -> tuple[list[str], list[str]]:
    """Every error in the file, each `FILE:LINE: key: problem` (LINE when the key is found in the text), and,
    for a file with none, its warnings, each `FILE:LINE: warning: key: problem`."""
    from jr2_actors.values.workflow import MAX_WORKFLOW_BYTES, WorkflowError, parse_workflow, read_document
    from jr2_actors.values.workflow_lint import every_error, loop_warnings

    try:
        raw, text = _read(path)
    except UsageError as e:
        return [f"jr2-actors: {e}"], []
    try:
        doc = read_document(raw)
    except WorkflowError as e:
        return [_at(path, text, e)], []
    errors = every_error(doc)
    if errors:  # in the file's order, as a reader goes through it; what names no key (a count) last
        placed = sorted(((_line(text, e), e) for e in errors), key=lambda p: p[0] or MAX_WORKFLOW_BYTES)
        return [f"{path}:{line or 1}: {e}" for line, e in placed], []
    workflow = parse_workflow(doc, check_graph=False)
    return [], [f"{path}:{_line(text, w) or 1}: warning: {w}" for w in loop_warnings(workflow.states)]


def _at(path: str, text: str, error: WorkflowError) -> str:
    return f"{path}:{_line(text, error) or 1}: {error}"


def _line(text: str, error: WorkflowError) -> int | None:
    mark = getattr(error.__cause__, "problem_mark", None)
    return mark.line + 1 if mark is not None else line_of(text, error.key) if error.key else None


def _read(path: str) -> tuple[bytes, str]:
    from jr2_actors.values.workflow import MAX_WORKFLOW_BYTES

    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_WORKFLOW_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from None
    return raw, raw.decode("utf-8", "replace")


class _Refused(Exception):
    def __init__(self, error: WorkflowError, line: int | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.line = line


def _load(path: str, *, check_graph: bool = True) -> tuple[Workflow, str]:
    from jr2_actors.values.workflow import WorkflowError, parse_workflow, read_document

    raw, text = _read(path)
    try:
        return parse_workflow(read_document(raw), check_graph=check_graph), text
    except WorkflowError as e:
        mark = getattr(e.__cause__, "problem_mark", None)
        line = mark.line + 1 if mark is not None else line_of(text, e.key)
        raise _Refused(e, line) from None


def mermaid(workflow: Workflow) -> list[str]:
    from jr2_actors.values.workflow import edges

    lines = ["stateDiagram-v2", f"    [*] --> {_id(workflow.start)}"]
    for name, state in workflow.states.items():
        for label, target in edges(state):
            lines.append(f"    {_id(name)} --> {_id(target)}: {label}")
        if state.final is not None:
            lines.append(f"    {_id(name)} --> [*]")
    return lines


def dot(workflow: Workflow) -> list[str]:
    from jr2_actors.values.workflow import edges

    lines = [f"digraph {_quoted(workflow.name)} {{", "    rankdir=LR;", '    "[start]" [shape=point];',
             f'    "[start]" -> {_quoted(workflow.start)};']
    for name, state in workflow.states.items():
        if state.final is not None:
            lines.append(f"    {_quoted(name)} [shape=doublecircle];")
        for label, target in edges(state):
            lines.append(f"    {_quoted(name)} -> {_quoted(target)} [label={_quoted(label)}];")
    return [*lines, "}"]


def marked_graph(workflow: Workflow, path: list[str], *, dropped: int = 0) -> list[str]:
    """`status RUN -o wide`: the path a run took — the states it entered, in order — and
    the state graph with each way out it took marked `*`, with how often (two ways between the same states,
    two picks say, are both marked: the path names states, not picks)."""
    from jr2_actors.values.workflow import edges

    taken: dict[tuple[str, str], int] = {}
    for pair in itertools.pairwise(path):
        taken[pair] = taken.get(pair, 0) + 1
    earlier = f"… ({dropped} earlier) → " if dropped else ""
    lines = [f"  path: {earlier}{' → '.join(path)}", "  graph (* the path taken):"]
    for name, state in workflow.states.items():
        if state.final is not None:
            here = "*" if path and path[-1] == name else " "
            lines.append(f"    {here} {name}: final {state.final}")
        for label, target in edges(state):
            n = taken.get((name, target), 0)
            lines.append(f"    {'*' if n else ' '} {name} --{label}--> {target}" + (f" ({n} times)" if n > 1 else ""))
    return lines


def _id(name: str) -> str:
    """A state as a Mermaid id: letters, digits and '_' only."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
