"""The Briefing: jr2's own words to the model (ADR-0062) — the Harness's, so they live here and nowhere else.

The fake Harness renders every admission with it; a real Harness can use it as the reference (Harness
conformance checks the words, ADR-0027). Pure: data in, text out.

Theory of operation. The Orchestrator sends data (CONTRACTS.md §3: the definition, the Frame's prompt,
the Allowed picks, typed notices); the Harness writes every word, in two parts placed by how often they
change, so the Briefing never breaks the provider's prompt cache:

- **The standing part** follows the Agent's `instructions` in the system prompt, in its own
  `<jr2-seat>` section, and is byte-identical on every Turn of a seat: no timestamps, no counters, no
  Menu names. It says how the Agent acts on the workflow (ADR-0062's one statement), the Sandbox's CPUs
  and Size — which a program counting the machine's CPUs cannot learn (ADR-0060) — or, for a Menu-only
  Agent, that it has no Working tools.
- **The Turn part** follows the Frame's prompt, in a `<jr2-turn>` block, because a model obeys what it
  read last: the working directory, the notices (each said once, however many equal ones came), a
  pick's briefing for each Allowed pick that has one, and the Allowed picks, last.
- **The restatement** is appended when something other than the Agent's own pick changes the Allowed
  picks inside a Turn: a `<jr2-turn>` block of its own, never a rewrite of the first, with no notice
  and with the briefing of each pick it opens.

Every notice form of ADR-0062 is worded by `notice_text`: a memory kill read on a stream (naming the
Turn's Agent), from the pod's list (no Agent, peak and limit), from the Sandbox's last end (a kernel
kill: the limit alone), with no sizes when a size was not valid — always the whole Sandbox, always in
the past tense; "this conversation is new"; and a pick's answer that never reached its call. Input that
is not the contract's shape is never a crash and never a silent drop: it is said in `problems`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.harness.memory_kills import guard_sizes
from jr2_actors.values.constants import MAX_PICK_BRIEFING
from jr2_actors.values.quantity import format_size

SEAT_OPEN, SEAT_CLOSE = "<jr2-seat>", "</jr2-seat>"
TURN_OPEN, TURN_CLOSE = "<jr2-turn>", "</jr2-turn>"

# ADR-0062: the one standing statement on how the Agent acts on the workflow, true whether a pick ends
# the Turn or keeps it open (ADR-0024). Its last sentence holds because a wake asks again (ADR-0016).
ACTS_ON_THE_WORKFLOW = (
    "You act on the workflow by picking from your Menu: a call to one of the workflow's tools that the newest "
    "\"Allowed now\" lists. Each pick's answer says if your Turn is over. If it is over, stop and call no other "
    "tool. If it is not, continue. If nothing is allowed, stop: the workflow prompts you again when something is."
)
NO_WORKING_TOOLS = ("You have no Working tools: no shell, no files and no Sandbox. "
                    "The picks of your Menu are all you can call.")
CONVERSATION_NEW = "This conversation is new; earlier context is gone."
STATE_CHANGED = "The workflow's state changed since you last read the Allowed picks."
NO_REPLY = "No reply came back for it."
MOVED_NOTHING_RAN = "It moved the workflow, and nothing ran."  # a guard straight back's receipt (ADR-0062)
# The no-signal nudge (ADR-0016): a re-prompt within the Turn, never a notice.
NUDGE = ("Your Turn ended without a pick. If something is allowed now, pick what the workflow should do next; "
         "if nothing is, stop.")
READMIT = "Your Turn was interrupted and is admitted again. Your task follows."

MAX_NAME = 128  # an agent's, a pick's or a Gate's name said in the Briefing
MAX_WITH = 2000  # characters of an answer's payload said; the rest is cut and said in `problems`
MAX_REASON = 64

Access = Literal["write", "read", "none"]


@dataclass(frozen=True)
class Seat:
    """What the standing part says, all of which the Harness holds without a wire: the definition's
    `workspace` access, and the Sandbox's limits (cgroup and Downward API env). A limit the Harness does
    not know is left unsaid, never guessed."""

    access: Access
    cpu_millis: int | None = None
    memory_bytes: int | None = None


@dataclass(frozen=True)
class Briefing:
    """One admission as the model sees it: the system prompt and the newest message."""

    system: str
    message: str
    problems: tuple[str, ...] = field(default=())

    def as_record(self) -> dict[str, Any]:
        return {"system": self.system, "message": self.message, "problems": list(self.problems)}


# -- the standing part -------------------------------------------------------------------------------

def standing(seat: Seat) -> str:
    lines = [ACTS_ON_THE_WORKFLOW]
    if seat.access == "none":
        lines.append(NO_WORKING_TOOLS)
    elif seat.cpu_millis is not None and seat.memory_bytes is not None:
        cpus, memory = _cpus(seat.cpu_millis), format_size(seat.memory_bytes)
        lines.append(f"Your Sandbox has {cpus} and {memory} of memory, shared by every process in it. "
                     f"A program that counts the machine's CPUs (Node's os.cpus(), nproc) sees the node's, "
                     f"not the Sandbox's: size parallel work to {cpus}. Past {memory}, every process in the "
                     f"Sandbox is killed.")
    return "\n".join([SEAT_OPEN, *lines, SEAT_CLOSE])


def system_prompt(instructions: str, seat: Seat) -> str:
    """The Agent's `instructions` (its identity, ADR-0018), then the standing part."""
    return f"{instructions}\n\n{standing(seat)}" if instructions else standing(seat)


