"""Issue 20 item 3: Events, core/v1 and events.k8s.io/v1, as operators post them and `kubectl describe` reads
them — through the official client and kubectl, each behaviour checked against what a kube-apiserver does
(pkg/registry/core/event, pkg/apis/core/validation/events.go, pkg/apis/events/v1/conversion.go)."""

from __future__ import annotations

import json
import queue
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException

from jr2_actors.fake.apiserver.kinds import EVENT
from jr2_actors.fake.cluster import FakeCluster
from tests.support.kube_clients import create, kubectl, needs_kubectl
from tests.support.waiting import wait_until

NS = "jr2"
NOW = "2026-12-01T10:00:00.123456Z"


def kopf_event(sandbox: dict[str, Any], reason: str, message: str, **extra: Any) -> dict[str, Any]:
    """The body kopf posts for each handler (kopf/_core/engines/posting.py): generateName, eventTime,
    reporting fields, a source for `kubectl describe`'s From column, and the object's full reference."""
    meta = sandbox["metadata"]
    return {"metadata": {"namespace": NS, "generateName": "kopf-event-"}, "action": "Action", "type": "Normal",
            "reason": reason, "message": message, "reportingComponent": "kopf", "reportingInstance": "dev",
            "source": {"component": "kopf"},
            "involvedObject": {"apiVersion": sandbox["apiVersion"], "kind": sandbox["kind"], "name": meta["name"],
                               "uid": meta["uid"], "namespace": meta["namespace"]},
            "firstTimestamp": NOW, "lastTimestamp": NOW, "eventTime": NOW, **extra}


def test_kopfs_event_is_created_listed_and_selected_as_kubectl_describe_selects(
        api: k8s.ApiClient, custom: k8s.CustomObjectsApi) -> None:
    core = k8s.CoreV1Api(api)
    a, b = create(custom, "a"), create(custom, "b")
    posted = core.create_namespaced_event(NS, kopf_event(a, "Logging", "Handler 'create' succeeded."))
    core.create_namespaced_event(NS, kopf_event(b, "Logging", "another object's"))
    assert posted.metadata.name.startswith("kopf-event-") and posted.metadata.resource_version
    assert posted.metadata.generation is None  # the Event strategy sets none
    # metav1.Time keeps seconds, metav1.MicroTime microseconds, both UTC.
    raw = json.loads(core.read_namespaced_event(posted.metadata.name, NS, _preload_content=False).data)
    assert (raw["firstTimestamp"], raw["eventTime"]) == ("2026-12-01T10:00:00Z", "2026-12-01T10:00:00.123456Z")
    # `kubectl describe` lists an object's events by these four fields (EventInterface.GetFieldSelector).
    selector = (f"involvedObject.kind=Sandbox,involvedObject.name=a,involvedObject.namespace={NS},"
                f"involvedObject.uid={a['metadata']['uid']}")
    listed = core.list_namespaced_event(NS, field_selector=selector, limit=500)
    assert [e.message for e in listed.items] == ["Handler 'create' succeeded."]
    assert [e.message for e in core.list_namespaced_event(NS, field_selector="involvedObject.name!=a").items] == [
        "another object's"]
    assert len(core.list_namespaced_event(NS, field_selector="source=kopf,type=Normal,reason=Logging").items) == 2
    with pytest.raises(ApiException) as err:
        core.list_namespaced_event(NS, field_selector="note=x")  # events.k8s.io's name, not core/v1's
    assert err.value.status == 400 and "field label not supported: note" in err.value.body


def test_the_same_events_through_events_k8s_io(api: k8s.ApiClient, custom: k8s.CustomObjectsApi) -> None:
    core, events = k8s.CoreV1Api(api), k8s.EventsV1Api(api)
    a = create(custom, "a")
    posted = core.create_namespaced_event(NS, kopf_event(a, "Logging", "from core"))
    # One stored kind, two views (pkg/apis/events/v1/conversion.go): involvedObject is regarding, message note.
    seen = events.read_namespaced_event(posted.metadata.name, NS)
    assert (seen.regarding.name, seen.note, seen.reporting_controller) == ("a", "from core", "kopf")
    assert seen.deprecated_source.component == "kopf"
    created = events.create_namespaced_event(NS, {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "ev-1"},
        "eventTime": datetime(2026, 12, 1, 10, 0, tzinfo=UTC).isoformat(), "type": "Warning",
        "reason": "Failed", "action": "Reconcile", "note": "from events.k8s.io", "reportingController": "jr2.dev/op",
        "reportingInstance": "op-1", "regarding": {"kind": "Sandbox", "name": "a", "namespace": NS}})
    assert created.metadata.name == "ev-1"
    assert core.read_namespaced_event("ev-1", NS).message == "from events.k8s.io"
    # Field labels of events.k8s.io map onto core/v1's (AddFieldLabelConversionsForEvent).
    names = [e.metadata.name for e in events.list_namespaced_event(NS, field_selector="regarding.name=a,type=Warning")
             .items]
    assert names == ["ev-1"]
    # A series update through events.k8s.io, as client-go's event recorder patches it.
    patched = events.patch_namespaced_event("ev-1", NS, {"series": {"count": 2, "lastObservedTime": NOW}})
    assert patched.series.count == 2
    # ValidateEventUpdate through events.k8s.io/v1: only the series may change.
    with pytest.raises(ApiException) as err:
        events.patch_namespaced_event("ev-1", NS, {"note": "rewritten"})
    assert err.value.status == 422 and "message: Invalid value" in err.value.body
    # A built-in kind's immediate delete: a Status naming it, its group included.
    status = json.loads(events.delete_namespaced_event("ev-1", NS, _preload_content=False).data)
    assert (status["status"], status["details"]["group"], status["details"]["kind"]) == (
        "Success", "events.k8s.io", "events")


