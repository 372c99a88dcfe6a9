"""What an authenticated workflow may cost (issue 18, docs/workflows.md "Bounds"): at most
MAX_WORKFLOW_STATES states and MAX_WORKFLOW_BYTES as the compact JSON the run's blob stores — refused by
the parser naming the bound, and by the API as a 400 (states) or a 413 (size)."""

from __future__ import annotations

import json

import pytest

from jr2_actors.values.workflow import (
    MAX_WORKFLOW_BYTES,
    MAX_WORKFLOW_STATES,
    WorkflowError,
    WorkflowTooLarge,
    load_workflow,
    parse_workflow,
)
from tests.support.workflows import chain


def test_a_workflow_at_the_state_bound_is_accepted() -> None:
    assert len(parse_workflow(chain(MAX_WORKFLOW_STATES)).states) == MAX_WORKFLOW_STATES


def test_a_workflow_over_the_state_bound_is_refused_naming_it() -> None:
    with pytest.raises(WorkflowError) as err:
        parse_workflow(chain(MAX_WORKFLOW_STATES + 1))
    assert err.value.key == "states" and not isinstance(err.value, WorkflowTooLarge)
    assert str(MAX_WORKFLOW_STATES) in str(err.value) and "MAX_WORKFLOW_STATES" in str(err.value)


def test_the_issue_s_9000_chained_states_are_refused() -> None:
    with pytest.raises(WorkflowError, match="MAX_WORKFLOW_STATES"):
        parse_workflow(chain(9000))


def test_a_document_over_the_size_bound_is_refused_naming_it() -> None:
    doc = chain(10, prompt="p" * 60_000)  # 10 states under the state bound, 540 KB of prompts
    assert len(json.dumps(doc)) > MAX_WORKFLOW_BYTES
    with pytest.raises(WorkflowTooLarge) as err:
        parse_workflow(doc)
    assert str(MAX_WORKFLOW_BYTES) in str(err.value) and "MAX_WORKFLOW_BYTES" in str(err.value)


def test_yaml_aliases_cannot_smuggle_a_blob_past_the_size_bound() -> None:
    """A small text whose one long prompt every state names: the blob holds it once per state."""
    states = "".join(f"  s{i}: {{holds: [W], turn: {{agent: worker, prompt: *p}}, on: {{next: s{i + 1}}}}}\n"
                     for i in range(20))
    text = (f"name: x\nworkspaces: {{W: {{size: {{cpu: '1', memory: 1Gi}}}}}}\n"
            f"agents: {{worker: {{instructions: &p '{'p' * 60_000}', workspace: W, access: write}}}}\n"
            f"start: s0\nstates:\n{states}  s20: {{final: done}}\n")
    assert len(text) < MAX_WORKFLOW_BYTES
    with pytest.raises(WorkflowTooLarge):
        load_workflow(text)


def test_a_file_over_the_size_bound_is_too_large_too() -> None:
    with pytest.raises(WorkflowTooLarge, match="MAX_WORKFLOW_BYTES"):
        load_workflow("#" * (MAX_WORKFLOW_BYTES + 1))
