"""The Console's graph of a workflow: its states placed and its ways out drawn, as numbers. Pure.

The same graph `jr2-actors graph` prints (the states, and each way out from `values.workflow.edges`: a
pick, an event, `after Ns`), laid out as `graph -o dot` lays it (rankdir=LR): a state's column is its
distance in ways out from `start`, so a run reads left to right. Within a column the states are ordered by
the mean row of their neighbours in the column beside it (a few barycentre sweeps, Sugiyama's heuristic),
which keeps most ways out from crossing. A way out to a later column is a curve from one state's right side
to the other's left; one back to the same or an earlier column (`reject: code`) bends under every state
between them; one to itself is a loop over it. The browser draws the numbers (each name as text, never as
markup); nothing here measures text, so a name's width is reckoned from its length.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jr2_actors.values.workflow import Workflow, edges

CHAR_WIDTH = 7.5  # px per character of the Console's 13px sans-serif, rounded up: a name always fits its box
NODE_HEIGHT = 36.0
NODE_PAD = 28.0
MIN_NODE_WIDTH = 64.0
ROW_GAP = 30.0
MIN_COLUMN_GAP = 90.0
MARGIN = 44.0  # the start's dot stands in the left margin, a loop over a top state in the top one
BACK_DROP = 26.0  # how far under the lowest state between them a way back runs, and apart from the next
LOOP_RISE = 34.0
SWEEPS = 4


@dataclass(frozen=True)
class Node:
    name: str
    x: float
    y: float
    width: float
    height: float
    final: str | None
    start: bool
    holds: tuple[str, ...]  # the Workspaces it holds: the one lit `placing` while a Workspace of it waits


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str
    path: str  # SVG path data
    label_x: float
    label_y: float


@dataclass(frozen=True)
class Layout:
    width: float
    height: float
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]

    def doc(self) -> dict[str, Any]:
        return {"width": self.width, "height": self.height,
                "nodes": [{"name": n.name, "x": n.x, "y": n.y, "width": n.width, "height": n.height,
                           "final": n.final, "start": n.start, "holds": list(n.holds)} for n in self.nodes],
                "edges": [{"from": e.source, "to": e.target, "label": e.label, "path": e.path,
                           "labelX": e.label_x, "labelY": e.label_y} for e in self.edges]}


def columns(start: str, ways: Mapping[str, list[tuple[str, str]]]) -> list[list[str]]:
    """Each state's column: its distance from `start` (breadth first, in the order the document names the
    ways out); a state no way reaches (a refused document has none) stands in a last column."""
    depth = {start: 0}
    queue = deque([start])
    while queue:
        name = queue.popleft()
        for _, target in ways.get(name, []):
            if target not in depth and target in ways:
                depth[target] = depth[name] + 1
                queue.append(target)
    last = max(depth.values(), default=-1) + 1
    out: list[list[str]] = [[] for _ in range(last + (len(depth) < len(ways)))]
    for name in ways:  # the document's order first, then the sweeps
        out[depth.get(name, last)].append(name)
    return out


def _ordered(cols: list[list[str]], ways: Mapping[str, list[tuple[str, str]]]) -> list[list[str]]:
    neighbours: dict[str, set[str]] = {name: set() for name in ways}
    for name, outs in ways.items():
        for _, target in outs:
            if target in neighbours and target != name:
                neighbours[name].add(target)
                neighbours[target].add(name)
    cols = [list(c) for c in cols]
    for sweep in range(SWEEPS):
        order = range(1, len(cols)) if sweep % 2 == 0 else range(len(cols) - 2, -1, -1)
        for i in order:
            beside = cols[i - 1] if sweep % 2 == 0 else cols[i + 1]
            row = {name: r for r, name in enumerate(beside)}

            def key(item: tuple[int, str], row: dict[str, int] = row) -> float:
                at, name = item
                near = [row[n] for n in neighbours[name] if n in row]
                return sum(near) / len(near) if near else float(at)

            cols[i] = [name for _, name in sorted(enumerate(cols[i]), key=key)]
    return cols


def node_width(name: str) -> float:
    return max(MIN_NODE_WIDTH, len(name) * CHAR_WIDTH + NODE_PAD)


def layout(workflow: Workflow) -> Layout:
    """The workflow's graph, placed (every coordinate in px, from the top left)."""
    ways = {name: edges(state) for name, state in workflow.states.items()}
    cols = _ordered(columns(workflow.start, ways), ways)
    col_of = {name: i for i, col in enumerate(cols) for name in col}
    row_of = {name: r for col in cols for r, name in enumerate(col)}
    # A way back from the upper half of its column runs over the states between, one from the lower half
    # under them: decided first, so the top margin can make room for the ways over.
    over = {(name, target): row_of[name] < len(cols[col_of[name]]) / 2
            for name, outs in ways.items() for _, target in outs
            if target in col_of and target != name and col_of[target] <= col_of[name]}
    rows = max((len(c) for c in cols), default=0)
    step = NODE_HEIGHT + ROW_GAP
    head = MARGIN + BACK_DROP * sum(over.values())
    nodes: dict[str, Node] = {}
    x = MARGIN
    for i, col in enumerate(cols):
        width = max((node_width(n) for n in col), default=MIN_NODE_WIDTH)
        top = head + (rows - len(col)) * step / 2
        for r, name in enumerate(col):
            w = node_width(name)
            state = workflow.states[name]
            nodes[name] = Node(name, x + (width - w) / 2, top + r * step, w, NODE_HEIGHT, state.final,
                               name == workflow.start, tuple(state.holds))
        labels = [len(label) for name in col for label, target in ways[name] if col_of.get(target, -1) > i]
        x += width + max(MIN_COLUMN_GAP, max(labels, default=0) * CHAR_WIDTH + 40)
    bottom = head + max(rows * step - ROW_GAP, 0)
    out: list[Edge] = []
    pairs: dict[tuple[str, str], int] = {}
    overs = unders = 0
    for name, outs in ways.items():
        a = nodes[name]
        for label, target in outs:
            if target not in nodes:
                continue
            b = nodes[target]
            k = pairs[(name, target)] = pairs.get((name, target), -1) + 1  # a second way between the same two
            if target == name:
                out.append(_loop(a, label, k))
            elif col_of[target] > col_of[name]:
                out.append(_forward(a, b, label, k))
            else:
                between = [n for n in nodes.values() if col_of[target] <= col_of[n.name] <= col_of[name]]
                if over[(name, target)]:
                    overs += 1
                    out.append(_back(a, b, label, min(n.y for n in between) - BACK_DROP * overs, over=True))
                else:
                    unders += 1
                    low = max(n.y + n.height for n in between) + BACK_DROP * unders
                    bottom = max(bottom, low + 14)
                    out.append(_back(a, b, label, low, over=False))
    right = max((n.x + n.width for n in nodes.values()), default=0.0)
    return Layout(round(right + MARGIN, 1), round(bottom + MARGIN, 1), tuple(nodes.values()), tuple(out))


