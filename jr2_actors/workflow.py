"""Workflow files (CONTRACTS.md §5): the minimal Machine a run follows, parsed strictly. Pure.

A workflow is YAML (or the same document as JSON in `POST /runs`). Unknown keys are an error that names
them; every reference (a state's target, a held Workspace, a Turn's agent, an agent's Workspace) must
resolve. Errors are `WorkflowError`s carrying the dotted path of the key at fault, so the API's 400 names
it. The input is outside data: it is size-capped and read with `yaml.safe_load`.

What a workflow may cost is bounded (issue 18, docs/workflows.md "Bounds"): every step of a run rewrites its
whole blob and walks its states, so a document is at most `MAX_WORKFLOW_BYTES` (as the text of a file, and as
the compact JSON the run's blob stores; `WorkflowTooLarge`, the API's 413) and has at most
`MAX_WORKFLOW_STATES` states (a 400 naming `states`).

The Menu of an Agent is every pick any of its states offers; a Turn's Allowed picks are its state's `on`
keys that are picks — every key but the events the body decides on (`workspace.lost`, `agent.fault`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from jr2_actors.errors import Jr2Error, one_line
from jr2_actors.quantity import QuantityError, cpu_millis, memory_bytes

MAX_WORKFLOW_BYTES = 256 * 1024
MAX_WORKFLOW_STATES = 256
EVENTS = frozenset({"workspace.lost", "agent.fault"})
FINALS = ("done", "failed")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_PICK = re.compile(r"^[a-z][a-z0-9_]{0,62}$")

Access = Literal["write", "read", "none"]


class WorkflowError(Jr2Error):
    """The workflow document is not valid: `key` is the dotted path at fault."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        super().__init__(f"{key}: {problem}" if key else problem)


class WorkflowTooLarge(WorkflowError):
    """The document is over `MAX_WORKFLOW_BYTES`: the API answers it with 413, not 400."""


@dataclass(frozen=True)
class RepoSlot:
    slot: str
    url: str
    ref: str = ""


@dataclass(frozen=True)
class WorkspaceDef:
    path: str
    cpu: str
    memory: str
    image: str | None = None
    repos: tuple[RepoSlot, ...] = ()
    branch: str = ""


@dataclass(frozen=True)
class AgentDef:
    name: str
    instructions: str
    access: Access
    workspace: str | None = None


@dataclass(frozen=True)
class Turn:
    agent: str
    prompt: str


@dataclass(frozen=True)
class StateDef:
    name: str
    final: Literal["done", "failed"] | None = None
    holds: tuple[str, ...] = ()
    turn: Turn | None = None
    on: Mapping[str, str] = field(default_factory=dict)
    after_seconds: float | None = None
    after_to: str | None = None

    @property
    def allowed(self) -> tuple[str, ...]:
        """The picks a Turn in this state may make."""
        return tuple(k for k in self.on if k not in EVENTS)


@dataclass(frozen=True)
class Workflow:
    name: str
    workspaces: Mapping[str, WorkspaceDef]
    agents: Mapping[str, AgentDef]
    start: str
    states: Mapping[str, StateDef]

    def menu(self, agent: str) -> tuple[str, ...]:
        """Every pick any of the agent's states offers, in the order the states name them."""
        picks: list[str] = []
        for state in self.states.values():
            if state.turn is not None and state.turn.agent == agent:
                picks.extend(p for p in state.allowed if p not in picks)
        return tuple(picks)


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans: only true/false. YAML 1.1 reads the key `on:` (used by every
    state) as the boolean True, and `yes`/`no`/`off` as booleans too."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def yaml_loader() -> type[yaml.SafeLoader]:
    """The loader workflow files are read with (YAML 1.2 booleans), for a reader of their nodes (`lint`)."""
    return _Loader


