"""Workflow files (CONTRACTS.md §5): the minimal Machine a run follows, parsed strictly. Pure.

A workflow is YAML (or the same document as JSON in `POST /runs`). Unknown keys are an error that names
them; every reference (a state's target, a held Workspace, a Turn's agent, an agent's Workspace) must
resolve. Errors are `WorkflowError`s carrying the dotted path of the key at fault, so the API's 400 names
it. The input is outside data: it is size-capped and read with `yaml.safe_load`.

What a workflow may cost is bounded (docs/workflows.md "Bounds"): every step of a run rewrites its
whole blob and walks its states, so a document is at most `MAX_WORKFLOW_BYTES` (as the text of a file, and as
the compact JSON the run's blob stores; `WorkflowTooLarge`, the API's 413) and has at most
`MAX_WORKFLOW_STATES` states (a 400 naming `states`).

The Menu of an Agent is every pick any of its states offers; a Turn's Allowed picks are its state's `on`
keys that are picks — every key but the events the body decides on (`workspace.lost`, `agent.fault`).
A pick may carry a briefing (`on: {approve: {to: done, briefing: "…"}}`, ADR-0062): jr2's text on the pick,
marked on the Menu the admission carries (`menu_body`) and said by the Harness only on a Turn that may make
that pick. The Menu is fixed for a conversation (ADR-0029), so a pick has one briefing per Agent: every
state of the Agent's Turns that offers it gives the same one, or none does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

import yaml

from jr2_actors.values.constants import MAX_PICK_BRIEFING
from jr2_actors.values.errors import Jr2Error, one_line
from jr2_actors.values.quantity import QuantityError, cpu_millis, memory_bytes

MAX_WORKFLOW_BYTES = 256 * 1024
MAX_WORKFLOW_STATES = 256
EVENTS = frozenset({"workspace.lost", "agent.fault"})
FINALS = ("done", "failed")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_PICK = re.compile(r"^[a-z][a-z0-9_]{0,62}$")  # an identifier in the Menu an Agent names its pick from
PICK_RULE = "a lower-case letter, then lower-case letters, digits or '_', at most 63 characters"

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
    briefings: Mapping[str, str] = field(default_factory=dict)  # a pick's briefing, for the picks given one

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

    def briefings(self, agent: str) -> dict[str, str]:
        """Each pick of the agent's Menu that has a briefing → its text (one per pick: `_one_briefing_a_pick`)."""
        out: dict[str, str] = {}
        for state in self.states.values():
            if state.turn is not None and state.turn.agent == agent:
                out.update(state.briefings)
        return out

    def menu_body(self, agent: str) -> list[str | dict[str, str]]:
        """The Menu as an admission carries it (CONTRACTS.md §3, `definition.menu`): a pick's name, or
        `{"pick", "briefing"}` for a pick with a briefing (ADR-0062: the surface marks it on the pick, so a
        restatement that opens the pick can say it too). With no briefing it is the list of names."""
        briefings = self.briefings(agent)
        return [{"pick": p, "briefing": briefings[p]} if p in briefings else p for p in self.menu(agent)]


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


def load_workflow(text: str | bytes) -> Workflow:
    return parse_workflow(read_document(text))


def parse_workflow(doc: object, *, check_graph: bool = True) -> Workflow:
    """The document as a Workflow, or the first WorkflowError. `check_graph=False` leaves `graph_problems`
    to the caller (`lint`, which reports every one)."""
    root = _checked(doc)
    if len(root["states"]) > MAX_WORKFLOW_STATES:
        raise WorkflowError("states", f"{len(root['states'])} states are over the bound of {MAX_WORKFLOW_STATES} "
                                      "(MAX_WORKFLOW_STATES)")
    workspaces = {path: _workspace(path, body) for path, body in root.get("workspaces", {}).items()}
    agents = {n: _agent(n, body, workspaces) for n, body in root.get("agents", {}).items()}
    names = set(root["states"])
    states = {n: _state(n, body, names, workspaces, agents) for n, body in root["states"].items()}
    start = root["start"]
    if start not in states:
        raise WorkflowError("start", f"names no state ({start!r})")
    _one_briefing_a_pick(states)
    problems = graph_problems(states, start) if check_graph else []
    if problems:
        raise problems[0]
    _check_size(doc)  # once every value is known to be a plain string, number, list or mapping
    return Workflow(root["name"], workspaces, agents, start, states)


