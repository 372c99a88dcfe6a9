"""What a Turn's admission says (CONTRACTS §3): the Agent's definition, the message, the Allowed picks,
where it works, the notices it carries and whether its conversation is kept. Pure.
Next stage: the seat (`agent/seat_core.py`) sends it, and the Harness client (`harness/client.py`) posts it.
"""

from __future__ import annotations

from typing import Any

from jr2_actors.harness import briefing
from jr2_actors.run.notices import Notice
from jr2_actors.run.turn_record import Purpose
from jr2_actors.values.workflow import Workflow


def admission_body(workflow: Workflow, state_name: str, agent_name: str, purpose: Purpose, *, readmit: bool,
                   cwd: str | None, notices: tuple[Notice, ...], kept: bool) -> dict[str, Any]:
    agent = workflow.agents[agent_name]
    body: dict[str, Any] = {
        "definition": {"agent": agent.name, "instructions": agent.instructions, "access": agent.access,
                       "menu": workflow.menu_body(agent.name)},
        "message": message(workflow, state_name, purpose, readmit=readmit),
        "allowed": list(workflow.states[state_name].allowed),
    }
    if cwd is not None:
        body["cwd"] = cwd
    if notices:
        body["notices"] = [n.wire() for n in notices]
    if kept:
        body["kept"] = True
    return body


def message(workflow: Workflow, state_name: str, purpose: Purpose, *, readmit: bool = False) -> str:
    """ADR-0062: the re-admit text goes before the task only where something was cut (a restored
    Turn, or its refused re-admission); a Turn, a continued Turn, and a refused nudge or wake send the
    task alone, because nothing was cut."""
    state = workflow.states[state_name]
    assert state.turn is not None
    if purpose == "nudge":
        return briefing.NUDGE
    if purpose == "resume" or readmit:
        return briefing.readmit(state.turn.prompt)
    return state.turn.prompt
