"""KubeClient single calls, against `responses` (one call each; watches belong to a loopback server)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import requests
import responses
import urllib3.exceptions
from responses import matchers

from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import JR2_KINDS, SANDBOX
from jr2_actors.values.errors import ClusterAccessError, KubeError, KubeProtocolError, KubeTransportError

READ_TIMEOUT = urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out")  # type: ignore[arg-type]
BASE = "https://kube.test:6443"
SANDBOXES = f"{BASE}/apis/core.jr2.dev/v1alpha1/namespaces/jr2/sandboxes"


def client(token: str | None = "inline", token_file: str | None = None, **kw: Any) -> KubeClient:
    access = ClusterAccess(server=BASE, namespace="jr2", source="test", token=token, token_file=token_file)
    return KubeClient(access, **kw)


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": message,
            "code": code}


@responses.activate
def test_get_404_is_none_and_other_errors_raise() -> None:
    responses.get(f"{SANDBOXES}/gone", status=404, json=status(404, "NotFound", 'sandboxes "gone" not found'))
    responses.get(f"{SANDBOXES}/denied", status=403, json=status(403, "Forbidden", "no"))
    c = client()
    assert c.get(SANDBOX, "gone") is None
    with pytest.raises(KubeError) as err:
        c.get(SANDBOX, "denied")
    assert (err.value.status, err.value.reason, err.value.message) == (403, "Forbidden", "no")


@responses.activate
def test_non_json_error_body_still_a_kube_error() -> None:
    responses.get(SANDBOXES, status=502, body="<html>bad gateway</html>", content_type="text/html")
    with pytest.raises(KubeError) as err:
        client().list(SANDBOX)
    assert err.value.status == 502
    assert "bad gateway" in err.value.message


@responses.activate
def test_retry_after_is_kept_on_429() -> None:
    responses.get(SANDBOXES, status=429, json=status(429, "TooManyRequests", "slow down"),
                  headers={"Retry-After": "3"})
    with pytest.raises(KubeError) as err:
        client().list(SANDBOX)
    assert err.value.retry_after == 3.0


@responses.activate
@pytest.mark.parametrize(("retry_after", "date", "expected"), [
    ("Wed, 21 Oct 2026 07:28:09 GMT", "Wed, 21 Oct 2026 07:28:00 GMT", 9.0),  # an HTTP-date, from the Date
    ("Wed, 21 Oct 2026 07:27:00 GMT", "Wed, 21 Oct 2026 07:28:00 GMT", 0.0),  # a date gone by: at once
    ("Wed, 21 Oct 2026 09:28:00 GMT", "Wed, 21 Oct 2026 07:28:00 GMT", None),  # past the hour's bound
    ("soon", "Wed, 21 Oct 2026 07:28:00 GMT", None),  # neither form: the caller's own backoff
    ("-4", "Wed, 21 Oct 2026 07:28:00 GMT", None),
])
def test_retry_after_as_an_http_date_counts_from_the_answer_s_date(retry_after: str, date: str,
                                                                   expected: float | None) -> None:
    responses.get(SANDBOXES, status=503, json=status(503, "ServiceUnavailable", "later"),
                  headers={"Retry-After": retry_after, "Date": date})
    with pytest.raises(KubeError) as err:
        client().list(SANDBOX)
    assert err.value.retry_after == expected


@responses.activate
def test_list_returns_items_and_collection_version() -> None:
    responses.get(SANDBOXES, json={"kind": "SandboxList", "metadata": {"resourceVersion": "77"},
                                   "items": [{"metadata": {"name": "a"}}]},
                  match=[matchers.query_param_matcher({"labelSelector": "jr2.dev/run"})])
    result = client().list(SANDBOX, label_selector="jr2.dev/run")
    assert result.resource_version == "77"
    assert [i["metadata"]["name"] for i in result.items] == ["a"]


@responses.activate
@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'{"items": []}', b'{"items": [1], "metadata": {"resourceVersion": "1"}}',
     b'{"items": [], "metadata": {}}', b"[" * 100_000],
)
def test_malformed_list_answers_are_protocol_errors(body: bytes) -> None:
    responses.get(SANDBOXES, body=body)
    with pytest.raises(KubeProtocolError):
        client().list(SANDBOX)


@responses.activate
def test_oversized_answer_is_refused() -> None:
    responses.get(f"{SANDBOXES}/big", body=b'{"pad": "' + b"x" * 20_000 + b'"}')
    with pytest.raises(KubeProtocolError, match="larger than"):
        client(max_body_bytes=10_000).get(SANDBOX, "big")


def test_401_rereads_rotated_token_file_and_retries_once(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")
    seen: list[str] = []

    def answer(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") == "Bearer old":
            token.write_text("new\n")  # the kubelet rotates the file while the request is out
            return 401, {}, json.dumps(status(401, "Unauthorized", "Unauthorized"))
        return 200, {}, json.dumps({"metadata": {"name": "ws-1"}})

    with responses.RequestsMock() as mock:
        mock.add_callback(responses.GET, f"{SANDBOXES}/ws-1", callback=answer)
        assert client(token=None, token_file=str(token)).get(SANDBOX, "ws-1") == {"metadata": {"name": "ws-1"}}
    assert seen == ["Bearer old", "Bearer new"]


def test_second_401_is_the_answer(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    with responses.RequestsMock() as mock:
        mock.get(f"{SANDBOXES}/ws-1", status=401, json=status(401, "Unauthorized", "Unauthorized"))
        with pytest.raises(KubeError) as err:
            client(token=None, token_file=str(token)).get(SANDBOX, "ws-1")
        assert err.value.status == 401
        assert len(mock.calls) == 2


@responses.activate
def test_inline_token_401_is_not_retried() -> None:
    responses.get(f"{SANDBOXES}/ws-1", status=401, json=status(401, "Unauthorized", "Unauthorized"))
    with pytest.raises(KubeError):
        client().get(SANDBOX, "ws-1")
    assert len(responses.calls) == 1


def test_token_file_is_read_on_every_request(tmp_path: Path) -> None:
    token = tmp_path / "token"
    c = client(token=None, token_file=str(token))
    with responses.RequestsMock() as mock:
        mock.get(f"{SANDBOXES}/ws-1", json={"metadata": {}})
        for value in ("one", "two", "three"):
            token.write_text(value)
            c.get(SANDBOX, "ws-1")
        assert [call.request.headers["Authorization"] for call in mock.calls] == [
            "Bearer one", "Bearer two", "Bearer three"]


def test_missing_token_file_is_an_access_error_without_the_token(tmp_path: Path) -> None:
    c = client(token=None, token_file=str(tmp_path / "absent"))
    with pytest.raises(ClusterAccessError, match="absent"):
        c.get(SANDBOX, "ws-1")


@responses.activate
@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (requests.exceptions.ConnectionError("refused"), "connection"),
        (requests.exceptions.ConnectionError(READ_TIMEOUT), "read-timeout"),
        (requests.exceptions.ReadTimeout("slow"), "read-timeout"),
        (requests.exceptions.ConnectTimeout("no route"), "connect"),
        (requests.exceptions.SSLError("bad cert"), "tls"),
    ],
)
def test_transport_errors_are_distinct_from_api_errors(raised: Exception, kind: str) -> None:
    responses.get(f"{SANDBOXES}/ws-1", body=raised)
    with pytest.raises(KubeTransportError) as err:
        client().get(SANDBOX, "ws-1")
    assert err.value.kind == kind
    assert not isinstance(err.value, KubeError)


@responses.activate
def test_a_token_never_appears_in_errors() -> None:
    responses.get(f"{SANDBOXES}/ws-1", status=500, body="boom")
    with pytest.raises(KubeError) as err:
        client(token="s3cr3t-token").get(SANDBOX, "ws-1")
    assert "s3cr3t-token" not in str(err.value)


def test_write_cap_is_bounded() -> None:
    for bad in (7, 17):
        with pytest.raises(ValueError, match="8–16"):
            client(write_cap=bad)
    for good in (8, 16):
        assert client(write_cap=good).writes.capacity == good


def test_inline_tls_material_is_written_privately_and_removed(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    access = ClusterAccess(server=BASE, namespace="jr2", source="t", ca_data=b"CA", client_cert_data=b"C",
                           client_key_data=b"K")
    c = KubeClient(access)
    written = {p.name: p for p in tmp_path.glob("jr2-kube-*/*")}
    assert {name: p.read_bytes() for name, p in written.items()} == {"ca.crt": b"CA", "client.crt": b"C",
                                                                     "client.key": b"K"}
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in written.values())
    c.close()
    assert list(tmp_path.iterdir()) == []


def test_there_is_no_pod_kind() -> None:
    assert all(k.plural != "pods" for k in JR2_KINDS)
    assert not any("pod" in name.lower() for name in dir(KubeClient))
