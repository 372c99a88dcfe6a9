"""Workflow files: the contract's example, strict keys named on error, references, hostile YAML."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from jr2_actors.values.workflow import WorkflowError, load_workflow, parse_workflow, read_document

EXAMPLE = resources.files("jr2_actors").joinpath("examples/fix-and-review.yaml").read_text()


def test_the_contract_example_parses_whole() -> None:
    wf = load_workflow(EXAMPLE)
    assert wf.name == "fix-and-review" and wf.start == "code"
    ws = wf.workspaces["F-1"]
    assert (ws.cpu, ws.memory, ws.branch, ws.repos[0].slot) == ("1", "2Gi", "feat/fix", "app")
    assert wf.agents["triage"].access == "none" and wf.agents["triage"].workspace is None
    code = wf.states["code"]
    assert code.holds == ("F-1",) and code.turn is not None and code.turn.agent == "coder"
    assert (code.after_seconds, code.after_to) == (3600.0, "failed")
    assert wf.states["done"].final == "done"


def test_menu_and_allowed_picks_leave_out_events() -> None:
    doc = load_workflow(EXAMPLE.replace("on: {finish: review, dispute: failed}",
                                        "on: {finish: review, dispute: failed, workspace.lost: failed}"))
    assert doc.states["code"].allowed == ("finish", "dispute")
    assert doc.menu("coder") == ("finish", "dispute")
    assert doc.menu("reviewer") == ("approve", "reject")


def test_json_is_the_same_document() -> None:
    assert parse_workflow(json.loads(json.dumps(read_document(EXAMPLE)))) == load_workflow(EXAMPLE)


def test_on_is_a_key_not_a_boolean() -> None:
    assert read_document("on: {finish: review}\nyes: no") == {"on": {"finish": "review"}, "yes": "no"}
    assert read_document("a: true\nb: False") == {"a": True, "b": False}


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (("start: code", "start: nowhere"), "start"),
        (("name: fix-and-review", "name: fix-and-review\ncolour: blue"), "colour"),
        (("    branch: feat/fix", "    branch: feat/fix\n    gpu: 1"), "workspaces.F-1.gpu"),
        (('size: {cpu: "1", memory: "2Gi"}', 'size: {cpu: "lots", memory: "2Gi"}'), "workspaces.F-1.size"),
        (("access: write}", "access: admin}"), "agents.coder.access"),
        (("workspace: F-1, access: read}", "workspace: F-9, access: read}"), "agents.reviewer.workspace"),
        (("triage:   {instructions: \"You route work.\", access: none}",
          "triage:   {instructions: \"You route work.\", access: none, workspace: F-1}"), "agents.triage.workspace"),
        (("on: {approve: done, reject: code}", "on: {approve: done, reject: limbo}"), "states.review.on.reject"),
        (("turn: {agent: reviewer,", "turn: {agent: nobody,"), "states.review.turn.agent"),
        (("after: {seconds: 3600, to: failed}", "after: {seconds: -1, to: failed}"), "states.code.after.seconds"),
        (("done: {final: done}", "done: {final: maybe}"), "states.done.final"),
        (("    holds: [F-1]\n    turn: {agent: reviewer", "    holds: []\n    turn: {agent: reviewer"),
         "states.review.holds"),
        (("on: {finish: review, dispute: failed}", "on: {Finish!: review}"), "states.code.on"),
    ],
)
def test_each_mistake_names_its_key(change: tuple[str, str], key: str) -> None:
    old, new = change
    assert old in EXAMPLE
    with pytest.raises(WorkflowError) as err:
        load_workflow(EXAMPLE.replace(old, new, 1))
    assert err.value.key == key
    assert key in str(err.value)


@pytest.mark.parametrize(
    "text",
    ["", "just text", "[1, 2]", "name: [unclosed", "a: &a [*a]", "[" * 50_000 + "]" * 50_000,
     "x: !!python/object/apply:os.system ['true']", "name: x\nstart: s\nstates: {}"],
)
def test_malformed_and_hostile_documents_are_clear_errors(text: str) -> None:
    with pytest.raises(WorkflowError):
        load_workflow(text)


def test_oversized_documents_are_refused_unparsed() -> None:
    with pytest.raises(WorkflowError, match="over"):
        load_workflow("#" * (300 * 1024))


def test_a_billion_laughs_is_refused_without_expanding() -> None:
    bomb = "a: &a ['x','x','x','x','x','x','x','x','x']\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
        for i in range(9)) + "name: x\nstart: s\nstates: {s: {final: done}}\n"
    with pytest.raises(WorkflowError) as err:
        load_workflow(bomb)
    assert err.value.key == "a"


@pytest.mark.parametrize(("change", "key", "words"), [
    (lambda d: d["agents"].update({7: d["agents"]["coder"]}), "agents", "7 is not a name"),
    (lambda d: d["states"].update({"": {"final": "done"}}), "states", "'' is not a name"),
    (lambda d: d["workspaces"].update({"w" * 64: d["workspaces"]["F-1"]}), "workspaces", "is not a name"),
    (lambda d: d["states"]["code"].update(holds=["F-1", 1]), "states.code.holds", "must be a list of Workspace paths"),
    (lambda d: d["workspaces"]["F-1"]["repos"][0].update(url=""), "workspaces.F-1.repos[0].url",
     "must be a non-empty string"),
    (lambda d: d["agents"]["coder"].update(instructions="x" * (64 * 1024 + 1)), "agents.coder.instructions",
     "is too long"),
    (lambda d: d["states"]["code"]["after"].update(seconds=True), "states.code.after.seconds", "positive number"),
    (lambda d: d.update(states={}), "states", "at least one state"),
    (lambda d: d["states"]["code"]["turn"].pop("prompt"), "states.code.turn.prompt", "is required"),
])
def test_each_shape_fault_names_its_key_in_our_words(change: Any, key: str, words: str) -> None:
    doc = read_document(EXAMPLE)
    assert isinstance(doc, dict)
    change(doc)
    with pytest.raises(WorkflowError) as err:
        parse_workflow(doc)
    assert err.value.key == key
    assert words in str(err.value)


@pytest.mark.parametrize(("pick", "says"), [
    ("give-up", "give_up is one"), ("Ship It", "ship_it is one"), ("2nd", "nor an event"), ("é", "nor an event"),
])
def test_a_bad_pick_name_is_refused_with_the_rule_and_a_name_that_would_do(pick: str, says: str) -> None:
    doc = json.loads(json.dumps(read_document(EXAMPLE)))
    doc["states"]["code"]["on"] = {pick: "review"}
    with pytest.raises(WorkflowError) as refused:
        parse_workflow(doc)
    text = str(refused.value)
    assert "states.code.on" in text and f"{pick!r} is not a pick name" in text and says in text, text
    assert "a lower-case letter, then lower-case letters, digits or '_', at most 63 characters" in text
    assert "nor an event (agent.fault or workspace.lost)" in text
    if "is one" in says:
        parse_workflow({**doc, "states": {**doc["states"], "code": {**doc["states"]["code"],
                                                                   "on": {says.split()[0]: "review"}}}})
