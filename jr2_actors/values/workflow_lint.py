"""What `jr2-actors lint` says of a workflow document beyond what `POST /runs` refuses first: every error, not
only the first, and warnings that refuse nothing (a loop of Turns nothing bounds). Pure: the same rules as
`workflow.parse_workflow`, the one source, applied entry by entry so one fault does not hide the next."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from jr2_actors.values import workflow as wf
from jr2_actors.values.workflow import AgentDef, StateDef, WorkflowError, WorkspaceDef

MAX_REPORTED = 100  # a hostile file's thousand faults are cut here, the rest counted in one line
T = TypeVar("T")


def every_error(doc: object) -> list[WorkflowError]:
    """Every fault `parse_workflow(doc)` could raise first, in the document's order: the shape's (as each of
    them makes the rest unreadable, nothing else is checked then), else each entry's, then the graph's."""
    errors = wf.shape_errors(doc)
    if not errors:
        errors = _entry_errors(doc)
    if len(errors) > MAX_REPORTED:
        rest = len(errors) - MAX_REPORTED
        errors = [*errors[:MAX_REPORTED], WorkflowError("", f"and {rest} more error{'s' if rest > 1 else ''}")]
    return errors


def _entry_errors(doc: object) -> list[WorkflowError]:
    assert isinstance(doc, dict)  # the shape is checked
    errors: list[WorkflowError] = []

    def each(entries: Mapping[str, Any], read: Callable[[str, Any], T],
             stand_in: Callable[[str, Any], T] | None = None) -> dict[str, T]:
        """Each entry read; one at fault is reported, and a stand-in named in its place, so what names it
        is not also reported as naming nothing."""
        out: dict[str, T] = {}
        for name, body in entries.items():
            try:
                out[name] = read(name, body)
            except WorkflowError as e:
                errors.append(e)
                if stand_in is not None:
                    out[name] = stand_in(name, body)
        return out

    if len(doc["states"]) > wf.MAX_WORKFLOW_STATES:
        try:
            wf.parse_workflow(doc)
        except WorkflowError as e:
            return [e]
    workspaces = each(doc.get("workspaces", {}), wf._workspace, lambda n, _: WorkspaceDef(n, "1", "1Gi"))
    agents = each(doc.get("agents", {}), lambda n, body: wf._agent(n, body, workspaces),
                  lambda n, body: AgentDef(n, body["instructions"], body["access"],
                                           body.get("workspace") if body.get("workspace") in workspaces else None))
    names = set(doc["states"])
    states = each(doc["states"], lambda n, body: wf._state(n, body, names, workspaces, agents))
    if doc["start"] not in names:
        errors.append(WorkflowError("start", f"names no state ({doc['start']!r})"))
    if errors:  # an entry that did not parse leaves the graph unknown: what is said of it would mislead
        return errors
    try:
        wf._one_briefing_a_pick(states)
    except WorkflowError as e:
        errors.append(e)
    try:
        wf._check_size(doc)
    except WorkflowError as e:
        errors.append(e)
    return errors + wf.graph_problems(states, doc["start"])


def loop_warnings(states: Mapping[str, StateDef]) -> list[WorkflowError]:
    """A loop of Turn states none of which has an `after`: a run may go round it for as long as its Agents
    keep picking so (a review that always sends the work back). Allowed — the loop may be what is meant —
    but said, once a loop, at its first state in the document."""
    turns = {name for name, state in states.items() if state.turn is not None}
    warnings = []
    for loop in _loops({name: {t for _, t in wf.edges(states[name]) if t in turns} for name in turns}):
        if not any(states[name].after_to is not None for name in loop):
            order = [name for name in states if name in loop]
            warnings.append(WorkflowError(f"states.{order[0]}", f"a loop of Turns ({' → '.join([*order, order[0]])}) "
                                                                 "with no `after` on its way: a run may go round it "
                                                                 "for ever; an `after` on one of them bounds it"))
    return warnings


def _loops(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of `graph` that hold a cycle (more than one node, or a node onto itself),
    by Tarjan's algorithm, iteratively (a 256-state workflow would not overflow a recursion either way)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            step = next(targets, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.add(member)
                    if member == node:
                        break
                if len(part) > 1 or node in graph[node]:
                    found.append(part)
    return found
