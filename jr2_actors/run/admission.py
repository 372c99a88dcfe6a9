"""A Turn's admission (CONTRACTS §3), built from the workflow: the Agent's definition, the message (the
re-admit text where something was cut), the Allowed picks, where it works, its notices. Pure.
Next stage: the seat (`agent/seat_core.py`) sends it, and the Harness client (`harness/client.py`) posts it.
"""

from __future__ import annotations

from jr2_actors.harness import briefing
from jr2_actors.harness.admission import Admission, Definition, Notice
from jr2_actors.run.turn_record import Purpose
from jr2_actors.values.workflow import Workflow


def admission(workflow: Workflow, state_name: str, agent_name: str, purpose: Purpose, *, readmit: bool,
              cwd: str | None, notices: tuple[Notice, ...], kept: bool) -> Admission:
    agent = workflow.agents[agent_name]
    definition = Definition(agent.name, agent.instructions, agent.access, tuple(workflow.menu_body(agent.name)))
    return Admission(definition, message(workflow, state_name, purpose, readmit=readmit),
                     tuple(workflow.states[state_name].allowed), cwd, notices, kept)


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
