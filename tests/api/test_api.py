"""The Orchestrator's API (CONTRACTS.md §4) through a real HTTP client against a real listening server:
every route, every error code, the token checks, the body cap, the event stream and its resume."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import requests

from jr2_actors.api.app import MAX_BODY_BYTES, Api
from jr2_actors.api.server import ApiServer
from jr2_actors.api.sse import decode
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick, Say
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.values.run_ids import Keyed
from jr2_actors.values.workflow import read_document
from tests.support.backends import QuietBackend
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
TOKEN = "t0ken-for-the-api-tests-0123456789"
WORKFLOW = one_state("api")


class Served:
    def __init__(self, orchestrator: Orchestrator, cluster: FakeCluster, server: ApiServer) -> None:
        self.orchestrator = orchestrator
        self.cluster = cluster
        self.server = server
        self.url = server.url

    def call(self, method: str, path: str, *, token: str | None = TOKEN, **kw: Any) -> requests.Response:
        headers = dict(kw.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return requests.request(method, self.url + path, headers=headers, timeout=10, **kw)

    def submit(self) -> str:
        resp = self.call("POST", "/runs", json={"workflow": read_document(WORKFLOW)})
        assert resp.status_code == 201, resp.text
        return str(resp.json()["runId"])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None) as cluster:
        client = cluster.client()
        with Orchestrator(client, state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key) as orch:
            server = ApiServer(Api(orch, TOKEN, heartbeat=0.2, max_streams=2), timeout=2.0)
            server.start()
            try:
                yield Served(orch, cluster, server)
            finally:
                server.stop()
        client.close()


def sse(resp: requests.Response) -> Iterator[dict[str, Any]]:
    return decode(raw or "" for raw in resp.iter_lines(decode_unicode=True))


def test_healthz_and_metrics_are_open(served: Served) -> None:
    wait_until(lambda: served.call("GET", "/healthz", token=None).status_code == 200, what="ready: the watch listed")
    health = served.call("GET", "/healthz", token=None)
    assert health.status_code == 200 and health.json()["ok"] is True and health.json()["version"]
    metrics = served.call("GET", "/metrics", token=None)
    assert metrics.status_code == 200 and metrics.headers["Content-Type"].startswith("text/plain")
    assert "jr2_actor_mailbox_depth" in metrics.text


@pytest.mark.parametrize("header", [None, "Bearer wrong-token-of-the-same-sort-000", "Basic " + TOKEN, "Bearer",
                                    f"bearer {TOKEN}x"])
def test_anything_but_the_instance_token_is_a_bare_401(served: Served, header: str | None) -> None:
    headers = {"Authorization": header} if header is not None else {}
    for method, path in (("GET", "/runs"), ("POST", "/runs"), ("GET", "/runs/r-1"), ("GET", "/runs/r-1/events"),
                         ("POST", "/runs/r-1/cancel")):
        resp = served.call(method, path, token=None, headers=headers)
        assert resp.status_code == 401 and resp.json() == {"error": "unauthorized"}, (method, path)


def test_the_token_scheme_is_case_blind(served: Served) -> None:
    resp = served.call("GET", "/runs", token=None, headers={"Authorization": f"bearer {TOKEN}"})
    assert resp.status_code == 200


def test_a_run_is_submitted_listed_read_followed_and_found_after_it_ends(served: Served) -> None:
    served.cluster.script("worker", [Say("on it"), Pick("finish")])
    run_id = served.submit()
    assert served.orchestrator.wait_finished(run_id, 30)
    status = served.call("GET", f"/runs/{run_id}")
    assert status.status_code == 200
    doc = status.json()
    assert {k: doc[k] for k in ("runId", "workflow", "status", "state")} == {
        "runId": run_id, "workflow": "api", "status": "done", "state": "done"}
    assert served.call("GET", "/runs").json() == {"runs": []}  # live runs only
    with served.call("GET", f"/runs/{run_id}/events", stream=True) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        events = list(sse(resp))
    assert events[0]["kind"] == "started" and events[-1]["kind"] == "ended"
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)


def test_the_event_stream_resumes_after_last_event_id(served: Served) -> None:
    served.cluster.script("worker", [Say("one"), Say("two"), Pick("finish")])
    run_id = served.submit()
    assert served.orchestrator.wait_finished(run_id, 30)
    with served.call("GET", f"/runs/{run_id}/events", stream=True) as resp:
        every = list(sse(resp))
    middle = every[len(every) // 2]["id"]
    with served.call("GET", f"/runs/{run_id}/events", stream=True, headers={"Last-Event-ID": str(middle)}) as resp:
        rest = list(sse(resp))
    assert [e["id"] for e in rest] == [e["id"] for e in every if e["id"] > middle]
    with served.call("GET", f"/runs/{run_id}/events?lastEventId={middle}", stream=True) as resp:
        assert [e["id"] for e in sse(resp)] == [e["id"] for e in rest]
    bad = served.call("GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": "abc"})
    assert bad.status_code == 400


def test_a_live_run_streams_as_it_happens_and_ends_with_the_run(served: Served) -> None:
    served.cluster.script("worker", [Say("working"), Hang()])
    run_id = served.submit()
    seen: list[dict[str, Any]] = []
    with served.call("GET", f"/runs/{run_id}/events", stream=True) as resp:
        for event in sse(resp):
            seen.append(event)
            if event["kind"] == "said":
                assert served.call("POST", f"/runs/{run_id}/cancel").status_code == 202
    assert seen[-1]["kind"] == "ended" and seen[-1]["status"] == "cancelled"


def test_too_many_streams_are_refused_with_503(served: Served) -> None:
    served.cluster.script("worker", [Hang()])
    run_id = served.submit()
    first = served.call("GET", f"/runs/{run_id}/events", stream=True)
    second = served.call("GET", f"/runs/{run_id}/events", stream=True)
    try:
        third = served.call("GET", f"/runs/{run_id}/events")
        assert third.status_code == 503 and "too many" in third.json()["error"]
    finally:
        first.close()
        second.close()
    served.call("POST", f"/runs/{run_id}/cancel")


@pytest.mark.parametrize(
    ("body", "headers", "status", "key"),
    [
        (b"{not json", {"Content-Type": "application/json"}, 400, None),
        (b"[1, 2]", {"Content-Type": "application/json"}, 400, None),
        (b'{"workflow": {}}', {"Content-Type": "text/plain"}, 415, None),
        (b'{"colour": "blue", "workflow": {}}', {"Content-Type": "application/json"}, 400, "colour"),
        (b'{"input": {}}', {"Content-Type": "application/json"}, 400, "workflow"),
        (b'{"workflow": {"name": "x"}}', {"Content-Type": "application/json"}, 400, "workflow.start"),
        (b'{"workflow": {"name": "x", "start": "a", "states": {"a": {"final": "maybe"}}}}',
         {"Content-Type": "application/json"}, 400, "workflow.states.a.final"),
        (b'{"workflow": 7}', {"Content-Type": "application/json"}, 400, "workflow"),
        (b'{"workflow": {}, "input": 3}', {"Content-Type": "application/json"}, 400, "input"),
    ],
)
def test_a_bad_submission_is_a_400_naming_the_key(served: Served, body: bytes, headers: Mapping[str, str],
                                                  status: int, key: str | None) -> None:
    resp = served.call("POST", "/runs", data=body, headers=dict(headers))
    assert resp.status_code == status, resp.text
    if key is not None:
        assert resp.json()["key"] == key


def test_a_body_over_a_mebibyte_is_413_and_a_chunked_body_411(served: Served) -> None:
    big = b'{"workflow": "' + b"x" * MAX_BODY_BYTES + b'"}'
    declared = served.call("POST", "/runs", data=big, headers={"Content-Type": "application/json"})
    assert declared.status_code == 413

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 65536):
            yield big[i:i + 65536]

    chunked = served.call("POST", "/runs", data=chunks(), headers={"Content-Type": "application/json"})
    assert chunked.status_code == 411 and "Content-Length" in chunked.json()["error"]


def test_unknown_routes_are_404_and_wrong_methods_405(served: Served) -> None:
    assert served.call("GET", "/nowhere").status_code == 404
    assert served.call("GET", "/runs/r-x/nowhere").status_code == 404
    assert served.call("GET", "/runs/..%2Fetc").status_code == 404
    wrong = served.call("DELETE", "/runs")
    assert wrong.status_code == 405 and set(wrong.headers["Allow"].split(", ")) == {"GET", "POST"}
    assert served.call("POST", "/healthz", token=None).status_code == 405
    assert served.call("GET", "/runs/r-unknown").status_code == 404
    assert served.call("POST", "/runs/r-unknown/cancel").status_code == 404
    assert served.call("GET", "/runs/r-unknown/events").status_code == 404


def test_a_client_that_trickles_its_request_does_not_hold_a_worker(served: Served) -> None:
    host, port = served.server.address
    with socket.create_connection((host, port), timeout=10) as slow:
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and then nothing
        slow.settimeout(10)
        closed = threading.Event()

        def wait_for_close() -> None:
            try:
                while slow.recv(1024):
                    pass
            except OSError:
                pass
            closed.set()

        threading.Thread(target=wait_for_close, daemon=True).start()
        assert closed.wait(10), "the server kept an idle half-request open"
    assert served.call("GET", "/healthz", token=None).status_code == 200


class _Degraded(QuietBackend):
    """A Backend whose watch is degraded: /healthz must say 503 with the reason."""

    def submit(self, document: object, run_input: Mapping[str, Any] | None, *,
               keyed: Keyed | None = None) -> str:
        raise AssertionError("not called")

    def health(self) -> tuple[bool, str]:
        return False, "the Sandbox watch is degraded (12 failures in a row)"




def test_healthz_is_503_with_the_reason_when_the_orchestrator_is_not_healthy() -> None:
    server = ApiServer(Api(_Degraded(), TOKEN))
    server.start()
    try:
        resp = requests.get(server.url + "/healthz", timeout=10)
        assert resp.status_code == 503
        assert resp.json() == {"ok": False, "reason": "the Sandbox watch is degraded (12 failures in a row)"}
    finally:
        server.stop()


def test_a_busy_address_is_an_oserror_at_start() -> None:
    first = ApiServer(Api(_Degraded(), TOKEN))
    first.start()
    try:
        host, port = first.address
        with pytest.raises(OSError, match=r"(?i)address already in use"):
            ApiServer(Api(_Degraded(), TOKEN), host, port).start()
    finally:
        first.stop()


def test_the_wire_status_is_what_the_api_serves(served: Served) -> None:
    served.cluster.script("worker", [Hang()])
    run_id = served.submit()
    wait_until(lambda: (served.call("GET", f"/runs/{run_id}").json().get("turn") or {}).get("phase") == "running",
               what="the Turn running")
    doc = served.call("GET", f"/runs/{run_id}").json()
    assert doc["children"] == [{"child": "W", "phase": "running"}] and doc["waiting"] == []
    assert [r["runId"] for r in served.call("GET", "/runs").json()["runs"]] == [run_id]
    cancelled = served.call("POST", f"/runs/{run_id}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["runId"] == run_id
