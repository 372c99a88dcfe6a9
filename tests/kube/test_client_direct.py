"""The writes on urllib3 straight (`kube/direct.py`) — the Lease's merge patch, the server-side apply, the
create and the delete — against the loopback server: what a requests call gave — the headers, the errors, the
size cap, the 401 retry, the Cut — they give too."""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SANDBOX, SECRET
from jr2_actors.values.errors import KubeError, KubeProtocolError, KubeTransportError
from tests.support.loopback_kube import Recorder, make_handler
from tests.support.waiting import WAIT

LEASE = {"metadata": {"uid": "u-1", "annotations": {"jr2.dev/keepalive": "2026-11-29T07:00:00.000Z"}}}
SANDBOXES = "/apis/core.jr2.dev/v1alpha1/namespaces/jr2/sandboxes"


def _status(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
                       "message": message}).encode()


@pytest.mark.parametrize(("status_sub", "suffix"), [(False, ""), (True, "/status")])
def test_the_merge_patch_sends_its_path_content_type_token_and_body(
        server: tuple[Recorder, KubeClient], status_sub: bool, suffix: str) -> None:
    rec, client = server
    rec.patch_answers.append((200, b'{"metadata":{"name":"ws-1","resourceVersion":"7"}}'))
    answer = client.merge_patch(SANDBOX, "ws-1", LEASE, status=status_sub)
    assert answer == {"metadata": {"name": "ws-1", "resourceVersion": "7"}}
    path, headers, body = rec.patches[0]
    assert path == f"{SANDBOXES}/ws-1{suffix}"
    assert headers["Content-Type"] == "application/merge-patch+json"
    assert headers["Accept"] == "application/json" and headers["User-Agent"].startswith("jr2-actors/")
    assert headers["Content-Length"] == str(len(body)) and json.loads(body) == LEASE


@pytest.fixture
def token_server() -> Iterator[tuple[Recorder, KubeClient, Path]]:
    rec = Recorder()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(rec))
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        token = Path(tmp) / "token"
        token.write_text("old\n")
        access = ClusterAccess(server=f"http://127.0.0.1:{srv.server_address[1]}", namespace="jr2", source="t",
                               token_file=str(token))
        client = KubeClient(access, read_timeout=WAIT)
        try:
            yield rec, client, token
        finally:
            rec.release.set()
            client.close()
            srv.shutdown()
            srv.server_close()


def test_a_401_re_reads_the_token_file_and_retries_once(token_server: tuple[Recorder, KubeClient, Path]) -> None:
    rec, client, token = token_server
    rec.patch_answers += [(401, _status(401, "Unauthorized", "expired")), (200, b'{"metadata":{}}')]
    assert client.merge_patch(SANDBOX, "ws-1", LEASE) == {"metadata": {}}
    assert [h["Authorization"] for _, h, _ in rec.patches] == ["Bearer old", "Bearer old"]
    token.write_text("new\n")  # rotated: the next call reads the file again, never a cached token
    rec.patch_answers.append((200, b'{"metadata":{}}'))
    client.merge_patch(SANDBOX, "ws-1", LEASE)
    assert rec.patches[-1][1]["Authorization"] == "Bearer new"
    rec.patch_answers += [(401, _status(401, "Unauthorized", "no")), (401, _status(401, "Unauthorized", "still no"))]
    with pytest.raises(KubeError) as err:
        client.merge_patch(SANDBOX, "ws-1", LEASE)
    assert (err.value.status, err.value.message) == (401, "still no") and len(rec.patches) == 5


def test_a_failure_answer_is_a_kube_error_with_its_status_and_the_connection_goes_on(
        server: tuple[Recorder, KubeClient]) -> None:
    rec, client = server
    rec.patch_answers += [(409, _status(409, "Conflict", "the uid precondition failed")),
                          (429, b"slow down"), (200, b'{"metadata":{}}')]
    with pytest.raises(KubeError) as err:
        client.merge_patch(SANDBOX, "ws-1", LEASE)
    assert (err.value.status, err.value.reason, err.value.message) == (409, "Conflict", "the uid precondition failed")
    with pytest.raises(KubeError) as err:
        client.merge_patch(SANDBOX, "ws-1", LEASE)
    assert (err.value.status, err.value.message) == (429, "slow down")  # not a Status: the body's text
    assert client.merge_patch(SANDBOX, "ws-1", LEASE) == {"metadata": {}}
    assert rec.connections == 1  # each answer read to its end: one connection carried all three


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'{"a":' * 100_000])
def test_an_answer_that_is_no_json_object_is_a_protocol_error(
        server: tuple[Recorder, KubeClient], body: bytes) -> None:
    rec, client = server
    rec.patch_answers.append((200, body))
    with pytest.raises(KubeProtocolError):
        client.merge_patch(SANDBOX, "ws-1", LEASE)


