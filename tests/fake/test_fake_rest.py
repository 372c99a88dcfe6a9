"""The API server's routes without HTTP: `serve(request, state, now)`; and the fault knob table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from jr2_actors.fake.apiserver import actor as api
from jr2_actors.fake.apiserver import knobs
from jr2_actors.fake.apiserver.rest import ApiRequest, WatchSpec, serve
from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.cluster import FakeCluster
from tests.support.imports import FORBIDDEN, reach
from tests.support.paths import PACKAGE

SBX = "/apis/core.jr2.dev/v1alpha1/namespaces/jr2/sandboxes"
PURE = ["fake/apiserver/rest.py", "fake/apiserver/state.py", "fake/apiserver/apply.py",
        "fake/apiserver/patches.py", "fake/apiserver/validation.py", "fake/apiserver/selectors.py",
        "fake/apiserver/discovery.py", "fake/apiserver/events.py", "fake/apiserver/kinds.py"]


@pytest.mark.parametrize("module", PURE)
def test_the_routes_and_the_store_are_pure(module: str) -> None:
    bad = {name for name in reach(PACKAGE / module) if name in FORBIDDEN}
    assert not bad, f"{module} reaches I/O: {bad}"


def call(state: ClusterState, method: str, path: str, body: Any = None, ctype: str = "application/json",
         **query: str) -> tuple[int, Any]:
    raw = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    answer = serve(ApiRequest(method, path, query, ctype, "", raw, "test/1"), state, 1_800_000_000.0)
    return answer.code, answer.doc if answer.watch is None else answer.watch


@pytest.fixture
def state() -> ClusterState:
    return ClusterState(namespaces=("jr2",))


def test_create_get_list_delete_without_http(state: ClusterState) -> None:
    code, created = call(state, "POST", SBX, {"metadata": {"name": "a"}, "spec": {"port": 1}})
    assert code == 201 and created["metadata"]["resourceVersion"]
    assert created["metadata"]["managedFields"][0]["manager"] == "test"  # the user agent, as a real server
    assert call(state, "GET", f"{SBX}/a")[1]["spec"] == {"port": 1}
    assert [i["metadata"]["name"] for i in call(state, "GET", SBX)[1]["items"]] == ["a"]
    assert call(state, "DELETE", f"{SBX}/a")[0] == 200
    assert call(state, "GET", f"{SBX}/a")[0] == 404


def test_a_watch_is_answered_with_what_to_open(state: ClusterState) -> None:
    code, spec = call(state, "GET", SBX, watch="true", labelSelector="a=b", fieldSelector="metadata.name=x",
                      timeoutSeconds="5", allowWatchBookmarks="true")
    assert code == 200 and isinstance(spec, WatchSpec)
    assert (spec.kind.kind, spec.namespace, spec.timeout_seconds, spec.bookmarks) == ("Sandbox", "jr2", 5, True)


@pytest.mark.parametrize(("method", "path", "body", "ctype", "query", "code"), [
    ("POST", SBX, b"\xff\xfe\x00", "application/json", {}, 400),
    ("POST", SBX, b"[" * 100_000, "application/json", {}, 400),
    ("POST", SBX, b'"a string"', "application/json", {}, 400),
    ("POST", SBX, {"metadata": "nope"}, "application/json", {}, 400),
    ("POST", SBX, {"metadata": {"name": "a" * 254}}, "application/json", {}, 422),
    ("POST", SBX, {"metadata": {"name": "a", "labels": {"k": 1}}}, "application/json", {}, 422),
    ("POST", SBX, {"metadata": {"name": "a", "labels": {"k": "v" * 64}}}, "application/json", {}, 422),
    ("POST", SBX, {"metadata": {"name": "a", "labels": {"-bad": "v"}}}, "application/json", {}, 422),
    ("POST", SBX, {"metadata": {"name": "a", "finalizers": "x"}}, "application/json", {}, 422),
    ("POST", SBX, {"metadata": {"name": "a", "annotations": {"k": "v" * 300_000}}}, "application/json", {}, 422),
    ("POST", SBX, {"metadata": {"name": "a"}}, "application/json", {"dryRun": "Some"}, 400),
    ("GET", SBX, None, "", {"limit": "x"}, 400),
    ("GET", SBX, None, "", {"continue": "not-a-token"}, 400),
    ("GET", SBX, None, "", {"continue": "eyJ2IjoxfQ"}, 400),
    ("GET", SBX, None, "", {"fieldSelector": "spec.port=1"}, 400),
    ("GET", SBX, None, "", {"fieldSelector": "metadata.name"}, 400),
    ("GET", SBX, None, "", {"watch": "true", "timeoutSeconds": "soon"}, 400),
    ("GET", SBX, None, "", {"watch": "true", "resourceVersion": "abc"}, 200),  # the store refuses it on open
    ("PATCH", f"{SBX}/a", b"[]", "application/merge-patch+json", {}, 404),
    ("PATCH", f"{SBX}/a", b"{}", "text/plain", {}, 415),
    ("PUT", f"{SBX}/a/scale", {}, "application/json", {}, 404),
    ("DELETE", f"{SBX}/a", {"preconditions": "x"}, "application/json", {}, 400),
    ("GET", "/apis/core.jr2.dev/v1alpha1/namespaces/jr2/sandboxes/a/b/c", None, "", {}, 404),
    ("GET", "/api/v1/namespaces/jr2/namespaces", None, "", {}, 404),
    ("POST", "/version", b"", "", {}, 200),
])
def test_hostile_and_malformed_requests_get_a_status(state: ClusterState, method: str, path: str, body: Any,
                                                     ctype: str, query: dict[str, str], code: int) -> None:
    got, doc = call(state, method, path, body, ctype, **query)
    assert got == code, doc
    if code >= 400:
        assert doc["kind"] == "Status" and doc["code"] == code and doc["message"]


def test_an_invalid_label_names_the_field_in_the_causes(state: ClusterState) -> None:
    # A real server: 422 Invalid, details.causes[{reason: FieldValueInvalid, field: metadata.labels}].
    code, doc = call(state, "POST", SBX, {"metadata": {"name": "a", "labels": {"app": "not ok!"}}})
    assert code == 422
    assert doc["message"].startswith('Sandbox.core.jr2.dev "a" is invalid: metadata.labels: Invalid value: "not ok!"')
    assert [(c["reason"], c["field"]) for c in doc["details"]["causes"]] == [("FieldValueInvalid", "metadata.labels")]


# -- the fault knobs: one table -------------------------------------------------------------------------

def test_every_knob_has_a_route_and_a_cluster_method() -> None:
    source = (Path(api.__file__).parent.parent / "cluster.py").read_text(encoding="utf-8")
    for (method, name), knob in knobs.KNOBS.items():
        assert method in ("GET", "POST", "DELETE")
        family = [k for k in knob.__mro__
                  if isinstance(k, type) and issubclass(k, knobs.Knob) and k is not knobs.Knob]
        assert any(f"knobs.{k.__name__}(" in source for k in family), f"FakeCluster has no method for {name}"


@pytest.mark.parametrize(("path", "body", "error"), [
    ("/_fake/fail", {"status": "x"}, "status"),
    ("/_fake/fail", {"status": 500, "count": True}, "count"),
    ("/_fake/fail", {"count": 1}, "status"),
    ("/_fake/fail", {"status": 99}, "status"),
    ("/_fake/latency", {"seconds": "1"}, "seconds"),
    ("/_fake/stall", {"on": 1}, "on"),
    ("/_fake/compact", {"bogus": 1}, "bogus"),
])
def test_a_bad_knob_argument_is_400_naming_it(cluster: FakeCluster, path: str, body: dict[str, Any],
                                              error: str) -> None:
    assert cluster.tls is not None
    resp = requests.post(cluster.url + path, json=body, verify=cluster.tls.ca_file, timeout=10)
    assert resp.status_code == 400
    assert error in resp.json()["error"]


def test_rotating_the_token_over_http_does_not_send_it(cluster: FakeCluster) -> None:
    assert cluster.tls is not None
    resp = requests.post(cluster.url + "/_fake/rotate-token", verify=cluster.tls.ca_file, timeout=10)
    assert resp.json() == {"ok": True}
    with open(cluster.token_file, encoding="utf-8") as f:
        assert f.read() not in resp.text


@pytest.mark.parametrize("selector", ["metadata.name", "metadata.name=a,,", "=a",
                                      "metadata.labels.x=y", "metadata.name in (a)", "x" * 100_000 + "=1",
                                      ",".join(["status.phase=Ready"] * 10_000), "metadata.name\x00=a"])
def test_hostile_field_selectors_are_400(state: ClusterState, selector: str) -> None:
    code, doc = call(state, "GET", SBX, fieldSelector=selector)
    assert code == 400 and doc["reason"] == "BadRequest"


@pytest.mark.parametrize("token", ["", "=", "!!!", "a" * 100_000, "W1tbW1tbW1tbW1td", "bnVsbA",
                                   "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6dHJ1ZSwic3RhcnQiOiIifQ"])
def test_hostile_continue_tokens_are_400(state: ClusterState, token: str) -> None:
    code, doc = call(state, "GET", SBX, limit="1", **({"continue": token} if token else {}))
    assert code == (200 if token == "" else 400), doc


def test_a_token_past_the_retained_history_is_410(state: ClusterState) -> None:
    for name in "abc":
        call(state, "POST", SBX, {"metadata": {"name": name}})
    _, page = call(state, "GET", SBX, limit="1")
    call(state, "DELETE", f"{SBX}/c")
    state.compact()
    code, doc = call(state, "GET", SBX, limit="1", **{"continue": page["metadata"]["continue"]})
    assert code == 410 and doc["reason"] == "Expired"


# Issue 20 item 1: a boolean query parameter is read as the API server reads it (apimachinery's
# Convert_Slice_string_To_bool): only `0` and `false`, in any case, are false; anything else is true.
TRUE_SPELLINGS = ["true", "True", "TRUE", "1", "yes", "on", ""]
FALSE_SPELLINGS = ["false", "False", "FALSE", "0"]


@pytest.mark.parametrize("value", TRUE_SPELLINGS)
def test_any_spelling_but_0_and_false_opens_a_watch_with_bookmarks(state: ClusterState, value: str) -> None:
    code, spec = call(state, "GET", SBX, watch=value, allowWatchBookmarks=value)
    assert code == 200 and isinstance(spec, WatchSpec) and spec.bookmarks


@pytest.mark.parametrize("value", FALSE_SPELLINGS)
def test_0_and_false_in_any_case_are_a_list(state: ClusterState, value: str) -> None:
    code, doc = call(state, "GET", SBX, watch=value)
    assert code == 200 and doc["kind"] == "SandboxList"
    _, spec = call(state, "GET", SBX, watch="1", allowWatchBookmarks=value)
    assert isinstance(spec, WatchSpec) and not spec.bookmarks


def _apply(state: ClusterState, manager: str, image: str, **query: str) -> tuple[int, Any]:
    doc = {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", "metadata": {"name": "a"},
           "spec": {"port": 1, "image": image}}
    return call(state, "PATCH", f"{SBX}/a", doc, "application/apply-patch+yaml", fieldManager=manager, **query)


@pytest.mark.parametrize(("value", "forced"), [("True", True), ("yes", True), ("", True), ("FALSE", False),
                                               ("0", False)])
def test_force_is_read_as_the_server_reads_it(state: ClusterState, value: str, forced: bool) -> None:
    assert _apply(state, "alice", "one")[0] == 201
    code, doc = _apply(state, "bob", "two", force=value)
    assert code == (200 if forced else 409), doc


@pytest.mark.parametrize(("value", "orphaned"), [("True", True), ("yes", True), ("False", False), ("0", False)])
def test_orphan_dependents_is_read_as_the_server_reads_it(state: ClusterState, value: str, orphaned: bool) -> None:
    _, owner = call(state, "POST", SBX, {"metadata": {"name": "a"}, "spec": {"port": 1}})
    ref = {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", "name": "a", "uid": owner["metadata"]["uid"]}
    secrets = "/api/v1/namespaces/jr2/secrets"
    call(state, "POST", secrets, {"metadata": {"name": "s", "ownerReferences": [ref]}})
    assert call(state, "DELETE", f"{SBX}/a", orphanDependents=value)[0] == 200
    assert (call(state, "GET", f"{secrets}/s")[0] == 200) is orphaned
