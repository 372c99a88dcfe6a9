"""Issue 13: the fake answers as a real API server wherever a user's code can tell the difference.

Every test drives the fake through a real client — the official `kubernetes` client or kubectl — and
says in a comment what a real kube-apiserver answers, which the fake matches.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException

from jr2_actors.fake.cluster import FakeCluster
from tests.support.kube_clients import (
    GROUP,
    KUBECTL,
    NS,
    PLURAL,
    SANDBOX_YAML,
    VERSION,
    body,
    create,
    kubectl,
    needs_kubectl,
)

JSON_PATCH = "application/json-patch+json"


def get(custom: k8s.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)  # type: ignore[no-any-return]


def names(doc: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in doc["items"]]


class Watching:
    """An official-client watch on its own thread; events arrive on a queue."""

    def __init__(self, custom: k8s.CustomObjectsApi, cluster: FakeCluster, **kw: Any) -> None:
        self.events: queue.Queue[tuple[str, str]] = queue.Queue()
        self.watch = watch.Watch()
        opened = cluster.watch_stats()["opened"]

        def run() -> None:
            with contextlib.suppress(Exception):  # the cluster stops under it at the end of the test
                for event in self.watch.stream(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                                               timeout_seconds=30, **kw):
                    self.events.put((event["type"], event["object"]["metadata"]["name"]))

        threading.Thread(target=run, daemon=True).start()
        from tests.support.waiting import wait_until

        wait_until(lambda: cluster.watch_stats()["opened"] > opened, what="the watch to open")

    def next(self) -> tuple[str, str]:
        return self.events.get(timeout=10)

    def stop(self) -> None:
        self.watch.stop()


@pytest.fixture
def watching(custom: k8s.CustomObjectsApi, cluster: FakeCluster) -> Iterator[list[Watching]]:
    opened: list[Watching] = []
    yield opened
    for w in opened:
        w.stop()


# -- 1. field selectors ---------------------------------------------------------------------------------

def test_field_selectors_on_list_and_watch(custom: k8s.CustomObjectsApi, cluster: FakeCluster,
                                           watching: list[Watching]) -> None:
    create(custom, "a")
    create(custom, "b")
    # A real server filters a list by metadata.name / metadata.namespace (=, ==, !=).
    assert names(custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL,
                                                      field_selector="metadata.name=b")) == ["b"]
    assert names(custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL,
                                                      field_selector="metadata.name!=b")) == ["a"]
    # Any other field: 400 BadRequest "field label not supported: spec.port".
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, field_selector="spec.port=8080")
    assert err.value.status == 400 and "field label not supported: spec.port" in err.value.body
    # A watch with a field selector sees only the object it names: b's change is never sent.
    w = Watching(custom, cluster, field_selector="metadata.name=a", resource_version=str(cluster.resource_version))
    watching.append(w)
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "b", {"spec": {"port": 1}})
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": {"port": 2}})
    assert w.next() == ("MODIFIED", "a")


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_wait_waits_for_the_named_sandbox_only(kenv: dict[str, str], cluster: FakeCluster) -> None:
    from jr2_actors.kube.kinds import SANDBOX

    client = cluster.client()
    client.apply(SANDBOX, "ready-one", {"spec": {"port": 8080}})
    client.apply(SANDBOX, "pending-one", {"spec": {"port": 8080}})
    client.merge_patch(SANDBOX, "ready-one", {"status": {"phase": "Ready", "conditions": [
        {"type": "Ready", "status": "True", "reason": "PodReady", "message": "", "observedGeneration": 1,
         "lastTransitionTime": "2026-11-29T10:00:00Z"}]}}, status=True)
    # kubectl wait lists and watches with fieldSelector=metadata.name=<name>: on a cluster it times out
    # here, because the Sandbox it names is not Ready (another one being Ready is no answer).
    waited = kubectl(kenv, "wait", "--for=condition=Ready", "sandboxes.core.jr2.dev/pending-one", "--timeout=1s")
    assert waited.returncode != 0
    assert "timed out" in waited.stderr
    ok = kubectl(kenv, "wait", "--for=condition=Ready", "sandboxes.core.jr2.dev/ready-one", "--timeout=10s")
    assert ok.returncode == 0, ok.stderr


# -- 2. selector transitions on a watch -------------------------------------------------------------------

def test_relabelled_out_of_a_watch_is_deleted_and_into_it_added(custom: k8s.CustomObjectsApi,
                                                                cluster: FakeCluster,
                                                                watching: list[Watching]) -> None:
    create(custom, "a", metadata={"name": "a", "labels": {"app": "x"}})
    create(custom, "b", metadata={"name": "b", "labels": {"app": "y"}})
    w = Watching(custom, cluster, label_selector="app=x",
                 resource_version=str(cluster.resource_version))
    watching.append(w)
    # The watch cache: an object that stops matching is sent DELETED (its last matching state), one that
    # starts matching is sent ADDED — never MODIFIED, and never nothing.
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"metadata": {"labels": {"app": "y"}}})
    assert w.next() == ("DELETED", "a")
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "b", {"metadata": {"labels": {"app": "x"}}})
    assert w.next() == ("ADDED", "b")
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "b", {"spec": {"port": 2}})
    assert w.next() == ("MODIFIED", "b")


# -- 3. dryRun=All ------------------------------------------------------------------------------------------

def test_dry_run_validates_answers_and_changes_nothing(custom: k8s.CustomObjectsApi, cluster: FakeCluster) -> None:
    live = create(custom, "a")
    rv = cluster.resource_version
    # A real server runs a dry-run write through validation and admission and answers as if it were done,
    # storing nothing: no new resourceVersion, no watch event.
    created = custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body("new"), dry_run="All")
    assert created["metadata"]["name"] == "new" and created["metadata"]["uid"]
    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": {"port": 1}},
                                                    dry_run="All")
    assert patched["spec"]["port"] == 1
    applied = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", body("a", spec={"port": 2}),
                                                    field_manager="m", force=True, dry_run="All",
                                                    _content_type="application/apply-patch+yaml")
    assert applied["spec"]["port"] == 2
    replaced = custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {
        **live, "spec": {"port": 3}}, dry_run="All")
    assert replaced["spec"]["port"] == 3
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", dry_run="All")
    # ... and a dry run is validated as the real write is.
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body("Bad_Name"), dry_run="All")
    assert err.value.status == 422
    assert cluster.resource_version == rv
    assert get(custom, "a")["spec"] == {"port": 8080}
    with pytest.raises(ApiException) as gone:
        get(custom, "new")
    assert gone.value.status == 404


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_diff_leaves_the_live_object_alone(kenv: dict[str, str], cluster: FakeCluster) -> None:

    assert kubectl(kenv, "apply", "--server-side", "-f", "-", stdin=SANDBOX_YAML).returncode == 0
    rv = cluster.resource_version
    # kubectl diff sends the apply with dryRun=All: it shows the change (exit 1) and makes none.
    diff = kubectl(kenv, "diff", "--server-side", "-f", "-", stdin=SANDBOX_YAML.replace("8080", "9090"))
    assert diff.returncode == 1, diff.stderr
    assert "9090" in diff.stdout
    assert cluster.resource_version == rv
    got = kubectl(kenv, "get", "sandboxes.core.jr2.dev", "ws-k", "-o", "jsonpath={.spec.port}")
    assert got.stdout == "8080"


# -- 4. delete preconditions ----------------------------------------------------------------------------

def test_delete_preconditions_mismatch_is_409_and_the_object_stays(custom: k8s.CustomObjectsApi) -> None:
    live = create(custom, "a")
    for pre, words in [(k8s.V1Preconditions(uid="not-its-uid"), "the UID in the precondition (not-its-uid)"),
                       (k8s.V1Preconditions(resource_version="1"), "the ResourceVersion in the precondition (1)")]:
        # A real v1.37 server (rest.BeforeDelete; tests/real/test_fidelity.py): 409 Conflict, 'Operation cannot
        # be fulfilled on Sandbox.core.jr2.dev "a": the UID in the precondition (…) does not match the UID in
        # record (…). The object might have been deleted and then recreated', and nothing is deleted.
        with pytest.raises(ApiException) as err:
            custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a",
                                                   body=k8s.V1DeleteOptions(preconditions=pre))
        assert err.value.status == 409
        message = json.loads(err.value.body)["message"]
        assert words in message and message.startswith('Operation cannot be fulfilled on Sandbox.core.jr2.dev "a": ')
        assert get(custom, "a")["metadata"]["uid"] == live["metadata"]["uid"]
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", body=k8s.V1DeleteOptions(
        preconditions=k8s.V1Preconditions(uid=live["metadata"]["uid"],
                                          resource_version=live["metadata"]["resourceVersion"])))
    with pytest.raises(ApiException) as gone:
        get(custom, "a")
    assert gone.value.status == 404


# -- 5. PUT replaces -------------------------------------------------------------------------------------

def test_put_replaces_keeps_status_and_needs_the_version(custom: k8s.CustomObjectsApi, cluster: FakeCluster) -> None:
    from jr2_actors.kube.kinds import SANDBOX

    live = create(custom, "a", metadata={"name": "a", "labels": {"jr2.dev/run": "r1", "keep": "no"},
                                         "annotations": {"note": "x"}}, spec={"port": 8080, "deep": {"a": 1, "b": 2}})
    cluster.client().merge_patch(SANDBOX, "a", {"status": {"phase": "Ready"}}, status=True)
    current = get(custom, "a")
    # A real server's PUT stores the body as sent: what it leaves out is gone (labels, annotations,
    # nested spec fields); the status, which the main resource does not write, stays.
    sent: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Sandbox",
            "metadata": {"name": "a", "labels": {"jr2.dev/run": "r1"},
                         "resourceVersion": current["metadata"]["resourceVersion"]},
            "spec": {"deep": {"a": 1}}}
    put = custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", sent)
    assert put["metadata"]["labels"] == {"jr2.dev/run": "r1"}
    assert "annotations" not in put["metadata"]
    assert put["spec"] == {"deep": {"a": 1}}
    assert put["status"] == {"phase": "Ready"}
    assert put["metadata"]["uid"] == live["metadata"]["uid"]
    assert put["metadata"]["generation"] == 2
    # A custom resource allows no unconditional update: no resourceVersion is 422
    # ("metadata.resourceVersion: Invalid value: 0x0: must be specified for an update").
    with pytest.raises(ApiException) as err:
        custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {**sent, "metadata": {"name": "a"}})
    assert err.value.status == 422 and "must be specified for an update" in err.value.body
    # A stale version is 409 Conflict; a wrong uid is 409 "Precondition failed: UID in precondition".
    with pytest.raises(ApiException) as stale:
        custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", sent)
    assert stale.value.status == 409 and "the object has been modified" in stale.value.body
    fresh = get(custom, "a")["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as wrong_uid:
        custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {
            **sent, "metadata": {**sent["metadata"], "resourceVersion": fresh, "uid": "someone-else"}})
    assert wrong_uid.value.status == 409 and "UID in precondition: someone-else" in wrong_uid.value.body


def test_put_to_status_replaces_only_the_status(custom: k8s.CustomObjectsApi) -> None:
    create(custom, "a")
    current = get(custom, "a")
    put = custom.replace_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, "a", {
        **current, "spec": {"port": 1}, "status": {"phase": "Pending"}})
    assert put["status"] == {"phase": "Pending"}
    assert put["spec"] == {"port": 8080}  # /status writes nothing else, as on a cluster



# -- 6. server-side apply with field ownership -------------------------------------------------------------

def apply(custom: k8s.CustomObjectsApi, manager: str, doc: dict[str, Any], *, force: bool = False,
          status: bool = False) -> dict[str, Any]:
    call = custom.patch_namespaced_custom_object_status if status else custom.patch_namespaced_custom_object
    return call(GROUP, VERSION, NS, PLURAL, doc["metadata"]["name"], doc, field_manager=manager, force=force,  # type: ignore[no-any-return]
                _content_type="application/apply-patch+yaml")


def owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_server_side_apply_owns_fields_conflicts_and_removes(custom: k8s.CustomObjectsApi) -> None:
    apply(custom, "alice", body("a", metadata={"name": "a", "labels": {"team": "x"}},
                                spec={"image": "one", "port": 8080}))  # 201: this client answers None
    first = get(custom, "a")
    assert owners(first)["alice"] == {"f:metadata": {"f:labels": {"f:team": {}}},
                                      "f:spec": {"f:image": {}, "f:port": {}}}
    # Another manager setting a field alice owns, to another value, without force: 409 Conflict naming the
    # field ('Apply failed with 1 conflict: conflict with "alice": .spec.image', cause FieldManagerConflict).
    with pytest.raises(ApiException) as err:
        apply(custom, "bob", body("a", metadata={"name": "a"}, spec={"image": "two"}))
    assert err.value.status == 409
    doc = json.loads(err.value.body)
    assert doc["message"] == 'Apply failed with 1 conflict: conflict with "alice": .spec.image'
    assert doc["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "alice"',
                                         "field": ".spec.image"}]
    # The same value is no conflict: both own it.
    shared = apply(custom, "bob", body("a", metadata={"name": "a"}, spec={"port": 8080}))
    assert owners(shared)["bob"] == {"f:spec": {"f:port": {}}}
    # force takes the field.
    forced = apply(custom, "bob", body("a", metadata={"name": "a"}, spec={"image": "two", "port": 8080}), force=True)
    assert forced["spec"]["image"] == "two"
    assert "f:image" not in owners(forced)["alice"]["f:spec"]
    # A field alice stops applying, that nobody else owns, is removed; one bob owns too stays.
    dropped = apply(custom, "alice", body("a", metadata={"name": "a"}, spec={"port": 8080}))
    assert "labels" not in dropped["metadata"] or "team" not in dropped["metadata"]["labels"]
    assert dropped["spec"] == {"image": "two", "port": 8080}


def test_apply_to_status_writes_only_the_status(custom: k8s.CustomObjectsApi) -> None:
    create(custom, "a")
    done = apply(custom, "operator", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Sandbox", "metadata": {"name": "a"},
                                      "status": {"phase": "Ready"}, "spec": {"port": 1}}, status=True)
    assert done["status"] == {"phase": "Ready"}
    assert done["spec"] == {"port": 8080}  # /status ignores the rest, as a real server does
    entry = next(e for e in done["metadata"]["managedFields"] if e["manager"] == "operator")
    assert entry["subresource"] == "status" and entry["operation"] == "Apply"


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_server_side_apply_conflict_and_force(kenv: dict[str, str], custom: k8s.CustomObjectsApi) -> None:

    apply(custom, "someone-else", body("ws-k", metadata={"name": "ws-k"}, spec={"port": 9090}))
    # kubectl's manager ("kubectl") wants port 8080: a real server refuses with the conflict, and
    # --force-conflicts takes the field.
    refused = kubectl(kenv, "apply", "--server-side", "-f", "-", stdin=SANDBOX_YAML)
    assert refused.returncode != 0
    assert "conflict" in refused.stderr and ".spec.port" in refused.stderr
    forced = kubectl(kenv, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=SANDBOX_YAML)
    assert forced.returncode == 0, forced.stderr
    assert get(custom, "ws-k")["spec"]["port"] == 8080


# -- 7. optimistic locking by merge patch ------------------------------------------------------------------

def test_a_merge_patch_with_a_stale_version_is_409(custom: k8s.CustomObjectsApi) -> None:
    live = create(custom, "a")
    rv = live["metadata"]["resourceVersion"]
    ok = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a",
                                               {"metadata": {"resourceVersion": rv}, "spec": {"port": 1}})
    assert ok["spec"]["port"] == 1
    # The version sent is a precondition: a real server answers 409 Conflict "the object has been
    # modified; please apply your changes to the latest version and try again", and writes nothing.
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a",
                                              {"metadata": {"resourceVersion": rv}, "spec": {"port": 2}})
    assert err.value.status == 409
    assert json.loads(err.value.body)["message"] == (
        'Operation cannot be fulfilled on sandboxes.core.jr2.dev "a": the object has been modified; please apply '
        "your changes to the latest version and try again")
    assert get(custom, "a")["spec"]["port"] == 1


# -- 8. finalizers, propagation, delete-collection -----------------------------------------------------------

def test_a_finalizer_holds_the_object_until_it_is_removed(custom: k8s.CustomObjectsApi, cluster: FakeCluster,
                                                          watching: list[Watching]) -> None:
    create(custom, "a", metadata={"name": "a", "finalizers": ["jr2.dev/hold"]})
    w = Watching(custom, cluster, resource_version=str(cluster.resource_version))
    watching.append(w)
    # A real server: the delete sets deletionTimestamp and answers 200 with the object, which stays
    # (watchers see MODIFIED) until its last finalizer is removed; then it is gone (DELETED).
    held = custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a")
    assert held["metadata"]["deletionTimestamp"]
    assert get(custom, "a")["metadata"]["finalizers"] == ["jr2.dev/hold"]
    assert w.next() == ("MODIFIED", "a")
    # No new finalizer on an object being deleted: 422 (metadata.finalizers: Forbidden).
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a",
                                              {"metadata": {"finalizers": ["jr2.dev/hold", "more"]}})
    assert err.value.status == 422
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"metadata": {"finalizers": None}})
    # The write that lifts the last finalizer deletes it: one DELETED, no MODIFIED first (a real v1.37 server,
    # tests/real/test_fidelity.py; the fake sent both before).
    assert w.next() == ("DELETED", "a")
    with pytest.raises(ApiException) as gone:
        get(custom, "a")
    assert gone.value.status == 404


def owned_secret(api: k8s.ApiClient, owner: dict[str, Any]) -> k8s.V1Secret:
    ref = k8s.V1OwnerReference(api_version=f"{GROUP}/{VERSION}", kind="Sandbox", name=owner["metadata"]["name"],
                               uid=owner["metadata"]["uid"])
    return k8s.CoreV1Api(api).create_namespaced_secret(NS, k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(name=f"{owner['metadata']['name']}-token", owner_references=[ref]),
        string_data={"JR2_SANDBOX_TOKEN": "t"}))


@pytest.mark.parametrize("policy", ["Orphan", "Background", "Foreground"])
def test_propagation_policy_on_delete(api: k8s.ApiClient, custom: k8s.CustomObjectsApi, policy: str) -> None:
    core = k8s.CoreV1Api(api)
    owned_secret(api, create(custom, "a"))
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", propagation_policy=policy)
    with pytest.raises(ApiException) as gone:
        get(custom, "a")
    assert gone.value.status == 404
    if policy == "Orphan":
        # Orphan: the dependents stay, their ownerReference to the deleted owner removed.
        kept = core.read_namespaced_secret("a-token", NS)
        assert not kept.metadata.owner_references
    else:
        # Background (a custom resource's default) and Foreground: the garbage collector deletes them.
        with pytest.raises(ApiException) as collected:
            core.read_namespaced_secret("a-token", NS)
        assert collected.value.status == 404


def test_delete_collection_deletes_what_the_selector_names(custom: k8s.CustomObjectsApi) -> None:
    for name, app in [("a", "x"), ("b", "x"), ("c", "y")]:
        create(custom, name, metadata={"name": name, "labels": {"app": app}})
    # DELETE on the collection with a label selector deletes exactly those (deletecollection).
    custom.delete_collection_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, label_selector="app=x")
    assert names(custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)) == ["c"]


# -- 9. JSON patch, strategic merge patch, stringData ------------------------------------------------------

def test_json_patch_on_every_kind(api: k8s.ApiClient, custom: k8s.CustomObjectsApi) -> None:
    create(custom, "a")
    # application/json-patch+json (RFC 6902): a real server takes it for every kind.
    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", [
        {"op": "replace", "path": "/spec/port", "value": 9090},
        {"op": "add", "path": "/metadata/labels/team", "value": "x"}], _content_type=JSON_PATCH)
    assert patched["spec"]["port"] == 9090 and patched["metadata"]["labels"]["team"] == "x"
    core = k8s.CoreV1Api(api)
    core.create_namespaced_secret(NS, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s"), data={"a": "YQ=="}))
    secret = core.patch_namespaced_secret("s", NS, [{"op": "add", "path": "/data/b", "value": "Yg=="}])
    assert secret.data == {"a": "YQ==", "b": "Yg=="}
    # A failed `test` operation is 422 and changes nothing.
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", [
            {"op": "test", "path": "/spec/port", "value": 1}, {"op": "remove", "path": "/spec"}],
            _content_type=JSON_PATCH)
    assert err.value.status == 422
    assert get(custom, "a")["spec"]["port"] == 9090


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_patch_apply_and_edit_of_built_in_kinds(kenv: dict[str, str], api: k8s.ApiClient,
                                                        tmp_path: Any) -> None:
    core = k8s.CoreV1Api(api)
    secret_yaml = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  token: one\n"
    # Client-side apply: a create, then a strategic merge patch (what kubectl sends for a built-in kind).
    assert kubectl(kenv, "apply", "-f", "-", stdin=secret_yaml).returncode == 0
    changed = kubectl(kenv, "apply", "-f", "-", stdin=secret_yaml.replace("one", "two"))
    assert changed.returncode == 0, changed.stderr
    # stringData is write-only: a real server folds it into data (base64) and never stores it.
    secret = core.read_namespaced_secret("s", NS)
    assert secret.data["token"] == "dHdv" and secret.string_data is None
    patched = kubectl(kenv, "patch", "secret", "s", "-p", '{"stringData":{"extra":"x"}}')
    assert patched.returncode == 0, patched.stderr
    assert core.read_namespaced_secret("s", NS).data == {"token": "dHdv", "extra": "eA=="}
    assert kubectl(kenv, "label", "namespace", NS, "team=blue").returncode == 0
    assert core.read_namespace(NS).metadata.labels["team"] == "blue"
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/dHdv/dGhyZWU=/' \"$1\"\n")
    editor.chmod(0o755)
    edited = kubectl({**kenv, "KUBE_EDITOR": str(editor)}, "edit", "secret", "s")
    assert edited.returncode == 0, edited.stderr
    assert core.read_namespaced_secret("s", NS).data["token"] == "dGhyZWU="


# -- 10. validation ---------------------------------------------------------------------------------------

def test_invalid_labels_are_422_with_the_field_in_causes(custom: k8s.CustomObjectsApi) -> None:
    # A real server: 422 Invalid, 'Sandbox.core.jr2.dev "a" is invalid: metadata.labels: Invalid value:
    # "bad value!": a valid label must be an empty string or consist of alphanumeric characters, …'.
    for labels in ({"app": "bad value!"}, {"bad key!": "v"}, {"app": "v" * 64}):
        with pytest.raises(ApiException) as err:
            create(custom, "a", metadata={"name": "a", "labels": labels})
        assert err.value.status == 422
        doc = json.loads(err.value.body)
        assert doc["reason"] == "Invalid"
        assert doc["message"].startswith('Sandbox.core.jr2.dev "a" is invalid: metadata.labels: Invalid value: ')
        assert [c["field"] for c in doc["details"]["causes"]] == ["metadata.labels"]


def test_a_body_in_another_namespace_than_the_url_is_400(custom: k8s.CustomObjectsApi) -> None:
    # "the namespace of the provided object does not match the namespace sent on the request"
    with pytest.raises(ApiException) as err:
        create(custom, "a", metadata={"name": "a", "namespace": "default"})
    assert err.value.status == 400
    assert "does not match the namespace sent on the request" in err.value.body


def test_generation_is_the_servers(custom: k8s.CustomObjectsApi) -> None:
    created = create(custom, "a", metadata={"name": "a", "generation": 7})
    assert created["metadata"]["generation"] == 1  # a client cannot set it
    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a",
                                                    {"metadata": {"generation": 42, "labels": {"x": "y"}}})
    assert patched["metadata"]["generation"] == 1  # metadata changes do not move it either
    spec = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": {"port": 1}})
    assert spec["metadata"]["generation"] == 2  # a spec change does


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_create_with_generate_name(kenv: dict[str, str], custom: k8s.CustomObjectsApi) -> None:
    manifest = ("apiVersion: core.jr2.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  generateName: ws-\n"
                "spec:\n  port: 8080\n")
    made = kubectl(kenv, "create", "-f", "-", stdin=manifest)
    assert made.returncode == 0, made.stderr
    # The server appends five random characters to generateName.
    (name,) = names(custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL))
    assert name.startswith("ws-") and len(name) == len("ws-") + 5
    assert f"sandbox.core.jr2.dev/{name} created" in made.stdout


# -- 11. bookmarks of the watched kind; paged lists ---------------------------------------------------------

def test_a_bookmark_carries_the_watched_kind(api: k8s.ApiClient, cluster: FakeCluster) -> None:
    core = k8s.CoreV1Api(api)
    kinds = set()
    # A real server's bookmark is an object of the watched kind holding only its resourceVersion.
    for event in watch.Watch().stream(core.list_namespaced_secret, NS, allow_watch_bookmarks=True,
                                      resource_version=str(cluster.resource_version), timeout_seconds=1):
        if event["type"] == "BOOKMARK":
            kinds.add((event["raw_object"]["kind"], event["raw_object"]["apiVersion"]))
    assert kinds == {("Secret", "v1")}


def test_limit_and_continue_page_a_list(custom: k8s.CustomObjectsApi) -> None:
    for i in range(5):
        create(custom, f"s{i}")
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=2, _continue=token)
        pages += 1
        seen += names(page)
        token = page["metadata"].get("continue")
        if not token:
            break
    assert (seen, pages) == ([f"s{i}" for i in range(5)], 3)
    # A token the server did not write: 400 BadRequest, as the etcd store answers.
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=2, _continue="bm90LWEtdG9rZW4")
    assert err.value.status == 400


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_get_pages_with_chunk_size(kenv: dict[str, str], custom: k8s.CustomObjectsApi,
                                           cluster: FakeCluster) -> None:
    for i in range(5):
        create(custom, f"s{i}")
    cluster.requests(clear=True)
    got = kubectl(kenv, "get", "sandboxes.core.jr2.dev", "--chunk-size=2", "-o", "name")
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == [f"sandbox.core.jr2.dev/s{i}" for i in range(5)]
    lists = [r["query"] for r in cluster.requests() if r["path"].endswith("/sandboxes")]
    assert len(lists) == 3 and all(q.get("limit") == "2" for q in lists)
    assert sum("continue" in q for q in lists) == 2


# -- beyond the issue: a namespace terminates; pages are a snapshot ------------------------------------------

def test_a_deleted_namespace_terminates_until_its_content_is_gone(api: k8s.ApiClient,
                                                                   custom: k8s.CustomObjectsApi) -> None:
    core = k8s.CoreV1Api(api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="doomed")))
    custom.create_namespaced_custom_object(GROUP, VERSION, "doomed", PLURAL, body("held", metadata={
        "name": "held", "finalizers": ["jr2.dev/hold"]}))
    custom.create_namespaced_custom_object(GROUP, VERSION, "doomed", PLURAL, body("free"))
    # A real server: the namespace goes Terminating, its content is deleted (a finalizer holds an object),
    # new content is refused (403 Forbidden, NamespaceTerminating), and the namespace goes with its last object.
    core.delete_namespace("doomed")
    terminating = core.read_namespace("doomed")
    assert terminating.status.phase == "Terminating" and terminating.metadata.deletion_timestamp
    assert names(custom.list_namespaced_custom_object(GROUP, VERSION, "doomed", PLURAL)) == ["held"]
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(GROUP, VERSION, "doomed", PLURAL, body("late"))
    assert refused.value.status == 403 and "because it is being terminated" in refused.value.body
    custom.patch_namespaced_custom_object(GROUP, VERSION, "doomed", PLURAL, "held", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespace("doomed")
    assert gone.value.status == 404


def test_every_page_of_a_list_is_the_first_pages_snapshot(custom: k8s.CustomObjectsApi) -> None:
    for i in range(4):
        create(custom, f"s{i}")
    first = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=2)
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "s3")
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "s2", {"spec": {"port": 1}})
    create(custom, "s9")
    # The etcd store serves the rest of a paged list as of the first page's resourceVersion.
    rest = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=10,
                                                _continue=first["metadata"]["continue"])
    assert names(rest) == ["s2", "s3"]
    assert rest["items"][0]["spec"]["port"] == 8080
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]



def test_a_patch_carrying_another_uid_is_422_and_changes_nothing(custom: k8s.CustomObjectsApi) -> None:
    live = create(custom, "a")
    # A real v1.37 server (tests/real/test_watch_rules.py) refuses a patch whose metadata carries another uid
    # as a change of an immutable field: 422 Invalid "metadata.uid: Invalid value: "<sent>": field is
    # immutable" (a PUT's uid is a precondition, 409, below). Either way nothing changes: the Lease's renewal
    # relies on it, so it can never renew another Sandbox that took the name since.
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a",
                                              {"metadata": {"uid": "another-uid", "annotations": {"k": "v"}}})
    assert err.value.status == 422
    assert json.loads(err.value.body)["message"] == (
        'Sandbox.core.jr2.dev "a" is invalid: metadata.uid: Invalid value: "another-uid": field is immutable')
    assert "annotations" not in get(custom, "a")["metadata"]
    same = {"metadata": {"uid": live["metadata"]["uid"], "annotations": {"k": "v"}}}
    ok = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", same)
    assert ok["metadata"]["annotations"] == {"k": "v"}



def test_a_sandbox_its_crds_schema_refuses_is_422_naming_each_field(custom: k8s.CustomObjectsApi) -> None:
    # The fake validates against the very CRD in manifests/crds/ (issue 12: one source of truth), as a real
    # API server does: 422 Invalid, each field named in details.causes, and nothing stored.
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body("bad", spec={"port": "eighty"}))
    assert err.value.status == 422
    doc = json.loads(err.value.body)
    assert doc["reason"] == "Invalid" and [c["field"] for c in doc["details"]["causes"]] == ["spec.port"]
    create(custom, "good")
    with pytest.raises(ApiException) as status_err:
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, "good", {"status": {
            "phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}})
    assert status_err.value.status == 422
    fields = {c["field"] for c in json.loads(status_err.value.body)["details"]["causes"]}
    assert {"status.conditions[0].reason", "status.conditions[0].lastTransitionTime"} <= fields
    assert "status" not in get(custom, "good")


# -- issue 20 item 4: the remaining deviations --------------------------------------------------------------

def test_a_secret_has_no_generation_and_its_type_defaults_to_opaque(api: k8s.ApiClient,
                                                                    custom: k8s.CustomObjectsApi) -> None:
    core = k8s.CoreV1Api(api)
    # The Secret strategy sets no generation (only a custom resource's does); SetDefaults_Secret gives
    # `type: Opaque` to one that names none, on every write.
    created = core.create_namespaced_secret(NS, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s"), data={"a": "YQ=="}))
    assert created.metadata.generation is None and created.type == "Opaque"
    patched = core.patch_namespaced_secret("s", NS, {"data": {"b": "Yg=="}})
    assert patched.metadata.generation is None and patched.type == "Opaque"
    put = core.replace_namespaced_secret("s", NS, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s"), data={}))
    assert put.type == "Opaque"  # defaulted again: the PUT left it out
    tls = core.create_namespaced_secret(NS, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="t"),
                                                         type="kubernetes.io/tls"))
    assert tls.type == "kubernetes.io/tls"
    # ValidateSecretUpdate: the type is immutable.
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_secret("t", NS, {"type": "Opaque"})
    assert err.value.status == 422
    assert 'Secret "t" is invalid: type: Invalid value: "Opaque": field is immutable' in json.loads(err.value.body)[
        "message"]
    assert core.read_namespace(NS).metadata.generation is None  # nor has a Namespace
    assert create(custom, "a")["metadata"]["generation"] == 1  # a custom resource has


def test_label_selectors_compare_integers_and_take_in_without_a_space(custom: k8s.CustomObjectsApi) -> None:
    for name, n, app in [("a", "1", "x"), ("b", "7", "y"), ("c", "x", "z")]:
        create(custom, name, metadata={"name": name, "labels": {"n": n, "app": app}})

    def selected(selector: str) -> list[str]:
        return names(custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, label_selector=selector))

    # k8s.io/apimachinery pkg/labels: `>` / `<` (gt / lt) compare the label as an integer (one that is
    # not an integer matches neither); `in(` needs no space.
    assert selected("n>1") == ["b"]
    assert selected("n<7") == ["a"]
    assert selected("app in(x,z)") == ["a", "c"]
    assert selected("app notin(x)") == ["b", "c"]
    with pytest.raises(ApiException) as err:
        selected("n>one")
    assert err.value.status == 400
    assert "for 'Gt', 'Lt' operators, the value must be an integer" in json.loads(err.value.body)["message"]


def test_an_immediate_delete_answers_a_status_naming_what_went(api: k8s.ApiClient,
                                                              custom: k8s.CustomObjectsApi) -> None:
    core = k8s.CoreV1Api(api)
    secret = core.create_namespaced_secret(NS, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s")))
    # The generic store's finalizeDelete (no ReturnDeletedObject): a Status, Success, with details.
    raw = core.delete_namespaced_secret("s", NS, _preload_content=False)
    status = json.loads(raw.data)
    assert (status["kind"], status["status"]) == ("Status", "Success")
    assert status["details"] == {"name": "s", "kind": "secrets", "uid": secret.metadata.uid}  # group "" omitted
    # One a finalizer holds is answered with the object, from every store.
    core.create_namespaced_secret(NS, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="held", finalizers=["x/y"])))
    held = json.loads(core.delete_namespaced_secret("held", NS, _preload_content=False).data)
    assert held["kind"] == "Secret" and held["metadata"]["deletionTimestamp"]
    # A custom resource's too: a real v1.37 server answers its delete with the same Status (tests/real/
    # test_fidelity.py measured it; the fake returned the deleted object before).
    uid = create(custom, "a")["metadata"]["uid"]
    gone = custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a")
    assert (gone["kind"], gone["status"]) == ("Status", "Success")
    assert gone["details"] == {"name": "a", "group": GROUP, "kind": PLURAL, "uid": uid}


def test_a_table_of_sandboxes_has_the_crds_printer_columns(kenv: dict[str, str], custom: k8s.CustomObjectsApi,
                                                           cluster: FakeCluster) -> None:
    """A real server prints a custom resource with its CRD's additionalPrinterColumns (the CRD's table
    convertor): Name, then Phase, Node and Age for a Sandbox. The fake printed Name, Phase, Age for every kind."""
    from jr2_actors.fake.apiserver import discovery
    from jr2_actors.kube.kinds import SANDBOX

    create(custom, "a")
    custom.patch_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, "a",
                                                 {"status": {"phase": "Pending", "node": "n-7"}})
    obj = get(custom, "a")
    doc = discovery.table(SANDBOX, [obj], obj["metadata"]["resourceVersion"], cluster.clock.wall())
    assert [c["name"] for c in doc["columnDefinitions"]] == ["Name", "Phase", "Node", "Age"]
    assert doc["rows"][0]["cells"][:3] == ["a", "Pending", "n-7"]
    if KUBECTL is not None:  # and kubectl prints them so
        out = kubectl(kenv, "get", "sandboxes.core.jr2.dev")
        assert out.stdout.split("\n")[0].split() == ["NAME", "PHASE", "NODE", "AGE"], out.stdout
        assert out.stdout.split("\n")[1].split()[:3] == ["a", "Pending", "n-7"]


def test_the_openapi_document_carries_the_crds_schema_for_kubectl_explain(kenv: dict[str, str]) -> None:
    """A real server publishes a CRD's openAPIV3Schema under /openapi/v3; the fake published an object that
    kept unknown fields, so `kubectl explain sandboxes.spec.port` said `field "port" does not exist`."""
    from jr2_actors.fake.apiserver import discovery

    doc = discovery.openapi_v3(f"apis/{GROUP}/{VERSION}")
    assert doc is not None
    sandbox = next(s for s in doc["components"]["schemas"].values()
                   if s["x-kubernetes-group-version-kind"][0]["kind"] == "Sandbox")
    assert sandbox["properties"]["spec"]["properties"]["port"]["type"] == "integer"
    if KUBECTL is not None:
        out = kubectl(kenv, "explain", "sandboxes.spec.port")
        assert out.returncode == 0 and "FIELD: port <integer>" in out.stdout, out.stderr