@pytest.mark.parametrize(("body", "field"), [
    # legacyValidateEvent, on every version: an eventTime event needs its reporting fields ...
    ({"eventTime": NOW, "reason": "R", "action": "A", "reportingInstance": "i"}, "reportingController"),
    ({"eventTime": NOW, "reason": "R", "reportingComponent": "c", "reportingInstance": "i"}, "action"),
    # ... and an event's namespace is its object's.
    ({"involvedObject": {"kind": "Sandbox", "name": "a", "namespace": "elsewhere"}}, "involvedObject.namespace"),
])
def test_core_v1_validation_is_the_servers(api: k8s.ApiClient, body: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiException) as err:
        k8s.CoreV1Api(api).create_namespaced_event(NS, {"metadata": {"name": "e"},
                                                        "involvedObject": {"namespace": NS}, **body})
    assert err.value.status == 422
    doc = json.loads(err.value.body)
    assert doc["message"].startswith('Event "e" is invalid: ')
    assert field in [c["field"] for c in doc["details"]["causes"]]


def test_an_old_style_core_event_needs_little_and_a_bad_time_is_400(api: k8s.ApiClient,
                                                                   cluster: FakeCluster) -> None:
    core = k8s.CoreV1Api(api)
    # No eventTime: only the namespaces must agree (client-go's old recorder, `kubectl` of old).
    made = core.create_namespaced_event(NS, {"metadata": {"name": "sandbox.a.17f0"}, "reason": "Started",
                                             "involvedObject": {"kind": "Sandbox", "name": "a", "namespace": NS}})
    assert made.reporting_component == "" and made.source.component is None and made.event_time is None
    # A time that is not one cannot be decoded: 400, not 422 (raw: the client's model refuses to send it).
    assert post(cluster, f"/api/v1/namespaces/{NS}/events", {"metadata": {"name": "t"}, "firstTimestamp": "yesterday",
                                                             "involvedObject": {"namespace": NS}}).status_code == 400


def post(cluster: FakeCluster, path: str, body: dict[str, Any]) -> requests.Response:
    return send(cluster, "POST", path, body)


def send(cluster: FakeCluster, method: str, path: str, body: dict[str, Any],
         content_type: str = "application/json") -> requests.Response:
    """Raw HTTPS, for what the official client's models refuse to send or cannot choose."""
    assert cluster.tls is not None
    return requests.request(method, cluster.url + path, data=json.dumps(body), verify=cluster.tls.ca_file,
                            headers={"Authorization": f"Bearer {cluster.token}", "Content-Type": content_type},
                            timeout=10)


@pytest.mark.parametrize(("body", "field"), [
    ({}, "eventTime"),
    ({"eventTime": NOW, "type": "Odd"}, "type"),
    ({"eventTime": NOW, "deprecatedCount": 3}, "count"),
    ({"eventTime": NOW, "series": {"count": 1, "lastObservedTime": NOW}}, "series.count"),
])
def test_events_k8s_io_creates_are_checked_strictly(cluster: FakeCluster, body: dict[str, Any], field: str) -> None:
    # Raw HTTPS: the official client's own model refuses some of these before sending them.
    base = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}, "type": "Normal",
            "reason": "R", "action": "A", "reportingController": "c", "reportingInstance": "i",
            "regarding": {"namespace": NS}}
    resp = post(cluster, f"/apis/events.k8s.io/v1/namespaces/{NS}/events", {**base, **body})
    assert resp.status_code == 422, resp.text
    assert field in [c["field"] for c in resp.json()["details"]["causes"]]