Parse = Callable[[Any], Workflow]  # `parse_workflow`, or an orchestrator's `WorkflowMemo.parse`


def edges(state: StateDef) -> list[tuple[str, str]]:
    """The state's ways out: (what takes it — a pick, an event, `after Ns` — and the state it goes to)."""
    out = list(state.on.items())
    if state.after_to is not None and state.after_seconds is not None:
        out.append((f"after {state.after_seconds:g}s", state.after_to))
    return out


def graph_problems(states: Mapping[str, StateDef], start: str) -> list[WorkflowError]:
    """What makes a run of it never end, one error each — the same rules for `POST /runs` and `lint`:
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


# -- the document's shape: a JSON Schema (jsonschema) -------------------------------------------------
# What is not shape — a reference that must resolve, a quantity, a pick's name, a final state's lone key
# — is checked as the document is read, below. `x-message` is what a failed subschema says.

_TEXT = {"type": "string", "pattern": r"\S", "maxLength": 64 * 1024, "x-message": "must be a non-empty string"}
_NAMES = {"type": "string", "minLength": 1, "maxLength": 63}  # an entry's name: a fault is the mapping's
_HELD = {"type": "string", "x-message": "must be a list of Workspace paths"}  # a fault is the list's


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    # Keywords in the order they are checked (jsonschema applies them in order; the first fault is named).
    return {"type": "object", "x-message": "must be a mapping", "additionalProperties": False,
            "required": list(required), "properties": properties}


def _entries_of(schema: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "x-message": "must be a mapping", "propertyNames": _NAMES, **more,
            "additionalProperties": schema}


_SCHEMA: dict[str, Any] = _object({
    "name": {"allOf": [_TEXT, {"pattern": _NAME.pattern, "x-message": "must be 1–63 letters, digits, '.', '_' "
                                                                      "or '-', starting alphanumeric"}]},
    "workspaces": _entries_of(_object({
        "size": _object({"cpu": _TEXT, "memory": _TEXT}, ("cpu", "memory")),
        "image": _TEXT,
        "repos": {"type": "array", "x-message": "must be a list",
                  "items": _object({"slot": _TEXT, "url": _TEXT, "ref": _TEXT}, ("slot", "url"))},
        "branch": _TEXT,
    }, ("size",))),
    "agents": _entries_of(_object({
        "instructions": _TEXT,
        "workspace": _TEXT,
        "access": {"enum": ["write", "read", "none"], "x-message": "must be write, read or none"},
    }, ("instructions", "access"))),
    "start": _TEXT,
    "states": _entries_of(_object({
        "final": {"enum": list(FINALS), "x-message": "must be done or failed"},
        "holds": {"type": "array", "items": _HELD, "x-message": _HELD["x-message"]},
        "turn": _object({"agent": _TEXT, "prompt": _TEXT}, ("agent", "prompt")),
        "on": {"type": "object", "x-message": "must be a mapping of pick or event to a state (or {to, briefing})"},
        "after": _object({"seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 366 * 86400,
                                      "x-message": "must be a positive number of seconds (at most a year)"},
                          "to": _TEXT}, ("seconds", "to")),
    }), minProperties=1),
}, ("name", "start", "states"))
if TYPE_CHECKING:
    import jsonschema


@cache
def _validator() -> jsonschema.Draft202012Validator:
    """Made on the first check, so reading a document (a client's `submit`) does not load jsonschema."""
    import jsonschema

    return jsonschema.Draft202012Validator(_SCHEMA)


def _checked(doc: object) -> dict[str, Any]:
    """`doc` when it has the workflow's shape; else the first fault, named by its dotted key."""
    error = next(iter(_validator().iter_errors(doc)), None)
    if error is None:
        assert isinstance(doc, dict)
        return doc
    raise _named(error)


def shape_errors(doc: object) -> list[WorkflowError]:
    """Every fault of the document's shape (`lint` reports them all), each as `_checked` names the first, in
    the document's order (a mapping's keys as written)."""
    def order(path: Iterable[str | int]) -> list[int]:
        at: object = doc
        out: list[int] = []
        for step in path:
            if isinstance(at, dict) and step in at:
                out.append(list(at).index(step))
                at = at[step]
            elif isinstance(at, list) and isinstance(step, int) and 0 <= step < len(at):
                out.append(step)
                at = at[step]
            else:
                break
        return out

    return [_named(e) for e in sorted(_validator().iter_errors(doc), key=lambda e: order(e.absolute_path))]


def _named(error: Any) -> WorkflowError:  # a jsonschema.ValidationError, whose fields its stubs type loosely
    path = list(error.absolute_path)
    if error.schema is _HELD:
        path = path[:-1]
    key = _dotted(path)
    where = f"{key}." if key else ""
    if error.validator == "additionalProperties":
        unknown = sorted(str(k) for k in error.instance if k not in error.schema["properties"])
        return WorkflowError(where + unknown[0], f"unknown key{'s' if len(unknown) > 1 else ''}: "
                                                 f"{', '.join(where + u for u in unknown)}")
    if error.validator == "required":
        missing = sorted(set(error.schema["required"]) - set(error.instance))
        return WorkflowError(where + missing[0], "is required")
    if error.schema is _NAMES:  # propertyNames: the name itself failed
        return WorkflowError(key, f"{error.instance!r} is not a name")
    if error.validator == "minProperties":
        return WorkflowError(key, "a workflow needs at least one state")
    if error.validator == "maxLength" and error.schema is _TEXT:
        return WorkflowError(key, "is too long")
    return WorkflowError(key, str(error.schema.get("x-message", error.message)))


def _dotted(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# -- references, quantities, picks ---------------------------------------------------------------------

def _workspace(path: str, m: Mapping[str, Any]) -> WorkspaceDef:
    key = f"workspaces.{path}"
    cpu, memory = m["size"]["cpu"], m["size"]["memory"]
    try:
        if cpu_millis(cpu) <= 0 or memory_bytes(memory) <= 0:
            raise WorkflowError(f"{key}.size", "cpu and memory must be positive")
    except QuantityError as e:
        raise WorkflowError(f"{key}.size", str(e)) from e
    repos: list[RepoSlot] = []
    for i, r in enumerate(m.get("repos", [])):
        slot = r["slot"]
        if not _NAME.match(slot):
            raise WorkflowError(f"{key}.repos[{i}].slot", f"{slot!r} is not a slot name")
        repos.append(RepoSlot(slot, r["url"], r.get("ref", "")))
    if len({r.slot for r in repos}) != len(repos):
        raise WorkflowError(f"{key}.repos", "slot names repeat")
    return WorkspaceDef(path, cpu, memory, m.get("image") or None, tuple(repos), m.get("branch", ""))


def _agent(name: str, m: Mapping[str, Any], workspaces: Mapping[str, WorkspaceDef]) -> AgentDef:
    key = f"agents.{name}"
    access = m["access"]
    ws = m.get("workspace") or None
    if access == "none" and ws is not None:
        raise WorkflowError(f"{key}.workspace", "a Menu-only agent (access: none) holds no Workspace")
    if access != "none" and ws is None:
        raise WorkflowError(f"{key}.workspace", f"access {access} needs a Workspace")
    if ws is not None and ws not in workspaces:
        raise WorkflowError(f"{key}.workspace", f"names no Workspace ({ws!r})")
    return AgentDef(name, m["instructions"], access, ws)


def _state(name: str, m: Mapping[str, Any], names: set[str], workspaces: Mapping[str, WorkspaceDef],
           agents: Mapping[str, AgentDef]) -> StateDef:
    key = f"states.{name}"
    if "final" in m:
        if set(m) != {"final"}:
            raise WorkflowError(key, "a final state has nothing but `final`")
        return StateDef(name, final=m["final"])
    holds: list[str] = m.get("holds", [])
    for h in holds:
        if h not in workspaces:
            raise WorkflowError(f"{key}.holds", f"names no Workspace ({h!r})")
    turn = None
    if "turn" in m:
        agent = m["turn"]["agent"]
        if agent not in agents:
            raise WorkflowError(f"{key}.turn.agent", f"names no agent ({agent!r})")
        held = agents[agent].workspace
        if held is not None and held not in holds:
            raise WorkflowError(f"{key}.holds", f"the Turn's agent {agent} works in {held}, which this state "
                                                "does not hold")
        turn = Turn(agent, m["turn"]["prompt"])
    on: dict[str, str] = {}
    briefings: dict[str, str] = {}
    for pick, way in m.get("on", {}).items():
        if not isinstance(pick, str) or (pick not in EVENTS and not _PICK.match(pick)):
            raise WorkflowError(f"{key}.on", _not_a_pick(pick))
        target, where = way, f"{key}.on.{pick}"
        if isinstance(way, Mapping):
            target, text = _way(where, pick, way)
            where += ".to"
            if text is not None:
                briefings[pick] = text
        if not isinstance(target, str) or target not in names:
            raise WorkflowError(where, f"names no state ({target!r})")
        on[pick] = target
    if on and turn is None and any(p not in EVENTS for p in on):
        raise WorkflowError(f"{key}.on", "picks need a Turn to make them")
    after_seconds = after_to = None
    if "after" in m:
        after_to = m["after"]["to"]
        if after_to not in names:
            raise WorkflowError(f"{key}.after.to", f"names no state ({after_to!r})")
        after_seconds = float(m["after"]["seconds"])
    return StateDef(name, None, tuple(holds), turn, on, after_seconds, after_to, briefings)


def _not_a_pick(pick: object) -> str:
    """The rule, and the name it would take, for an `on` key that is neither a pick nor an event."""
    fixed = re.sub(r"[^a-z0-9_]", "_", pick.lower()) if isinstance(pick, str) else ""
    say = f"; {fixed} is one" if _PICK.match(fixed) else ""
    return f"{pick!r} is not a pick name ({PICK_RULE}{say}) nor an event ({' or '.join(sorted(EVENTS))})"


def _way(key: str, pick: str, way: Mapping[Any, Any]) -> tuple[object, str | None]:
    """A way out written long: `{to, briefing?}` — its target and its briefing (ADR-0062), checked."""
    unknown = sorted(str(k) for k in way if k not in ("to", "briefing"))
    if unknown:
        raise WorkflowError(f"{key}.{unknown[0]}", f"unknown key{'s' if len(unknown) > 1 else ''}: "
                                                   f"{', '.join(f'{key}.{u}' for u in unknown)}")
    if "to" not in way:
        raise WorkflowError(f"{key}.to", "is required")
    if "briefing" not in way:
        return way["to"], None
    text = way["briefing"]
    if pick in EVENTS:
        raise WorkflowError(f"{key}.briefing", f"an event takes no briefing: {pick} is not a pick an Agent makes")
    if not isinstance(text, str) or not text.strip():
        raise WorkflowError(f"{key}.briefing", "must be a non-empty string")
    if len(text) > MAX_PICK_BRIEFING:
        raise WorkflowError(f"{key}.briefing", f"is too long: {len(text)} characters, over the bound of "
                                               f"{MAX_PICK_BRIEFING} (MAX_PICK_BRIEFING)")
    return way["to"], text


def _one_briefing_a_pick(states: Mapping[str, StateDef]) -> None:
    """An Agent's Menu is fixed for a conversation and marks a pick's briefing on the pick (ADR-0062,
    ADR-0029): a pick offered by two states of one Agent's Turns has the same briefing in both, or none."""
    first: dict[tuple[str, str], StateDef] = {}
    for state in states.values():
        if state.turn is None:
            continue
        for pick in state.allowed:
            seen = first.setdefault((state.turn.agent, pick), state)
            if seen.briefings.get(pick) != state.briefings.get(pick):
                raise WorkflowError(f"states.{state.name}.on.{pick}",
                                    f"gives pick {pick} of agent {state.turn.agent} another briefing than "
                                    f"states.{seen.name} does: an Agent's Menu marks one briefing a pick, so "
                                    "give each state that offers it the same briefing, or none")
