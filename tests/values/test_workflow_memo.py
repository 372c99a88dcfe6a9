"""The workflows an orchestrator parsed: one check a distinct document, the same answers as parse_workflow."""

from __future__ import annotations

import copy
import datetime
import json
import threading
from importlib import resources
from typing import Any

import pytest

from jr2_actors.values import workflow_memo
from jr2_actors.values.workflow import WorkflowError, parse_workflow, read_document
from jr2_actors.values.workflow_memo import WorkflowMemo

EXAMPLE = resources.files("jr2_actors").joinpath("examples/fix-and-review.yaml").read_text()


def example() -> dict[str, Any]:
    doc = read_document(EXAMPLE)
    assert isinstance(doc, dict)
    return doc


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every document the memo handed to parse_workflow."""
    seen: list[object] = []

    def counted(doc: object, **kw: Any) -> Any:
        seen.append(doc)
        return parse_workflow(doc, **kw)

    monkeypatch.setattr(workflow_memo, "parse_workflow", counted)
    return seen


def test_the_same_document_is_checked_once_and_answered_with_the_same_workflow(checks: list[object]) -> None:
    memo = WorkflowMemo()
    first = memo.parse(example())
    again = memo.parse(example())  # another request's copy, equal to the first
    assert again is first and first == parse_workflow(example())
    assert len(checks) == 1 and (memo.hits, memo.misses) == (1, 1)


def test_a_faulty_document_raises_each_time_and_is_never_kept(checks: list[object]) -> None:
    memo = WorkflowMemo()
    doc = example()
    doc["start"] = "nowhere"
    with pytest.raises(WorkflowError) as direct:
        parse_workflow(doc)
    for _ in range(2):
        with pytest.raises(WorkflowError) as got:
            memo.parse(doc)
        assert (got.value.key, str(got.value)) == (direct.value.key, str(direct.value))
    assert len(checks) == 2 and len(memo) == 0


def test_a_key_that_is_not_a_string_is_checked_not_taken_for_the_kept_string_key(checks: list[object]) -> None:
    memo = WorkflowMemo()
    good = example()
    good["states"]["review"]["on"] = {"approve": "done", "reject": "code"}
    memo.parse(good)
    odd = copy.deepcopy(good)
    odd["states"]["review"]["on"] = {"approve": "done", 1: "code"}
    renamed = copy.deepcopy(good)
    renamed["states"]["review"]["on"] = {"approve": "done", "1": "code"}
    assert json.dumps(odd, separators=(",", ":")) == json.dumps(renamed, separators=(",", ":"))
    with pytest.raises(WorkflowError, match="1 is not a pick name"):
        memo.parse(odd)  # the same JSON text as a string key "1" would have: never served from the memo
    assert len(checks) == 2


def test_numbers_of_another_type_are_other_documents(checks: list[object]) -> None:
    memo = WorkflowMemo()
    whole, point = example(), example()
    point["states"]["code"]["after"]["seconds"] = 3600.0
    assert whole == point  # equal in Python, other texts in JSON
    memo.parse(whole)
    memo.parse(point)
    assert len(checks) == 2 and len(memo) == 2


def test_the_kept_document_is_a_copy_the_callers_later_change_does_not_reach(checks: list[object]) -> None:
    memo = WorkflowMemo()
    doc = example()
    first = memo.parse(doc)
    doc["name"] = "renamed"  # the caller's own document changes after the parse
    assert memo.parse(doc).name == "renamed"
    assert memo.parse(example()) is first
    assert len(checks) == 2


def test_a_document_json_cannot_hold_is_parsed_as_parse_workflow_says_and_never_kept(checks: list[object]) -> None:
    memo = WorkflowMemo()
    doc = example()
    doc["workspaces"]["F-1"]["branch"] = datetime.date(2026, 12, 5)  # a YAML date
    with pytest.raises(WorkflowError) as got:
        memo.parse(doc)
    with pytest.raises(WorkflowError) as direct:
        parse_workflow(doc)
    assert str(got.value) == str(direct.value) and len(memo) == 0


def test_the_memo_is_bounded_by_entries_and_by_bytes_and_lets_the_oldest_go(checks: list[object]) -> None:
    def named(i: int) -> dict[str, Any]:
        doc = example()
        doc["name"] = f"w{i}"
        return doc

    memo = WorkflowMemo(entries=3)
    for i in range(5):
        memo.parse(named(i))
    assert len(memo) == 3
    memo.parse(named(4))
    memo.parse(named(0))  # let go: checked again
    assert len(checks) == 6

    size = len(json.dumps(named(0), separators=(",", ":")))
    small = WorkflowMemo(max_bytes=2 * size)
    for i in range(3):
        small.parse(named(i))
    assert len(small) == 2
    tiny = WorkflowMemo(max_bytes=size - 1)
    tiny.parse(named(0))
    assert len(tiny) == 0  # a document over the whole bound is never kept


def test_threads_parsing_at_once_each_get_their_own_documents_workflow() -> None:
    memo = WorkflowMemo(entries=4)
    names = [f"w{i % 6}" for i in range(120)]  # more distinct documents than entries: evictions meanwhile
    got: list[tuple[str, str]] = []
    lock = threading.Lock()

    def work(chunk: list[str]) -> None:
        for name in chunk:
            doc = example()
            doc["name"] = name
            parsed = memo.parse(doc)
            with lock:
                got.append((name, parsed.name))

    threads = [threading.Thread(target=work, args=(names[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(got) == sorted((n, n) for n in names)
    assert len(memo) <= 4