def test_an_answer_over_the_cap_is_refused_and_its_connection_never_reused(
        server: tuple[Recorder, KubeClient]) -> None:
    rec, client = server
    small = KubeClient(ClusterAccess(server=client.access.server, namespace="jr2", source="t"), max_body_bytes=1024)
    try:
        rec.patch_answers += [(200, b'{"pad":"' + b"x" * 200_000 + b'"}'), (200, b'{"metadata":{}}')]
        with pytest.raises(KubeProtocolError, match="larger than 1024"):
            small.merge_patch(SANDBOX, "ws-1", LEASE)
        assert small.merge_patch(SANDBOX, "ws-1", LEASE) == {"metadata": {}}
        assert rec.connections == 2  # the half-read answer's connection was closed, not given back
    finally:
        small.close()


def test_a_refused_connection_is_a_connect_error() -> None:
    client = KubeClient(ClusterAccess(server="http://127.0.0.1:1", namespace="jr2", source="t"), connect_timeout=2)
    with pytest.raises(KubeTransportError) as err:
        client.merge_patch(SANDBOX, "ws-1", LEASE)
    assert err.value.kind == "connect"
    client.close()


def test_the_merge_patch_shares_the_pool_with_every_other_call(server: tuple[Recorder, KubeClient]) -> None:
    """The direct path takes its connections from requests' own pool: a read after it reuses its connection."""
    rec, client = server
    rec.patch_answers.append((200, b'{"metadata":{}}'))
    client.merge_patch(SANDBOX, "ws-1", LEASE)
    assert client.get(SANDBOX, "read") == {"metadata": {"name": "read"}}
    assert rec.connections == 1


def _sent(rec: Recorder, i: int = 0) -> tuple[str, str, dict[str, str], dict[str, object]]:
    method, path, headers, body = rec.sent[i]
    return method, path, headers, json.loads(body)


def test_apply_sends_field_manager_force_and_apply_content_type(server: tuple[Recorder, KubeClient]) -> None:
    rec, client = server
    rec.patch_answers.append((200, b'{"metadata":{"name":"ws-1","uid":"u-1"}}'))
    answer = client.apply(SANDBOX, "ws-1", {"spec": {"port": 8080}})
    assert answer["metadata"]["uid"] == "u-1"
    method, path, headers, sent = _sent(rec)
    assert (method, path) == ("PATCH", f"{SANDBOXES}/ws-1?fieldManager=jr2&force=true")
    assert headers["Content-Type"] == "application/apply-patch+yaml"
    assert sent == {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", "metadata": {"name": "ws-1"},
                    "spec": {"port": 8080}}


def test_delete_absent_counts_as_success(server: tuple[Recorder, KubeClient]) -> None:
    rec, client = server
    rec.patch_answers += [(200, b'{"kind":"Status","status":"Success"}'), (404, _status(404, "NotFound", "gone"))]
    assert client.delete(SECRET, "here") is True
    assert client.delete(SECRET, "gone") is False
    method, path, _, sent = _sent(rec)
    assert (method, path) == ("DELETE", "/api/v1/namespaces/jr2/secrets/here")
    assert sent["propagationPolicy"] == "Background"


def test_delete_names_what_it_deletes_by_uid_and_version(server: tuple[Recorder, KubeClient]) -> None:
    rec, client = server
    rec.patch_answers.append((200, b'{"kind":"Status","status":"Success"}'))
    assert client.delete(SANDBOX, "ws-1", uid="u-1", resource_version="41") is True
    _, _, headers, sent = _sent(rec)
    assert sent["preconditions"] == {"uid": "u-1", "resourceVersion": "41"}
    assert sent["kind"] == "DeleteOptions" and sent["propagationPolicy"] == "Background"
    assert headers["Content-Type"] == "application/json"


def test_delete_without_preconditions_sends_none(server: tuple[Recorder, KubeClient]) -> None:
    rec, client = server
    rec.patch_answers.append((200, b'{"kind":"Status","status":"Success"}'))
    client.delete(SANDBOX, "ws-1")
    assert "preconditions" not in _sent(rec)[3]


def test_a_delete_whose_precondition_fails_raises_the_servers_409(server: tuple[Recorder, KubeClient]) -> None:
    rec, client = server
    message = ('Operation cannot be fulfilled on sandboxes.core.jr2.dev "ws-1": Precondition failed: '
               "UID in precondition: u-old, UID in object meta: u-new")
    rec.patch_answers.append((409, _status(409, "Conflict", message)))
    with pytest.raises(KubeError) as err:
        client.delete(SANDBOX, "ws-1", uid="u-old")
    assert (err.value.status, err.value.reason) == (409, "Conflict")
    assert "u-new" in err.value.message
    assert _sent(rec)[3]["preconditions"] == {"uid": "u-old"}


def test_error_status_decoded_with_reason_and_message(server: tuple[Recorder, KubeClient]) -> None:
    rec, client = server
    rec.patch_answers.append((409, _status(409, "AlreadyExists", 'sandboxes.core.jr2.dev "ws-1" already exists')))
    with pytest.raises(KubeError) as err:
        client.create(SANDBOX, {"metadata": {"name": "ws-1"}})
    e = err.value
    assert e.status == 409
    assert e.reason == "AlreadyExists"
    assert "already exists" in e.message
    assert e.method == "POST" and e.path.endswith("/sandboxes")
    method, path, headers, sent = _sent(rec)
    assert (method, path, headers["Content-Type"]) == ("POST", SANDBOXES, "application/json")
    assert sent == {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", "metadata": {"name": "ws-1"}}