# -- the Turn part -----------------------------------------------------------------------------------

def turn_part(allowed: Sequence[str], *, cwd: str | None = None, notices: Sequence[object] = (),
              pick_briefings: Mapping[str, str] | None = None) -> tuple[str, tuple[str, ...]]:
    """The `<jr2-turn>` block and the problems met wording it. The Allowed picks come last."""
    problems: list[str] = []
    lines: list[str] = []
    if cwd:
        lines.append(f"Your working directory is {_one_line(cwd, 4096)}.")
    said: set[str] = set()
    for i, notice in enumerate(notices):
        text, problem = notice_text(notice)
        if problem:
            problems.append(f"notice {i}: {problem}")
        if text is not None and text not in said:  # ADR-0062: two equal notices are said once
            said.add(text)
            lines.append(text)
    lines.extend(_pick_briefings(allowed, pick_briefings or {}))
    lines.append(allowed_now(allowed))
    return "\n".join([TURN_OPEN, *lines, TURN_CLOSE]), tuple(problems)


def user_message(prompt: str, turn: str) -> str:
    """The Frame's prompt first — the author's task reads first, as it would with no jr2 — then the Turn part."""
    return f"{prompt}\n\n{turn}" if prompt else turn


def restatement(before: Sequence[str], allowed: Sequence[str], pick_briefings: Mapping[str, str] | None = None) -> str:
    """Appended at the next step boundary when the Allowed picks changed inside a Turn (ADR-0029). It
    carries no notice, and the briefing only of a pick it opens."""
    opened = [p for p in allowed if p not in set(before)]
    briefings = {p: b for p, b in (pick_briefings or {}).items() if p in opened}
    return "\n".join([TURN_OPEN, STATE_CHANGED, *_pick_briefings(allowed, briefings), allowed_now(allowed),
                      TURN_CLOSE])


def readmit(task: str) -> str:
    """The message of a Turn admitted again (after an Orchestrator restart, or a conversation the Harness no
    longer holds): the re-admit text, then the task (ADR-0062: the task rides the ledgered admission)."""
    return f"{READMIT}\n\n{task}"


def allowed_now(allowed: Sequence[str]) -> str:
    return f"Allowed now: {', '.join(_code(p) for p in allowed) or 'nothing'}."


def not_allowed(pick: str, allowed: Sequence[str]) -> str:
    """The answer to a pick the Turn does not allow: it changes nothing, and says what is allowed."""
    return f"{_code(pick)} is not allowed now. {allowed_now(allowed)}"


# -- notices -----------------------------------------------------------------------------------------