def read_document(text: str | bytes) -> object:
    """The YAML (or JSON) text as data, size-capped, safe, with YAML 1.2 booleans."""
    if len(text) > MAX_WORKFLOW_BYTES:
        raise WorkflowTooLarge("", f"the workflow is over {MAX_WORKFLOW_BYTES} bytes (MAX_WORKFLOW_BYTES)")
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        raise WorkflowError("", f"not valid YAML: {one_line(e, 200)}") from e
    except RecursionError as e:
        raise WorkflowError("", "nested too deeply") from e


def read_file(path: str) -> object:
    """A workflow file's document, read capped: a larger file is refused, never read whole."""
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_WORKFLOW_BYTES + 1)
    except OSError as e:
        raise WorkflowError("", e.strerror or str(e)) from None
    return read_document(text)


def load_workflow(text: str | bytes) -> Workflow:
    return parse_workflow(read_document(text))


def parse_workflow(doc: object, *, check_graph: bool = True) -> Workflow:
    """The document as a Workflow, or the first WorkflowError. `check_graph=False` leaves `graph_problems`
    to the caller (`lint`, which reports every one)."""
    root = _map(doc, "", {"name", "workspaces", "agents", "start", "states"}, required={"name", "start", "states"})
    name = _str(root, "name", "")
    if not _NAME.match(name):
        raise WorkflowError("name", "must be 1–63 letters, digits, '.', '_' or '-', starting alphanumeric")
    workspaces = {path: _workspace(path, body) for path, body in _entries(root.get("workspaces", {}), "workspaces")}
    agents = {n: _agent(n, body, workspaces) for n, body in _entries(root.get("agents", {}), "agents")}
    raw_states = _entries(root["states"], "states")
    if not raw_states:
        raise WorkflowError("states", "a workflow needs at least one state")
    if len(raw_states) > MAX_WORKFLOW_STATES:
        raise WorkflowError("states", f"{len(raw_states)} states are over the bound of {MAX_WORKFLOW_STATES} "
                                      "(MAX_WORKFLOW_STATES)")
    names = {n for n, _ in raw_states}
    states = {n: _state(n, body, names, workspaces, agents) for n, body in raw_states}
    start = _str(root, "start", "")
    if start not in states:
        raise WorkflowError("start", f"names no state ({start!r})")
    problems = graph_problems(states, start) if check_graph else []
    if problems:
        raise problems[0]
    _check_size(doc)  # once every value is known to be a plain string, number, list or mapping
    return Workflow(name, workspaces, agents, start, states)


def edges(state: StateDef) -> list[tuple[str, str]]:
    """The state's ways out: (what takes it — a pick, an event, `after Ns` — and the state it goes to)."""
    out = list(state.on.items())
    if state.after_to is not None and state.after_seconds is not None:
        out.append((f"after {state.after_seconds:g}s", state.after_to))
    return out


def graph_problems(states: Mapping[str, StateDef], start: str) -> list[WorkflowError]:
    """Issue 19: what makes a run of it never end, one error each — the same rules for `POST /runs` and `lint`:
    a state neither final nor with a `turn` or `after` (nothing moves it on), a state no path from `start`
    reaches, and a reachable state from which no final state can be reached (a loop with no way out)."""
    problems: list[WorkflowError] = []
    for name, state in states.items():
        if state.final is None and state.turn is None and state.after_to is None:
            problems.append(WorkflowError(f"states.{name}", "can never end: it is not final and has no `turn` or "
                                                             "`after` to leave it"))
    reached, todo = {start}, [start]
    while todo:
        for _, target in edges(states[todo.pop()]):
            if target not in reached:
                reached.add(target)
                todo.append(target)
    for name in states:
        if name not in reached:
            problems.append(WorkflowError(f"states.{name}", f"is unreachable: no path from start ({start}) leads "
                                                             "to it"))
    ends = {name for name, state in states.items() if state.final is not None}
    grew = True
    while grew:  # the states from which some final state is reachable
        grew = False
        for name, state in states.items():
            if name not in ends and any(target in ends for _, target in edges(state)):
                ends.add(name)
                grew = True
    for name in states:
        if name in reached and name not in ends and (states[name].turn is not None or states[name].after_to):
            problems.append(WorkflowError(f"states.{name}", "can never end: no path from it reaches a final "
                                                             "state"))
    return problems


