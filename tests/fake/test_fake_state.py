"""The fake API server's store: resourceVersion semantics, merge patch, history, owner GC, selectors."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jr2_actors.fake.apiserver.selectors import SelectorError, parse
from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.apiserver.status import StatusError
from jr2_actors.kube.kinds import SANDBOX, SECRET


def state(history: int = 256) -> ClusterState:
    return ClusterState(namespaces=("jr2",), history=history)


def sandbox(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"port": 8080}}


def test_every_change_bumps_one_counter_and_noops_bump_nothing() -> None:
    s = state()
    a = s.create(SANDBOX, "jr2", sandbox("a"), now=0)
    b = s.create(SANDBOX, "jr2", sandbox("b"), now=0)
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1
    before = s.rv
    same = s.merge_patch(SANDBOX, "jr2", "a", {"spec": {"port": 8080}})
    assert s.rv == before
    assert same["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]
    s.merge_patch(SANDBOX, "jr2", "a", {"status": {"phase": "Ready"}}, subresource="status")
    assert s.rv == before + 1


def test_main_resource_ignores_status_and_status_ignores_spec() -> None:
    s = state()
    s.create(SANDBOX, "jr2", {**sandbox("a"), "status": {"phase": "Ready"}}, now=0)
    assert "status" not in s.get(SANDBOX, "jr2", "a")
    s.merge_patch(SANDBOX, "jr2", "a", {"status": {"phase": "Lost"}, "spec": {"port": 9}})
    got = s.get(SANDBOX, "jr2", "a")
    assert got["spec"]["port"] == 9 and "status" not in got
    assert got["metadata"]["generation"] == 2
    s.merge_patch(SANDBOX, "jr2", "a", {"status": {"phase": "Ready"}, "spec": {"port": 1}}, subresource="status")
    got = s.get(SANDBOX, "jr2", "a")
    assert got["status"] == {"phase": "Ready"} and got["spec"]["port"] == 9


def test_merge_patch_null_removes_a_key() -> None:
    s = state()
    s.create(SANDBOX, "jr2", {"metadata": {"name": "a", "annotations": {"x": "1", "y": "2"}}}, now=0)
    s.merge_patch(SANDBOX, "jr2", "a", {"metadata": {"annotations": {"x": None}}})
    assert s.get(SANDBOX, "jr2", "a")["metadata"]["annotations"] == {"y": "2"}


def test_apply_creates_then_merges_and_keeps_identity() -> None:
    s = state()
    first = s.apply(SANDBOX, "jr2", "a", sandbox("a"), manager="jr2", now=0)
    second = s.apply(SANDBOX, "jr2", "a", {"metadata": {"labels": {"k": "v"}}, "spec": {"image": "i"}},
                     manager="other", now=5)
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    assert second["spec"] == {"port": 8080, "image": "i"}  # another manager's apply merges
    third = s.apply(SANDBOX, "jr2", "a", {"spec": {"image": "i"}}, manager="other", now=6)
    assert third["spec"] == {"port": 8080, "image": "i"}  # it stopped applying the label: the label goes
    assert "k" not in third["metadata"].get("labels", {})
    with pytest.raises(StatusError) as err:
        s.apply(SANDBOX, "jr2", "a", sandbox("a"), manager="", now=0)
    assert err.value.code == 422


def test_deleting_a_sandbox_collects_its_owned_secret() -> None:
    s = state()
    sbx = s.create(SANDBOX, "jr2", sandbox("a"), now=0)
    owner = {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", "name": "a", "uid": sbx["metadata"]["uid"]}
    s.create(SECRET, "jr2", {"metadata": {"name": "a-token", "ownerReferences": [owner]}}, now=0)
    s.create(SECRET, "jr2", {"metadata": {"name": "unrelated"}}, now=0)
    s.delete(SANDBOX, "jr2", "a")
    with pytest.raises(StatusError):
        s.get(SECRET, "jr2", "a-token")
    assert s.get(SECRET, "jr2", "unrelated")


def test_watch_resume_replays_after_version_and_old_version_is_expired() -> None:
    s = state(history=3)
    got: list[dict[str, Any]] = []
    for i in range(5):
        s.create(SANDBOX, "jr2", sandbox(f"s{i}"), now=0)
    frames, wid = s.subscribe(SANDBOX, "jr2", parse(None), str(s.rv - 2), got.append)
    assert wid is not None
    assert [f["object"]["metadata"]["name"] for f in frames] == ["s3", "s4"]
    old_frames, old_wid = s.subscribe(SANDBOX, "jr2", parse(None), "1", got.append)
    assert old_wid is None
    assert old_frames[0]["object"]["code"] == 410
    assert old_frames[0]["object"]["message"] == f"too old resource version: 1 ({s.oldest_retained})"


def test_compaction_expires_every_older_version() -> None:
    s = state()
    s.create(SANDBOX, "jr2", sandbox("a"), now=0)
    head = str(s.rv)
    s.compact()
    frames, wid = s.subscribe(SANDBOX, "jr2", parse(None), str(s.rv - 1), lambda e: None)
    assert wid is None and frames[0]["object"]["reason"] == "Expired"
    frames, wid = s.subscribe(SANDBOX, "jr2", parse(None), head, lambda e: None)
    assert wid is not None and frames == []


def test_watchers_get_only_matching_events() -> None:
    s = state()
    got: list[dict[str, Any]] = []
    s.subscribe(SANDBOX, "jr2", parse("jr2.dev/run"), str(s.rv), got.append)
    s.create(SANDBOX, "jr2", sandbox("labelled", **{"jr2.dev/run": "r"}), now=0)
    s.create(SANDBOX, "jr2", sandbox("plain"), now=0)
    s.create(SECRET, "jr2", {"metadata": {"name": "x", "labels": {"jr2.dev/run": "r"}}}, now=0)
    assert [e["object"]["metadata"]["name"] for e in got] == ["labelled"]


@pytest.mark.parametrize(
    ("selector", "names"),
    [("run", ["a", "b"]), ("!run", ["c"]), ("run=1", ["a"]), ("run==1", ["a"]), ("run!=1", ["b", "c"]),
     ("run in (1,2)", ["a", "b"]), ("run notin (1)", ["b", "c"]), ("run,tier=x", ["b"]), ("", ["a", "b", "c"])],
)
def test_label_selectors(selector: str, names: list[str]) -> None:
    s = state()
    s.create(SANDBOX, "jr2", sandbox("a", run="1"), now=0)
    s.create(SANDBOX, "jr2", sandbox("b", run="2", tier="x"), now=0)
    s.create(SANDBOX, "jr2", sandbox("c"), now=0)
    assert [i["metadata"]["name"] for i in s.list_objects(SANDBOX, "jr2", parse(selector))["items"]] == names


@pytest.mark.parametrize(
    ("selector", "names"),
    # Issue 20 item 4, as k8s.io/apimachinery pkg/labels parses and matches: `>` and `<` compare integers (a
    # label that is not one matches neither), `in(` needs no space, `()` is the set of the empty value.
    [("n>1", ["b"]), ("n<2", ["a"]), ("n > 0,n < 8", ["a", "b"]), ("n>0,n<7", ["a"]), ("run in(1,2)", ["a", "b"]),
     ("run notin(1)", ["b", "c"]), ("run in ()", []), ("tier=", []), ("run in (1,,2)", ["a", "b"])],
)
def test_integer_comparisons_and_sets_without_spaces(selector: str, names: list[str]) -> None:
    s = state()
    s.create(SANDBOX, "jr2", sandbox("a", run="1", n="1"), now=0)
    s.create(SANDBOX, "jr2", sandbox("b", run="2", n="7"), now=0)
    s.create(SANDBOX, "jr2", sandbox("c", n="x"), now=0)
    assert [i["metadata"]["name"] for i in s.list_objects(SANDBOX, "jr2", parse(selector))["items"]] == names


@pytest.mark.parametrize(("bad", "words"), [
    ("a b c", "found 'b', expected: in, notin, =, ==, !=, gt, lt"), ("k in (a", "expected: ',' or ')'"),
    ("=v", "expected: !, identifier, or 'end of string'"), ("-bad-", "invalid label key"),
    ("k=v!", "expected: ',' or 'end of string'"), ("a,,b", "expected: identifier after ','"),
    ("x" * 64, "invalid label key"), ("n>x", "for 'Gt', 'Lt' operators, the value must be an integer"),
    ("n>1.5", "must be an integer"), ("n<99999999999999999999", "must be an integer"), ("n>", "must be an integer"),
    ("n>(1)", "found '(', expected: identifier"), ("!k=v", "expected: ',' or 'end of string'"),
    ("k in ($x)", "a valid label must be"), ("n>-1", "a valid label must be"),  # a value is a label value
])
def test_bad_selectors_are_refused(bad: str, words: str) -> None:
    with pytest.raises(SelectorError, match=re.escape(words)):
        parse(bad)


@pytest.mark.parametrize(
    ("body", "code"),
    [({"metadata": {}}, 422), ({"metadata": {"name": "Bad_Name"}}, 422), ({"metadata": "x"}, 400),
     ({"kind": "Repo", "metadata": {"name": "a"}}, 400), ({"metadata": {"name": "a", "labels": {"k": 1}}}, 422)],
)
def test_invalid_creates_get_real_status_codes(body: dict[str, Any], code: int) -> None:
    with pytest.raises(StatusError) as err:
        state().create(SANDBOX, "jr2", body, now=0)
    assert err.value.code == code


def test_create_in_missing_namespace_is_not_found() -> None:
    with pytest.raises(StatusError) as err:
        state().create(SANDBOX, "elsewhere", sandbox("a"), now=0)
    assert err.value.code == 404
    assert 'namespaces "elsewhere" not found' in err.value.message


# -- patches and field ownership, pure -------------------------------------------------------------------

@pytest.mark.parametrize(("patch", "why"), [
    ({"op": "add"}, "not a list"),
    ([{"op": "add", "path": "/spec/x"}], "no value"),
    ([{"op": "add", "path": "spec/x", "value": 1}], "pointer without /"),
    ([{"op": "replace", "path": "/spec/missing", "value": 1}], "missing path"),
    ([{"op": "remove", "path": "/metadata/labels/nope"}], "missing key"),
    ([{"op": "add", "path": "/metadata/finalizers", "value": []}, {"op": "add", "path": "/metadata/finalizers/5",
                                                                    "value": "x"}], "index out of range"),
    ([{"op": "add", "path": "/metadata/finalizers", "value": []}, {"op": "add", "path": "/metadata/finalizers/01",
                                                                    "value": "x"}], "leading zero"),
    ([{"op": "move", "path": "/spec/y"}], "move without from"),
    ([{"op": "frobnicate", "path": "/spec"}], "unknown op"),
    ([{"op": "remove", "path": ""}], "the whole document"),
    ([{"op": "replace", "path": "/metadata", "value": "x"}], "metadata not an object"),
    ([7], "an operation that is not an object"),
])
def test_a_bad_json_patch_is_refused_and_changes_nothing(patch: object, why: str) -> None:
    s = state()
    s.create(SANDBOX, "jr2", sandbox("a"), now=0)
    rv = s.rv
    with pytest.raises(StatusError) as err:
        s.patch(SANDBOX, "jr2", "a", patch, patch_type="json")
    assert err.value.code in (400, 422), why
    assert s.rv == rv


def test_json_patch_operations_in_order() -> None:
    s = state()
    s.create(SANDBOX, "jr2", sandbox("a"), now=0)
    out = s.patch(SANDBOX, "jr2", "a", [
        {"op": "add", "path": "/spec/list", "value": [1, 3]},
        {"op": "add", "path": "/spec/list/1", "value": 2},
        {"op": "add", "path": "/spec/list/-", "value": 4},
        {"op": "copy", "from": "/spec/list", "path": "/spec/copied"},
        {"op": "move", "from": "/spec/port", "path": "/spec/moved"},
        {"op": "add", "path": "/metadata/annotations", "value": {"a~b/c": "1"}},
        {"op": "remove", "path": "/metadata/annotations/a~0b~1c"},
        {"op": "test", "path": "/spec/moved", "value": 8080}], patch_type="json")
    assert out["spec"] == {"list": [1, 2, 3, 4], "copied": [1, 2, 3, 4], "moved": 8080}
    assert out["metadata"]["annotations"] == {}


def test_strategic_merge_patch_directives_on_a_secret() -> None:
    s = state()
    s.create(SECRET, "jr2", {"metadata": {"name": "s", "labels": {"a": "1", "b": "2"}}, "data": {"k": "dg=="}}, now=0)
    out = s.patch(SECRET, "jr2", "s", {"metadata": {"labels": {"a": None, "$patch": "replace", "c": "3"}},
                                      "$setElementOrder/x": [], "stringData": {"n": "new"}}, patch_type="strategic")
    assert out["metadata"]["labels"] == {"c": "3"}
    assert out["data"] == {"k": "dg==", "n": "bmV3"} and "stringData" not in out
    gone = s.patch(SECRET, "jr2", "s", {"data": {"$patch": "delete"}}, patch_type="strategic")
    assert "data" not in gone


def test_managed_fields_survive_a_no_op_and_are_hostile_proof() -> None:
    s = state()
    first = s.apply(SANDBOX, "jr2", "a", sandbox("a", team="x"), manager="m", now=1)
    again = s.apply(SANDBOX, "jr2", "a", sandbox("a", team="x"), manager="m", now=99)
    assert again == first  # a no-op apply writes nothing, its time included
    # A client may send garbage as managedFields: the server's view of ownership does not crash on it.
    s.merge_patch(SANDBOX, "jr2", "a", {"metadata": {"managedFields": [1, "x", {"manager": 5}, {"manager": "z",
                                                                         "fieldsV1": "nope"}]}})
    applied = s.apply(SANDBOX, "jr2", "a", {"spec": {"port": 1}}, manager="m", now=100, force=True)
    assert applied["spec"]["port"] == 1


def test_uids_and_generated_names_come_from_the_entropy_handed_in() -> None:
    s = ClusterState(namespaces=("jr2",), entropy=lambda: 0x9D1F6A523C0B4F578E0A61D2B3C4A5E6)
    out = s.create(SANDBOX, "jr2", sandbox("a"), now=0)
    assert out["metadata"]["uid"] == "9d1f6a52-3c0b-4f57-8e0a-61d2b3c4a5e6"
    plain = state()  # by default a counter's: unique, never random
    first, second = (plain.create(SANDBOX, "jr2", {"metadata": {"generateName": "g-"}}, now=0)["metadata"]
                     for _ in range(2))
    assert first["uid"] != second["uid"] and first["name"] != second["name"]


def test_what_a_read_answers_is_a_copy_the_caller_may_change() -> None:
    """get, list and objects hand out copies (json_copy, not copy.deepcopy, since a list of 10,000 spent
    most of its time copying): changing one, however deep, changes nothing stored."""
    s = state()
    s.create(SANDBOX, "jr2", {"metadata": {"name": "a", "labels": {"k": "v"}},
                                  "spec": {"port": 1, "env": [{"name": "X", "value": "1"}]}}, now=0.0)
    s.get(SANDBOX, "jr2", "a")["spec"]["env"][0]["value"] = "changed"
    s.list_objects(SANDBOX, "jr2")["items"][0]["metadata"]["labels"]["k"] = "changed"
    s.objects(SANDBOX)[0]["spec"]["env"].append({"name": "Y"})
    again = s.get(SANDBOX, "jr2", "a")
    assert again["spec"]["env"] == [{"name": "X", "value": "1"}] and again["metadata"]["labels"] == {"k": "v"}
