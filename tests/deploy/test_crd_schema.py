"""The CRDs in manifests/crds: one source of truth, a real API server's rules, and the validator the fake
cluster uses (jr2_actors/fake/apiserver/schema.py)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

import jr2_actors
from jr2_actors.fake.apiserver.crd_rules import crd_problems
from jr2_actors.fake.apiserver.schema import (
    MAX_ERRORS,
    CrdError,
    CrdSchema,
    FieldError,
    load_crd,
    schema_for,
)
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node, Quota
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.workflow import RepoSlot, WorkspaceDef
from jr2_actors.workspace.manifest import WorkspaceSpec, sandbox_body
from tests.support.paths import FIXTURES, MANIFESTS
from tests.support.sandboxes import fixture

RECORDED = sorted(p.name for p in FIXTURES.glob("sandbox-*.json"))
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def sandboxes() -> CrdSchema:
    return schema_for("sandboxes")


def errors_by_field(schema: CrdSchema, obj: object) -> dict[str, str]:
    return {e.field: e.reason for e in schema.validate(obj)}


# -- one source of truth --------------------------------------------------------------------------------

@pytest.mark.parametrize("plural", ["sandboxes", "repos"])
def test_the_package_ships_the_manifests_own_crd_file(plural: str) -> None:
    name = f"{plural}.core.jr2.dev.yaml"
    packaged = resources.files("jr2_actors").joinpath("crds", name).read_text(encoding="utf-8")
    assert packaged == (MANIFESTS / "crds" / name).read_text(encoding="utf-8")
    assert (Path(jr2_actors.__file__).parent / "crds").resolve() == (MANIFESTS / "crds").resolve()


def test_the_printer_columns_read_phase_node_and_age() -> None:
    obj = fixture("sandbox-crashloop.json")
    columns = {c.name: c.value(obj) for c in schema_for("sandboxes").columns}
    assert columns == {"Phase": "Pending", "Node": "kind-worker", "Age": "2026-09-30T10:00:00Z"}
    assert {c.name: c.value({"status": "odd"}) for c in schema_for("repos").columns} == \
        {"Phase": None, "Node": None, "Age": None}


def test_an_unknown_crd_is_refused_by_name() -> None:
    with pytest.raises(KeyError, match="pods"):
        load_crd("pods")


# -- what a real API server accepts -------------------------------------------------------------------

@pytest.mark.parametrize("plural", ["sandboxes", "repos"])
def test_the_shipped_crds_are_ones_an_api_server_accepts(plural: str) -> None:
    crd = load_crd(plural)
    assert crd_problems(crd) == []
    version = crd["spec"]["versions"][0]
    assert crd["spec"]["scope"] == "Namespaced" and version["subresources"] == {"status": {}}
    columns = {c["name"]: (c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]}
    assert columns == {"Phase": ("string", ".status.phase"), "Node": ("string", ".status.node"),
                       "Age": ("date", ".metadata.creationTimestamp")}


def _root(crd: Obj) -> Obj:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def _spec(crd: Obj) -> Obj:
    return _root(crd)["properties"]["spec"]["properties"]  # type: ignore[no-any-return]


def _status(crd: Obj) -> Obj:
    return _root(crd)["properties"]["status"]["properties"]  # type: ignore[no-any-return]


BROKEN_CRDS: dict[str, tuple[Callable[[Obj], None], str]] = {
    "properties beside additionalProperties": (
        lambda c: _spec(c)["nodeSelector"].update(properties={"a": {"type": "string"}}), "mutual exclusive"),
    "a field without a type": (lambda c: _spec(c)["image"].pop("type"), "must not be empty"),
    "uniqueItems": (lambda c: _spec(c)["args"].update(uniqueItems=True), "uniqueItems"),
    "a $ref": (lambda c: _spec(c).update(ref={"$ref": "#/x"}), "$ref is not supported"),
    "items as a list": (lambda c: _spec(c)["args"].update(items=[{"type": "string"}]), "not an array"),
    "int-or-string with a type": (lambda c: _spec(c)["shmSize"].update(type="string"), "x-kubernetes-int-or-string"),
    "int-or-string that preserves unknown fields": (
        lambda c: _spec(c)["shmSize"].update({"x-kubernetes-preserve-unknown-fields": True}), "must be false"),
    "metadata with fields": (
        lambda c: _root(c)["properties"]["metadata"].update(properties={"labels": {"type": "object"}}),
        "name and generateName"),
    "a map list keyed by an optional field": (
        lambda c: _status(c)["conditions"]["items"].update(required=["status"]), "must be required"),
    "a map list without keys": (lambda c: _status(c)["conditions"].pop("x-kubernetes-list-map-keys"), "needs its keys"),
    "a type inside a junctor": (lambda c: _spec(c)["port"].update(anyOf=[{"type": "integer"}]), "structural"),
    "a junctor naming a field the schema does not": (
        lambda c: _status(c)["harness"].update(allOf=[{"properties": {"ghost": {"minLength": 1}}}]),
        "outside the junctor"),
    "a printer column of no known type": (
        lambda c: c["spec"]["versions"][0]["additionalPrinterColumns"][0].update(type="text"), "Unsupported"),
    "a printer column path that is not JSONPath": (
        lambda c: c["spec"]["versions"][0]["additionalPrinterColumns"][1].update(jsonPath="status.node"),
        "JSONPath"),
    "a name that is not plural.group": (lambda c: c["metadata"].update(name="sandbox.core.jr2.dev"), "metadata.name"),
    "two storage versions": (
        lambda c: c["spec"]["versions"].append({**copy.deepcopy(c["spec"]["versions"][0]), "name": "v1beta1"}),
        "exactly one"),
    "a misspelt keyword": (lambda c: _spec(c)["image"].update(maxLenght=3), "unknown field 'maxLenght'"),
    "additionalProperties at the root": (lambda c: _root(c).update(additionalProperties=True), "at the root"),
    "a pattern that does not compile": (lambda c: _spec(c)["idleTimeout"].update(pattern="(["), "pattern"),
    "an array without items": (lambda c: _spec(c)["args"].pop("items"), "items: Required"),
    "a list-map-keys without a map list": (
        lambda c: _spec(c)["args"].update({"x-kubernetes-list-map-keys": ["k"]}), "only with"),
    "no group dot": (lambda c: c["spec"].update(group="jr2"), "spec.group"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_CRDS))
def test_a_crd_an_api_server_would_refuse_is_named(case: str) -> None:
    crd = load_crd("sandboxes")
    mutate, words = BROKEN_CRDS[case]
    mutate(crd)
    problems = crd_problems(crd)
    assert any(words in p for p in problems), problems
    with pytest.raises(CrdError, match="is not one an API server accepts"):
        CrdSchema(crd)


@pytest.mark.parametrize("doc", [None, [], "crd", {"spec": []}, {"spec": {"versions": "v1"}},
                                 {"spec": {"names": "x", "versions": [None, 3]}}])
def test_a_crd_of_the_wrong_shape_is_refused_not_crashed_on(doc: object) -> None:
    assert crd_problems(doc)


# -- the recorded variants, and what the fake's peers write --------------------------------------------

@pytest.mark.parametrize("name", RECORDED)
def test_every_recorded_status_variant_is_accepted(sandboxes: CrdSchema, name: str) -> None:
    obj = fixture(name)
    assert sandboxes.validate(obj) == []
    assert sandboxes.prune(obj) == (obj, [])  # the schema knows every field the operator writes


def test_there_are_recorded_variants() -> None:
    assert len(RECORDED) >= 6


def test_the_sandbox_the_orchestrator_writes_is_valid(sandboxes: CrdSchema) -> None:
    definition = WorkspaceDef("F-1", cpu="1", memory="2Gi", branch="feat/x",
                              repos=(RepoSlot("app", "https://example.test/app.git", "main"),))
    spec = WorkspaceSpec(run_id="run-1", workflow="wf", definition=definition, image="jr2-sandbox:dev",
                         extra_env={"EXTRA": "1"})
    body = sandbox_body(spec, b"k" * 32, 1_790_000_000.0)
    assert sandboxes.validate(body) == []
    assert sandboxes.prune(body)[1] == []


@pytest.fixture
def operated() -> Iterator[tuple[FakeCluster, VirtualClock]]:
    clock = VirtualClock(wall=1_790_000_000.0)
    with FakeCluster(clock=clock, nodes=[Node("n1", 1000, 4 * 2**30)], start_seconds=1) as cluster:
        yield cluster, clock


def test_every_status_the_fake_operator_writes_is_valid(sandboxes: CrdSchema,
                                                        operated: tuple[FakeCluster, VirtualClock]) -> None:
    cluster, clock = operated
    client = cluster.client()
    seen: list[Obj] = []

    def snapshot() -> None:
        seen.extend(client.list(SANDBOX).items)

    small = {"spec": {"podResources": {"requests": {"cpu": "1", "memory": "1Gi"}}}}
    client.apply(SANDBOX, "ws-a", small)
    client.apply(SANDBOX, "ws-b", small)
    cluster.reconcile()
    snapshot()  # a placed, an Unschedulable
    clock.advance(1)
    cluster.reconcile()
    snapshot()  # Ready
    cluster.kill_harness("ws-a", reason="OOMKilled", message="Killed")
    cluster.crash_loop("ws-a", "listen EADDRINUSE")
    snapshot()  # a restart with lastTerminated, a crash loop
    cluster.evict("ws-a")
    snapshot()  # Lost
    cluster.set_quota(Quota(cpu_millis=0))
    client.apply(SANDBOX, "ws-c", small)
    cluster.reconcile()
    snapshot()  # QuotaExceeded
    phases = {(o["metadata"]["name"], (o.get("status") or {}).get("phase")) for o in seen}
    assert {("ws-a", "Ready"), ("ws-a", "Lost"), ("ws-b", "Pending"), ("ws-c", "Pending")} <= phases
    assert any((o.get("status") or {}).get("harness", {}).get("lastTerminated") for o in seen)
    for obj in seen:
        assert sandboxes.validate(obj) == [], obj["status"]
        assert sandboxes.prune(obj)[1] == []


# -- malformed objects are refused, naming the field ----------------------------------------------------

T = "2026-09-30T10:00:00Z"
MALFORMED: dict[str, tuple[Callable[[Obj], None], str, str]] = {
    "an unknown phase": (lambda o: o["status"].update(phase="Gone"), "status.phase", "FieldValueNotSupported"),
    "a restart count in words": (lambda o: o["status"]["harness"].update(restartCount="two"),
                                 "status.harness.restartCount", "FieldValueTypeInvalid"),
    "a negative restart count": (lambda o: o["status"]["harness"].update(restartCount=-1),
                                 "status.harness.restartCount", "FieldValueInvalid"),
    "a condition status that is not True/False/Unknown": (
        lambda o: o["status"]["conditions"][0].update(status="Yes"), "status.conditions[0].status",
        "FieldValueNotSupported"),
    "a transition time that is not RFC 3339": (
        lambda o: o["status"]["conditions"][0].update(lastTransitionTime="2026-09-30 10:00"),
        "status.conditions[0].lastTransitionTime", "FieldValueInvalid"),
    "a date that does not exist": (
        lambda o: o["status"]["conditions"][0].update(lastTransitionTime="2026-02-30T10:00:00Z"),
        "status.conditions[0].lastTransitionTime", "FieldValueInvalid"),
    "a condition without its type": (lambda o: o["status"]["conditions"][0].pop("type"),
                                     "status.conditions[0].type", "FieldValueRequired"),
    "two conditions of one type": (lambda o: o["status"]["conditions"].append(dict(o["status"]["conditions"][0])),
                                   "status.conditions[2]", "FieldValueDuplicate"),
    "a condition without its transition time": (lambda o: o["status"]["conditions"][1].pop("lastTransitionTime"),
                                                "status.conditions[1].lastTransitionTime", "FieldValueRequired"),
    "a Harness without its restart count": (lambda o: o["status"]["harness"].pop("restartCount"),
                                            "status.harness.restartCount", "FieldValueRequired"),
    "a last end without its exit code": (lambda o: o["status"]["harness"]["lastTerminated"].pop("exitCode"),
                                         "status.harness.lastTerminated.exitCode", "FieldValueRequired"),
    "a repo answer without its ask": (lambda o: o["status"].update(repos=[{"key": "app", "fetched": T}]),
                                      "status.repos[0].asked", "FieldValueRequired"),
    "a waiting entry without its container": (lambda o: o["status"]["waiting"][0].pop("container"),
                                              "status.waiting[0].container", "FieldValueRequired"),
    "conditions as a mapping": (lambda o: o["status"].update(conditions={"Ready": "True"}), "status.conditions",
                                "FieldValueTypeInvalid"),
    "an exit code as text": (lambda o: o["status"]["harness"]["lastTerminated"].update(exitCode="1"),
                             "status.harness.lastTerminated.exitCode", "FieldValueTypeInvalid"),
    "a quantity that is a boolean": (lambda o: o["spec"]["podResources"]["requests"].update(cpu=True),
                                     "spec.podResources.requests[cpu]", "FieldValueTypeInvalid"),
    "a port out of range": (lambda o: o["spec"].update(port=70000), "spec.port", "FieldValueInvalid"),
    "an idle timeout that is not a duration": (lambda o: o["spec"].update(idleTimeout="soon"), "spec.idleTimeout",
                                               "FieldValueInvalid"),
    "a repo without its url": (lambda o: o["spec"]["repos"][0].pop("url"), "spec.repos[0].url",
                               "FieldValueRequired"),
    "status as a string": (lambda o: o.update(status="Ready"), "status", "FieldValueTypeInvalid"),
    "a podUID as a number": (lambda o: o["status"].update(podUID=7), "status.podUID", "FieldValueTypeInvalid"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_sandbox_is_refused_naming_the_field(sandboxes: CrdSchema, case: str) -> None:
    obj = fixture("sandbox-crashloop.json")
    mutate, field, reason = MALFORMED[case]
    mutate(obj)
    assert errors_by_field(sandboxes, obj).get(field) == reason, sandboxes.validate(obj)


def test_the_refusal_is_a_422_invalid_status_as_a_real_server_gives(sandboxes: CrdSchema) -> None:
    obj = fixture("sandbox-crashloop.json")
    obj["status"]["phase"] = "Gone"
    obj["status"]["harness"]["restartCount"] = "two"
    errors = sandboxes.validate(obj)
    status = sandboxes.invalid_status("ws-x", errors)
    assert (status["kind"], status["code"], status["reason"], status["status"]) == ("Status", 422, "Invalid",
                                                                                   "Failure")
    assert status["message"].startswith('Sandbox.core.jr2.dev "ws-x" is invalid: [')
    assert 'status.phase: Unsupported value: "Gone": supported values: "Pending", "Ready", "Terminating", "Lost"' \
        in status["message"]
    assert {c["field"] for c in status["details"]["causes"]} == {"status.phase", "status.harness.restartCount"}
    single = sandboxes.invalid_status("ws-x", errors[:1])
    assert "[" not in single["message"].split("is invalid: ")[1][:1]


def test_unknown_fields_are_pruned_and_named_not_refused(sandboxes: CrdSchema) -> None:
    obj = fixture("sandbox-crashloop.json")
    obj["status"]["surprise"] = {"deep": 1}
    obj["spec"]["repos"][0]["branch"] = "main"
    obj["spec"]["readinessProbe"] = {"httpGet": {"path": "/healthz", "port": 8080}, "anything": True}
    obj["metadata"]["whatever"] = 1  # metadata is the API server's own, never pruned here
    assert sandboxes.validate(obj) == []
    pruned, dropped = sandboxes.prune(obj)
    assert sorted(dropped) == ["spec.repos[0].branch", "status.surprise"]
    assert "surprise" not in pruned["status"] and "branch" not in pruned["spec"]["repos"][0]
    assert pruned["spec"]["readinessProbe"]["anything"] is True  # a Probe keeps its own fields
    assert pruned["metadata"]["whatever"] == 1
    assert obj["status"]["surprise"] == {"deep": 1}  # the input is not changed


# -- hostile input ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("obj", [None, [], "Sandbox", 3, True])
def test_an_object_that_is_not_a_mapping_is_one_error(sandboxes: CrdSchema, obj: object) -> None:
    (error,) = sandboxes.validate(obj)
    assert error.reason == "FieldValueTypeInvalid" and "object" in error.detail


def test_a_flood_of_bad_items_is_answered_with_a_bounded_list(sandboxes: CrdSchema) -> None:
    obj = fixture("sandbox-crashloop.json")
    obj["status"]["conditions"] = [{"type": f"T{i}", "status": "Maybe"} for i in range(5000)]
    errors = sandboxes.validate(obj)
    assert len(errors) <= MAX_ERRORS
    assert any(e.reason == "FieldValueNotSupported" for e in errors)


def test_too_many_items_and_too_long_words_are_named(sandboxes: CrdSchema) -> None:
    obj = fixture("sandbox-crashloop.json")
    obj["status"]["conditions"] = [{"type": f"T{i}", "status": "True"} for i in range(17)]
    obj["status"]["harness"]["lastTerminated"]["message"] = "x" * 40_000
    found = errors_by_field(sandboxes, obj)
    assert found["status.conditions"] == "FieldValueTooMany"
    assert found["status.harness.lastTerminated.message"] == "FieldValueTooLong"


def test_a_huge_bad_value_is_quoted_short(sandboxes: CrdSchema) -> None:
    obj = fixture("sandbox-crashloop.json")
    obj["status"]["phase"] = "P" * 1_000_000
    (error,) = sandboxes.validate(obj)
    assert error.field == "status.phase" and len(error.message) < 400


def test_deep_nesting_where_the_schema_keeps_anything_is_not_walked(sandboxes: CrdSchema) -> None:
    obj = fixture("sandbox-crashloop.json")
    deep: Obj = {}
    node = deep
    for _ in range(5000):  # deeper than Python's recursion limit
        node["x"] = {}
        node = node["x"]
    obj["spec"]["readinessProbe"] = deep
    assert sandboxes.validate(obj) == []
    assert sandboxes.prune(obj)[1] == []


def test_odd_keys_and_types_in_a_map_list_do_not_crash_the_key_check(sandboxes: CrdSchema) -> None:
    obj = fixture("sandbox-crashloop.json")
    obj["status"]["conditions"] = [{"type": ["a"], "status": "True"}, {"type": ["a"], "status": "True"}, 7, None]
    fields = errors_by_field(sandboxes, obj)
    assert fields["status.conditions[0].type"] == "FieldValueTypeInvalid"
    assert fields["status.conditions[1]"] == "FieldValueDuplicate"
    assert fields["status.conditions[2]"] == "FieldValueTypeInvalid"


def test_an_integral_number_is_an_integer_as_kube_apiserver_reads_json(sandboxes: CrdSchema) -> None:
    obj = fixture("sandbox-crashloop.json")
    obj["status"]["harness"]["restartCount"] = 2.0  # JSON `2.0`: an integer to Go's decoder, and here
    assert sandboxes.validate(obj) == []
    obj["status"]["harness"]["restartCount"] = 2.5
    assert errors_by_field(sandboxes, obj) == {"status.harness.restartCount": "FieldValueTypeInvalid"}


def test_a_field_error_words_itself_as_kubernetes_does() -> None:
    error = FieldError("status.phase", "FieldValueRequired", "Required value")
    assert error.message == "status.phase: Required value"
    # The cause names the field apart; its message is the body alone (a real v1.37 server's 422).
    assert error.cause() == {"reason": "FieldValueRequired", "message": "Required value", "field": "status.phase"}


def test_a_repo_keeps_whatever_the_operator_writes() -> None:
    repos = schema_for("repos")
    obj = {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Repo", "metadata": {"name": "app"},
           "spec": {"url": "https://example.test/app.git"}, "status": {"phase": "Fetched", "node": "n1"}}
    assert repos.validate(obj) == []
    assert repos.prune(obj) == (obj, [])
    assert errors_by_field(repos, {**obj, "spec": "x"}) == {"spec": "FieldValueTypeInvalid"}


def test_the_crd_files_parse_as_yaml_documents() -> None:
    for path in sorted((MANIFESTS / "crds").glob("*.core.jr2.dev.yaml")):
        docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        assert len(docs) == 1 and docs[0]["kind"] == "CustomResourceDefinition", path
        json.dumps(docs[0])  # JSON-shaped: what the API server receives
