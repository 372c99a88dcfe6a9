"""Identity: label values are lossy and valid; annotations decide; names are DNS-1123 and bounded."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jr2_actors.watch import identity
from jr2_actors.watch.identity import (
    Foreign,
    SandboxKey,
    annotations_for,
    identify,
    label_value,
    labels_for,
    sandbox_name,
)
from tests.support.sandboxes import sandbox

LABEL = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3f2a9c1b-6b1d-4e0a-9c43-8c1a0e6f2d10", "3f2a9c1b-6b1d-4e0a-9c43-8c1a0e6f2d10"), ("a@@b", "a-b"),
     ("a / b", "a-b"), ("--x--", "x"), ("", "x"), ("@@@", "x"), ("fix-and-review", "fix-and-review"),
     ("ünïcode", "n-code"), ("a.b_c", "a.b_c")],
)
def test_label_value_sanitizes(text: str, expected: str) -> None:
    assert label_value(text) == expected


@pytest.mark.parametrize("text", ["x" * 85, "a-" * 40, "a" * 62 + "-b", "Z" * 200, "a" * 63 + "@"])
def test_every_label_value_is_valid_and_bounded(text: str) -> None:
    value = label_value(text)
    assert len(value) <= 63
    assert LABEL.match(value)
    assert value[-1].isalnum() and value[0].isalnum()


@given(st.one_of(st.text(), st.text(alphabet="ab-._@Z9", max_size=70)))
def test_the_fast_path_for_a_plain_label_value_answers_as_the_full_sanitizer(text: str) -> None:
    # Issue 18: text that already is a label value is returned without the four regex passes.
    assert label_value(text) == identity._label_value(text)


def test_colliding_labels_stay_distinct_by_annotation() -> None:
    one, two = "r" * 63 + "-1", "r" * 63 + "-2"
    assert label_value(one) == label_value(two)
    a = sandbox(one)
    b = sandbox(two)
    assert identify(a) == SandboxKey(one, "F-1")
    assert identify(b) == SandboxKey(two, "F-1")
    assert sandbox_name(one, "F-1") != sandbox_name(two, "F-1")


def test_annotations_round_trip_the_authoritative_fields() -> None:
    assert annotations_for("run/1", "F-1/sub") == {"jr2.dev/run-id": "run/1", "jr2.dev/workspace": "F-1/sub"}
    assert labels_for("run/1", "my wf") == {"jr2.dev/run": "run-1", "jr2.dev/workflow": "my-wf"}


@pytest.mark.parametrize(("run", "workspace"), [("3f2a9c1b-6b1d-4e0a-9c43-8c1a0e6f2d10", "F-1"),
                                                ("R" * 90, "W" * 90), ("", ""), ("!!", "..")])
def test_sandbox_names_are_dns1123_and_bounded(run: str, workspace: str) -> None:
    name = sandbox_name(run, workspace)
    assert len(name) <= 63
    assert DNS1123.match(name), name
    assert name.startswith("ws-")


def test_colliding_workspace_slugs_get_distinct_names() -> None:
    assert sandbox_name("run", "F_1") != sandbox_name("run", "f-1")


@pytest.mark.parametrize(
    ("mutate", "why"),
    [(lambda m: m["annotations"].pop("jr2.dev/run-id"), "jr2.dev/run-id"),
     (lambda m: m["annotations"].pop("jr2.dev/workspace"), "jr2.dev/workspace"),
     (lambda m: m["labels"].pop("jr2.dev/run"), "no jr2.dev/run label"),
     (lambda m: m["labels"].update({"jr2.dev/run": "other"}), "disagrees"),
     (lambda m: m.update({"annotations": "not a map"}), "jr2.dev/run-id")],
)
def test_missing_or_disagreeing_identity_is_foreign_by_name(mutate: object, why: str) -> None:
    obj = sandbox("run-1")
    mutate(obj["metadata"])  # type: ignore[operator]
    result = identify(obj)
    assert isinstance(result, Foreign)
    assert why in result.why
    assert result.name == obj["metadata"]["name"]


def test_garbage_object_is_foreign_not_a_crash() -> None:
    assert isinstance(identify({"metadata": []}), Foreign)
    assert isinstance(identify({}), Foreign)
