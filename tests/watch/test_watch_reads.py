"""The watch's per-event reads of a Sandbox, rewritten for speed, answer as the plain readers did for any JSON
at all: `view` and `identify` against reference copies of their earlier, call-per-field forms, and the
de-duplication signature read straight from the object against the typed view's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jr2_actors.values.metadata import mapping, metadata, text
from jr2_actors.watch.identity import (
    RUN_ID_ANNOTATION,
    RUN_LABEL,
    WORKSPACE_ANNOTATION,
    Foreign,
    SandboxKey,
    identify,
    label_value,
)
from jr2_actors.watch.sandbox import Condition, ContainerWaiting, LastEnd, SandboxView, view
from jr2_actors.watch.signature import signature


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _maps(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def reference_view(obj: Mapping[str, Any]) -> SandboxView:
    meta = metadata(obj)
    status = mapping(obj.get("status"))
    harness = mapping(status.get("harness"))
    last = mapping(harness.get("lastTerminated"))
    conditions = tuple(Condition(text(c.get("type")), text(c.get("status")), text(c.get("reason")),
                                 text(c.get("message"))) for c in _maps(status.get("conditions")))
    waiting = tuple(ContainerWaiting(text(w.get("container")), text(w.get("reason")), text(w.get("message")))
                    for w in _maps(status.get("waiting")))
    scheduled = next((c for c in conditions if c.type == "Scheduled"), None)
    return SandboxView(
        name=text(meta.get("name")), uid=text(meta.get("uid")), resource_version=text(meta.get("resourceVersion")),
        phase=text(status.get("phase")), endpoint=text(status.get("endpoint")), pod_uid=text(status.get("podUID")),
        node=text(status.get("node")), restart_count=_int(harness.get("restartCount")) or 0,
        last_terminated=LastEnd(text(last.get("reason")), _int(last.get("exitCode")), text(last.get("message")),
                                text(last.get("finishedAt"))) if last else None,
        waiting=waiting, conditions=conditions,
        scheduling_reason=scheduled.reason if scheduled else "",
        waiting_reason=",".join(w.reason for w in waiting if w.reason))


def reference_identify(obj: Mapping[str, Any]) -> SandboxKey | Foreign:
    meta = metadata(obj)
    name, uid = text(meta.get("name")), text(meta.get("uid"))
    labels, annotations = mapping(meta.get("labels")), mapping(meta.get("annotations"))
    run_id, path = annotations.get(RUN_ID_ANNOTATION), annotations.get(WORKSPACE_ANNOTATION)
    label = labels.get(RUN_LABEL)
    if not isinstance(run_id, str) or not run_id:
        return Foreign(name, uid, f"no {RUN_ID_ANNOTATION} annotation")
    if not isinstance(path, str):
        return Foreign(name, uid, f"no {WORKSPACE_ANNOTATION} annotation")
    if not isinstance(label, str):
        return Foreign(name, uid, f"no {RUN_LABEL} label")
    if label != label_value(run_id):
        return Foreign(name, uid,
                       f"label {RUN_LABEL}={label!r} disagrees with annotation {RUN_ID_ANNOTATION}={run_id!r}")
    return SandboxKey(run_id, path)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=4),
                    st.sampled_from(["Scheduled", "r-1"]))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=3), inner, max_size=3)),
                    max_leaves=12)


CONDITION = st.fixed_dictionaries({}, optional={"type": st.one_of(st.sampled_from(["Scheduled", "Ready"]), JSON),
                                                "reason": JSON, "status": JSON, "message": JSON})
WAITING = st.fixed_dictionaries({}, optional={"container": JSON, "reason": JSON, "message": JSON})
STATUS = st.fixed_dictionaries({}, optional={
    "phase": JSON, "endpoint": JSON, "podUID": JSON, "node": JSON,
    "conditions": st.one_of(JSON, st.lists(st.one_of(CONDITION, JSON), max_size=4)),
    "waiting": st.one_of(JSON, st.lists(st.one_of(WAITING, JSON), max_size=3)),
    "harness": st.one_of(JSON, st.fixed_dictionaries({}, optional={
        "restartCount": JSON, "lastTerminated": st.one_of(JSON, st.fixed_dictionaries({}, optional={
            "reason": JSON, "exitCode": JSON, "message": JSON, "finishedAt": JSON}))}))})
METADATA = st.fixed_dictionaries({}, optional={
    "name": JSON, "uid": JSON, "resourceVersion": JSON,
    "labels": st.one_of(JSON, st.fixed_dictionaries({}, optional={RUN_LABEL: st.one_of(JSON, st.just("r-1"))})),
    "annotations": st.one_of(JSON, st.fixed_dictionaries({}, optional={
        RUN_ID_ANNOTATION: st.one_of(JSON, st.sampled_from(["r-1", "r 1", ""])), WORKSPACE_ANNOTATION: JSON}))})
SANDBOX = st.fixed_dictionaries({}, optional={"metadata": st.one_of(JSON, METADATA), "status": st.one_of(JSON, STATUS)})


@settings(max_examples=400)
@given(SANDBOX)
def test_view_reads_any_object_as_the_plain_reader_did(obj: dict[str, Any]) -> None:
    assert view(obj) == reference_view(obj)


@settings(max_examples=400)
@given(SANDBOX)
def test_the_signature_read_from_the_object_is_the_views_for_any_object(obj: dict[str, Any]) -> None:
    assert signature(obj) == view(obj).signature


@settings(max_examples=400)
@given(SANDBOX)
def test_identify_routes_or_refuses_any_object_as_the_plain_reader_did(obj: dict[str, Any]) -> None:
    assert identify(obj) == reference_identify(obj)


def test_a_routed_sandbox_and_each_refusal_are_both_reached() -> None:
    meta = {"name": "n", "uid": "u", "labels": {RUN_LABEL: "r-1"},
            "annotations": {RUN_ID_ANNOTATION: "r-1", WORKSPACE_ANNOTATION: "F-1"}}
    assert identify({"metadata": meta}) == SandboxKey("r-1", "F-1")
    assert identify({"metadata": {**meta, "labels": {RUN_LABEL: "r-2"}}}) == Foreign(
        "n", "u", f"label {RUN_LABEL}='r-2' disagrees with annotation {RUN_ID_ANNOTATION}='r-1'")