def _forward(a: Node, b: Node, label: str, k: int) -> Edge:
    x1, y1 = a.x + a.width, a.y + a.height / 2
    x2, y2 = b.x, b.y + b.height / 2
    mid = (x1 + x2) / 2
    bend = 18.0 * k
    path = f"M{x1:.1f},{y1:.1f} C{mid:.1f},{y1 + bend:.1f} {mid:.1f},{y2 + bend:.1f} {x2:.1f},{y2:.1f}"
    return Edge(a.name, b.name, label, path, round(mid, 1), round((y1 + y2) / 2 + bend * 0.75 - 5, 1))


def _back(a: Node, b: Node, label: str, level: float, *, over: bool) -> Edge:
    """A way back to an earlier column (or within one): out of the state's bottom, under the states between
    and into the other's bottom — or over them, top to top."""
    y1 = a.y if over else a.y + a.height
    y2 = b.y if over else b.y + b.height
    x1, x2 = a.x + a.width / 2, b.x + b.width / 2
    path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{level:.1f} {x2:.1f},{level:.1f} {x2:.1f},{y2:.1f}"
    # the curve's extreme is at t = 1/2: three quarters of the way from the ends to `level`
    extreme = (y1 + y2) / 8 + level * 0.75
    return Edge(a.name, b.name, label, path, round((x1 + x2) / 2, 1), round(extreme - 5 if over else extreme + 12, 1))


def _loop(a: Node, label: str, k: int) -> Edge:
    x1, x2, y = a.x + a.width * 0.7, a.x + a.width * 0.3, a.y
    rise = LOOP_RISE + 14.0 * k
    path = f"M{x1:.1f},{y:.1f} C{x1 + 10:.1f},{y - rise:.1f} {x2 - 10:.1f},{y - rise:.1f} {x2:.1f},{y:.1f}"
    return Edge(a.name, a.name, label, path, round(a.x + a.width / 2, 1), round(y - rise * 0.75 - 4, 1))