def _check_size(doc: object) -> None:
    """The document's size as the run's blob stores it (compact JSON): YAML aliases make that larger than
    the text (one 64 KiB prompt named in every state), and the blob is rewritten at every step."""
    try:
        size = len(json.dumps(doc, separators=(",", ":")).encode())
    except (TypeError, ValueError, RecursionError) as e:  # a value JSON cannot hold: the blob could not either
        raise WorkflowError("", f"the workflow cannot be stored as JSON ({e})") from e
    if size > MAX_WORKFLOW_BYTES:
        raise WorkflowTooLarge("", f"the workflow is {size} bytes as JSON, over the bound of {MAX_WORKFLOW_BYTES} "
                                   "(MAX_WORKFLOW_BYTES)")


def _workspace(path: str, body: object) -> WorkspaceDef:
    key = f"workspaces.{path}"
    m = _map(body, key, {"size", "image", "repos", "branch"}, required={"size"})
    size = _map(m["size"], f"{key}.size", {"cpu", "memory"}, required={"cpu", "memory"})
    cpu, memory = _str(size, "cpu", f"{key}.size"), _str(size, "memory", f"{key}.size")
    try:
        if cpu_millis(cpu) <= 0 or memory_bytes(memory) <= 0:
            raise WorkflowError(f"{key}.size", "cpu and memory must be positive")
    except QuantityError as e:
        raise WorkflowError(f"{key}.size", str(e)) from e
    repos: list[RepoSlot] = []
    raw_repos = m.get("repos", [])
    if not isinstance(raw_repos, list):
        raise WorkflowError(f"{key}.repos", "must be a list")
    for i, repo in enumerate(raw_repos):
        r = _map(repo, f"{key}.repos[{i}]", {"slot", "url", "ref"}, required={"slot", "url"})
        slot = _str(r, "slot", f"{key}.repos[{i}]")
        if not _NAME.match(slot):
            raise WorkflowError(f"{key}.repos[{i}].slot", f"{slot!r} is not a slot name")
        repos.append(RepoSlot(slot, _str(r, "url", f"{key}.repos[{i}]"), _opt_str(r, "ref", f"{key}.repos[{i}]")))
    if len({r.slot for r in repos}) != len(repos):
        raise WorkflowError(f"{key}.repos", "slot names repeat")
    image = _opt_str(m, "image", key) or None
    return WorkspaceDef(path, cpu, memory, image, tuple(repos), _opt_str(m, "branch", key))


def _agent(name: str, body: object, workspaces: Mapping[str, WorkspaceDef]) -> AgentDef:
    key = f"agents.{name}"
    m = _map(body, key, {"instructions", "workspace", "access"}, required={"instructions", "access"})
    access = m["access"]
    if access not in ("write", "read", "none"):
        raise WorkflowError(f"{key}.access", "must be write, read or none")
    ws = _opt_str(m, "workspace", key) or None
    if access == "none" and ws is not None:
        raise WorkflowError(f"{key}.workspace", "a Menu-only agent (access: none) holds no Workspace")
    if access != "none" and ws is None:
        raise WorkflowError(f"{key}.workspace", f"access {access} needs a Workspace")
    if ws is not None and ws not in workspaces:
        raise WorkflowError(f"{key}.workspace", f"names no Workspace ({ws!r})")
    return AgentDef(name, _str(m, "instructions", key), access, ws)