def notice_text(notice: object) -> tuple[str | None, str | None]:
    """A notice's words, and a problem with its shape. A notice whose kind is unknown says nothing; one
    whose details are not the contract's still says what it can (a kill is never lost)."""
    if not isinstance(notice, Mapping):
        return None, "not an object: left out"
    kind = notice.get("kind")
    if kind == "memory-limit":
        return _memory_limit(notice)
    if kind == "conversation-new":
        reason = notice.get("reason")
        ok = isinstance(reason, str) and 0 < len(reason) <= MAX_REASON
        return CONVERSATION_NEW, None if ok else "conversation-new without a reason: said anyway"
    if kind == "pick-answer":
        return _pick_answer(notice)
    return None, f"unknown kind {_repr(kind)}: left out"


def _memory_limit(notice: Mapping[str, Any]) -> tuple[str, str | None]:
    problems: list[str] = []
    scope = notice.get("scope")
    if scope not in ("conversation", "workspace"):
        problems.append(f"scope {_repr(scope)} is not conversation or workspace")
    agent, peak, limit = notice.get("agent"), notice.get("peak"), notice.get("limit")
    peak, limit, bad_sizes = guard_sizes(peak, limit)  # ADR-0062: no sizes when a size was not valid
    problems.extend(bad_sizes)
    sizes = ""
    if limit is not None:
        sizes = f" of {limit}" if peak is None else f" (peak {peak} of {limit})"  # a kernel kill has no peak
    during = ""
    if isinstance(agent, str) and 0 < len(agent) <= MAX_NAME:
        during = f" during {_code(agent)}'s Turn"  # only a kill read on a live stream names the Turn
    elif agent is not None:
        problems.append(f"agent {_repr(agent)} is not an agent's name")
    text = (f"The Sandbox's processes were killed at its memory limit{sizes}{during}; /dev/shm was cleared. "
            "Anything that was running in the Sandbox at that time is gone.")
    return text, "; ".join(problems) or None


def _pick_answer(notice: Mapping[str, Any]) -> tuple[str | None, str | None]:
    pick = notice.get("pick")
    if not isinstance(pick, str) or not pick:
        return None, "pick-answer without a pick: left out"
    problems: list[str] = []
    if not isinstance(notice.get("cut"), bool):
        problems.append("cut is not true or false")
    stopped = notice.get("stopped", False)
    if not isinstance(stopped, bool):
        problems.append("stopped is not true or false")
        stopped = False
    if stopped:
        lead = (f"Your pick {_code(pick)} did not finish: the workflow left the state that asked for your last "
                "turn while it ran, and that stopped it.")
    else:
        lead = f"The workflow left the state of your last turn while your pick {_code(pick)} was outstanding."
    words, problem = answer_words(notice.get("answer"))
    if problem:
        problems.append(problem)
    return f"{lead} {words}", "; ".join(problems) or None


def answer_words(answer: object) -> tuple[str, str | None]:
    """A pick's answer as the Harness says it, in a receipt and in a notice alike (ADR-0062):
    `{"reply", "kind"?, "name"?, "with"?}` — the last reply since the pick, from a party (a Gate) or a
    child, with its payload — or none at all: "No reply came back for it.\""""
    if answer is None:
        return NO_REPLY, None
    if not isinstance(answer, Mapping) or not isinstance(answer.get("reply"), str) or not answer["reply"]:
        return NO_REPLY, f"answer {_repr(answer)} has no reply: said as none"
    words = f"Its answer: {_code(answer['reply'])}"
    kind, name = answer.get("kind"), answer.get("name")
    problem = None
    if isinstance(kind, str) and kind and isinstance(name, str) and name:
        words += f" from {_one_line(kind, MAX_NAME)} {_code(name)}"
    if "with" in answer:
        try:
            payload = json.dumps(answer["with"], ensure_ascii=False, separators=(", ", ": "), sort_keys=True)
        except (ValueError, TypeError, RecursionError):
            payload, problem = "", "the answer's payload is not JSON that can be written: left out"
        if len(payload) > MAX_WITH:
            payload, problem = payload[:MAX_WITH] + "…", f"the answer's payload is cut at {MAX_WITH} characters"
        if payload:
            words += f", with {_inert(payload)}"
    return words + ".", problem