def test_a_watch_on_events_sees_them_in_either_view(api: k8s.ApiClient, custom: k8s.CustomObjectsApi,
                                                    cluster: FakeCluster) -> None:
    core, events = k8s.CoreV1Api(api), k8s.EventsV1Api(api)
    a = create(custom, "a")
    got: queue.Queue[tuple[str, str, str | None]] = queue.Queue()
    watches = [watch.Watch(), watch.Watch()]
    opened = cluster.watch_stats()["opened"]

    def run(w: watch.Watch, list_fn: Any, **kw: Any) -> None:
        for event in w.stream(list_fn, NS, timeout_seconds=10, **kw):
            obj = event["object"]
            got.put((list_fn.__self__.__class__.__name__, event["type"], getattr(obj, "message", None)
                     or getattr(obj, "note", None)))

    threads = [threading.Thread(target=run, args=(watches[0], core.list_namespaced_event),
                                kwargs={"field_selector": "involvedObject.name=a"}, daemon=True),
               threading.Thread(target=run, args=(watches[1], events.list_namespaced_event), daemon=True)]
    for t in threads:
        t.start()
    wait_until(lambda: cluster.watch_stats()["opened"] >= opened + 2, what="both event watches to open")
    core.create_namespaced_event(NS, kopf_event(create(custom, "b"), "Logging", "not a's"))
    core.create_namespaced_event(NS, kopf_event(a, "Logging", "watched"))
    seen = [got.get(timeout=10) for _ in range(3)]
    cluster.end_watches()  # each stream ends cleanly and, with a timeout given, the client does not reopen it
    for t in threads:
        t.join(10)
    assert got.empty()  # the field selector kept b's event from the core watch
    assert sorted(seen) == [("CoreV1Api", "ADDED", "watched"), ("EventsV1Api", "ADDED", "not a's"),
                            ("EventsV1Api", "ADDED", "watched")]


def test_discovery_lists_events_in_both_groups(api: k8s.ApiClient) -> None:
    core = [r for r in k8s.CoreV1Api(api).get_api_resources().resources if r.name == "events"]
    assert core and core[0].kind == "Event" and core[0].namespaced and "watch" in core[0].verbs
    groups = {g.name: g.preferred_version.group_version for g in k8s.ApisApi(api).get_api_versions().groups}
    assert groups["events.k8s.io"] == "events.k8s.io/v1"
    assert [r.name for r in k8s.EventsV1Api(api).get_api_resources().resources] == ["events"]


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_describe_shows_the_objects_events(kenv: dict[str, str], api: k8s.ApiClient,
                                                   custom: k8s.CustomObjectsApi) -> None:
    core = k8s.CoreV1Api(api)
    a = create(custom, "a")
    core.create_namespaced_event(NS, kopf_event(a, "Logging", "Handler 'create_fn' succeeded."))
    core.create_namespaced_event(NS, kopf_event(create(custom, "b"), "Logging", "not a's"))
    described = kubectl(kenv, "describe", "sandboxes.core.jr2.dev", "a")
    assert described.returncode == 0, described.stderr
    events = described.stdout.partition("Events:")[2]
    assert "Handler 'create_fn' succeeded." in events and "kopf" in events and "not a's" not in events
    listed = kubectl(kenv, "get", "events")
    assert listed.returncode == 0, listed.stderr
    assert "sandbox/a" in listed.stdout and "LAST SEEN" in listed.stdout


def test_a_put_creates_a_missing_event_and_built_in_patch_types_apply(cluster: FakeCluster) -> None:
    # The Event strategy allows create on update (201), and Events are a built-in kind in both groups, so a
    # strategic merge patch and server-side apply are taken through events.k8s.io as through core/v1.
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "reason": "Started",
            "involvedObject": {"kind": "Sandbox", "name": "a", "namespace": NS}}
    core = f"/api/v1/namespaces/{NS}/events/e"
    put = send(cluster, "PUT", core, body)
    assert put.status_code == 201, put.text
    assert send(cluster, "PUT", core, put.json()).status_code == 200
    v1 = f"/apis/events.k8s.io/v1/namespaces/{NS}/events/e"
    smp = send(cluster, "PATCH", v1, {"metadata": {"labels": {"a": "b"}}}, "application/strategic-merge-patch+json")
    assert smp.status_code == 200, smp.text
    assert smp.json()["metadata"]["labels"] == {"a": "b"} and smp.json()["regarding"]["name"] == "a"
    applied = send(cluster, "PATCH", v1 + "?fieldManager=op", {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "labels": {"c": "d"}}},
        "application/apply-patch+yaml")
    assert applied.status_code == 200, applied.text
    assert applied.json()["metadata"]["labels"] == {"a": "b", "c": "d"}
    assert applied.json()["reason"] == "Started" and "note" not in applied.json()  # the rest kept


@pytest.mark.parametrize(("path", "body"), [
    (f"/api/v1/namespaces/{NS}/events", {"metadata": {"name": "h"}, "involvedObject": "a string"}),
    (f"/api/v1/namespaces/{NS}/events", {"metadata": {"name": "h"}, "count": True, "involvedObject": {}}),
    (f"/api/v1/namespaces/{NS}/events", {"metadata": {"name": "h"}, "reason": ["R"], "involvedObject": {}}),
    (f"/apis/events.k8s.io/v1/namespaces/{NS}/events", {"metadata": {"name": "h"}, "regarding": 7}),
    (f"/apis/events.k8s.io/v1/namespaces/{NS}/events", {"metadata": {"name": "h"}, "eventTime": {"t": 1}}),
])
def test_a_field_of_the_wrong_type_is_400_naming_it(cluster: FakeCluster, path: str, body: dict[str, Any]) -> None:
    # The decoder cannot read such a body as an Event: 400 BadRequest, the field named, nothing stored.
    resp = post(cluster, path, body)
    assert resp.status_code == 400, resp.text
    assert next(iter(k for k in body if k != "metadata")) in resp.json()["message"]
    assert cluster.call(lambda s: s.exists(EVENT, NS, "h")) is False