def _state(name: str, body: object, names: set[str], workspaces: Mapping[str, WorkspaceDef],
           agents: Mapping[str, AgentDef]) -> StateDef:
    key = f"states.{name}"
    m = _map(body, key, {"final", "holds", "turn", "on", "after"})
    if "final" in m:
        if set(m) != {"final"}:
            raise WorkflowError(key, "a final state has nothing but `final`")
        if m["final"] not in FINALS:
            raise WorkflowError(f"{key}.final", "must be done or failed")
        return StateDef(name, final=m["final"])
    holds_raw = m.get("holds", [])
    if not isinstance(holds_raw, list) or not all(isinstance(h, str) for h in holds_raw):
        raise WorkflowError(f"{key}.holds", "must be a list of Workspace paths")
    for h in holds_raw:
        if h not in workspaces:
            raise WorkflowError(f"{key}.holds", f"names no Workspace ({h!r})")
    turn = None
    if "turn" in m:
        t = _map(m["turn"], f"{key}.turn", {"agent", "prompt"}, required={"agent", "prompt"})
        agent = _str(t, "agent", f"{key}.turn")
        if agent not in agents:
            raise WorkflowError(f"{key}.turn.agent", f"names no agent ({agent!r})")
        held = agents[agent].workspace
        if held is not None and held not in holds_raw:
            raise WorkflowError(f"{key}.holds", f"the Turn's agent {agent} works in {held}, which this state "
                                                "does not hold")
        turn = Turn(agent, _str(t, "prompt", f"{key}.turn"))
    on_raw = m.get("on", {})
    if not isinstance(on_raw, dict):
        raise WorkflowError(f"{key}.on", "must be a mapping of pick or event to state")
    on: dict[str, str] = {}
    for pick, target in on_raw.items():
        if not isinstance(pick, str) or (pick not in EVENTS and not _PICK.match(pick)):
            raise WorkflowError(f"{key}.on", f"{pick!r} is neither a pick name nor {' or '.join(sorted(EVENTS))}")
        if not isinstance(target, str) or target not in names:
            raise WorkflowError(f"{key}.on.{pick}", f"names no state ({target!r})")
        on[pick] = target
    if on and turn is None and any(p not in EVENTS for p in on):
        raise WorkflowError(f"{key}.on", "picks need a Turn to make them")
    after_seconds = after_to = None
    if "after" in m:
        a = _map(m["after"], f"{key}.after", {"seconds", "to"}, required={"seconds", "to"})
        seconds = a["seconds"]
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 < seconds <= 366 * 86400:
            raise WorkflowError(f"{key}.after.seconds", "must be a positive number of seconds (at most a year)")
        after_to = _str(a, "to", f"{key}.after")
        if after_to not in names:
            raise WorkflowError(f"{key}.after.to", f"names no state ({after_to!r})")
        after_seconds = float(seconds)
    return StateDef(name, None, tuple(holds_raw), turn, on, after_seconds, after_to)


def _entries(value: object, key: str) -> list[tuple[str, Any]]:
    if not isinstance(value, dict):
        raise WorkflowError(key, "must be a mapping")
    out = []
    for name, body in value.items():
        if not isinstance(name, str) or not name or len(name) > 63:
            raise WorkflowError(key, f"{name!r} is not a name")
        out.append((name, body))
    return out


def _map(value: object, key: str, allowed: set[str], required: frozenset[str] | set[str] = frozenset()) -> dict[
        str, Any]:
    if not isinstance(value, dict):
        raise WorkflowError(key, "must be a mapping")
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        where = f"{key}." if key else ""
        raise WorkflowError(where + unknown[0], f"unknown key{'s' if len(unknown) > 1 else ''}: "
                                                f"{', '.join(where + u for u in unknown)}")
    missing = sorted(required - set(value))
    if missing:
        where = f"{key}." if key else ""
        raise WorkflowError(where + missing[0], "is required")
    return value


def _str(m: Mapping[str, Any], name: str, key: str) -> str:
    value = m.get(name)
    full = f"{key}.{name}" if key else name
    if not isinstance(value, str) or not value.strip():
        raise WorkflowError(full, "must be a non-empty string")
    if len(value) > 64 * 1024:
        raise WorkflowError(full, "is too long")
    return value


def _opt_str(m: Mapping[str, Any], name: str, key: str) -> str:
    return _str(m, name, key) if name in m else ""