# -- one admission -----------------------------------------------------------------------------------

def render_admission(body: object, *, cpu_millis: int | None = None, memory_bytes: int | None = None) -> Briefing:
    """What the model sees for one admission body (CONTRACTS.md §3); never raises on any JSON."""
    doc: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    problems: list[str] = [] if isinstance(body, Mapping) else ["the body is not an object"]
    raw_definition = doc.get("definition")
    definition: Mapping[str, Any] = raw_definition if isinstance(raw_definition, Mapping) else {}
    raw_access = definition.get("access")
    access: Access = "none"
    if raw_access in ("write", "read"):
        access = "write" if raw_access == "write" else "read"
    elif raw_access != "none":
        problems.append(f"definition.access {_repr(raw_access)} is not write, read or none: taken as none")
    instructions = definition.get("instructions")
    prompt = doc.get("message")
    for key in ("allowed", "notices"):
        if key in doc and not isinstance(doc[key], list):
            problems.append(f"{key} is not a list: taken as empty")
    if not isinstance(definition.get("menu", []), list):
        problems.append("definition.menu is not a list: no pick briefings")
    allowed = [p for p in _list(doc.get("allowed")) if isinstance(p, str)]
    if len(allowed) != len(_list(doc.get("allowed"))):
        problems.append("an Allowed pick that is not a name: left out")
    cwd = doc.get("cwd")
    turn, notice_problems = turn_part(allowed, cwd=cwd if isinstance(cwd, str) else None,
                                      notices=_list(doc.get("notices")),
                                      pick_briefings=_menu_briefings(definition.get("menu"), problems))
    problems.extend(notice_problems)
    seat = Seat(access, cpu_millis, memory_bytes)
    return Briefing(system_prompt(instructions if isinstance(instructions, str) else "", seat),
                    user_message(prompt if isinstance(prompt, str) else "", turn), tuple(problems))


def _menu_briefings(menu: object, problems: list[str]) -> dict[str, str]:
    """A pick's briefing, as the Orchestrator's surface marks it on the Menu (`{"pick", "briefing"}`)."""
    out: dict[str, str] = {}
    for entry in _list(menu):
        if isinstance(entry, Mapping) and isinstance(entry.get("pick"), str):
            text = entry.get("briefing")
            if isinstance(text, str) and text.strip():
                out[entry["pick"]] = text
            elif text is not None:
                problems.append(f"the briefing of pick {_repr(entry['pick'])} is not text: left out")
        elif not isinstance(entry, str):
            problems.append(f"a Menu entry {_repr(entry)} is neither a name nor {{pick, briefing}}")
    return out


def _pick_briefings(allowed: Sequence[str], briefings: Mapping[str, str]) -> list[str]:
    # ADR-0062: said only on a Turn that may make that pick, in the order the picks are allowed.
    return [f"{_code(p)}: {_inert(briefings[p].strip()[:MAX_PICK_BRIEFING])}" for p in allowed if p in briefings]


def _cpus(millis: int) -> str:
    count = f"{millis // 1000}" if millis % 1000 == 0 else f"{millis / 1000:g}"
    return f"{count} CPU" if millis == 1000 else f"{count} CPUs"


def _code(name: str) -> str:
    """A name as code; backticks and line breaks in it cannot break out of the span."""
    return "`" + _one_line(name, MAX_NAME).replace("`", "'") + "`"


def _one_line(text: str, cap: int) -> str:
    return _inert(" ".join(text.split())[:cap])


def _inert(text: str) -> str:
    """Text inside a Briefing block cannot open or close one: its delimiters are written as brackets."""
    for tag in (SEAT_OPEN, SEAT_CLOSE, TURN_OPEN, TURN_CLOSE):
        text = text.replace(tag, f"[{tag[1:-1]}]")
    return text


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _repr(value: object) -> str:
    return repr(value)[:60]
