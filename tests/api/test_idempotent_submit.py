"""Issue 19 item 4: `POST /runs` with an `Idempotency-Key` makes one run however often it is sent, and the
CLI sends one per submit, so a submit retried after its answer was lost never makes a second run."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
import requests

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiServer
from jr2_actors.values.errors import Unavailable
from jr2_actors.values.run_ids import Keyed
from jr2_actors.values.workflow import read_document
from tests.support.api_on_fake import api_on_fake
from tests.support.backends import QuietBackend
from tests.support.cli_process import jr2
from tests.support.workflows import one_state

TOKEN = "idempotency-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BODY = {"workflow": {"name": "w"}}


class Counting(QuietBackend):
    """A Backend that counts its submits; `hold` keeps a submit under way until set, `refuse` answers 503."""

    def __init__(self) -> None:
        self.submits = 0
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()
        self.refuse = False
        self.kept: dict[str, tuple[str, Keyed]] = {}

    def submit(self, document: object, run_input: Mapping[str, Any] | None, *,
               keyed: Keyed | None = None) -> str:
        self.entered.set()
        assert self.hold.wait(30)
        if self.refuse:
            raise Unavailable("the store cannot write")
        self.submits += 1
        run_id = f"r-{self.submits:012x}"
        if keyed is not None:
            self.kept[keyed.key] = (run_id, keyed)  # as a run's first row keeps it
        return run_id

    def made_by(self, key: str) -> tuple[str, Keyed] | None:
        if self.refuse:
            raise Unavailable("the store cannot be read")
        return self.kept.get(key)


def test_a_key_sent_again_after_a_restart_answers_the_run_it_made(tmp_path: Path) -> None:
    """ADR-0065's first row keeps the key: a retry that crosses a restart of the process (the commonest
    reason a client's connection breaks after the server took its request) makes no second run."""
    body = {"workflow": read_document(one_state("restart"))}
    with api_on_fake(tmp_path, TOKEN) as (url, _, _orch):
        first = post(url, "k-across", body)
        assert first.status_code == 201
    with api_on_fake(tmp_path, TOKEN) as (url, _, orch):
        again = post(url, "k-across", body)
        other = post(url, "k-across", {**body, "input": {"x": 1}})
        fresh = post(url, "k-new", body)
        made = {line["runId"] for line in orch.runs()} | {line["runId"] for line in orch.finished_runs()}
    assert again.status_code == 201 and again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert other.status_code == 422 and "another body" in other.json()["error"]
    assert fresh.status_code == 201 and made == {first.json()["runId"], fresh.json()["runId"]}


@pytest.fixture
def served() -> Iterator[tuple[str, Counting]]:
    backend = Counting()
    server = ApiServer(Api(backend, TOKEN))
    server.start()
    try:
        yield server.url, backend
    finally:
        server.stop()


def post(url: str, key: str | None, body: Any = BODY) -> requests.Response:
    headers = {**AUTH, **({"Idempotency-Key": key} if key is not None else {})}
    return requests.post(url + "/runs", json=body, headers=headers, timeout=30)


def test_a_key_sent_again_answers_the_run_it_made(served: tuple[str, Counting]) -> None:
    url, backend = served
    first, again = post(url, "k-1"), post(url, "k-1")
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json() == {"runId": "r-000000000001"}
    assert again.headers["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first.headers
    assert backend.submits == 1
    assert post(url, "k-2").json() == {"runId": "r-000000000002"} and post(url, None).status_code == 201
    assert backend.submits == 3  # another key, or none, is another run


def test_a_key_with_another_body_is_422_and_a_bad_key_400(served: tuple[str, Counting]) -> None:
    url, backend = served
    assert post(url, "k").status_code == 201
    other = post(url, "k", {"workflow": {"name": "other"}})
    assert other.status_code == 422 and "another body" in other.json()["error"]
    for bad in ("", "x" * 256, "caf\u00e9"):
        answer = requests.post(url + "/runs", json=BODY, headers={**AUTH, "Idempotency-Key": bad.encode().decode(
            "latin-1")}, timeout=30)
        assert answer.status_code == 400 and "Idempotency-Key" in answer.json()["error"], bad
    assert backend.submits == 1


def test_a_refused_submit_frees_its_key_for_the_retry(served: tuple[str, Counting]) -> None:
    url, backend = served
    backend.refuse = True
    assert post(url, "k").status_code == 503
    backend.refuse = False
    assert post(url, "k").status_code == 201 and backend.submits == 1


def test_a_key_the_store_cannot_look_up_is_a_503_and_nothing_is_made(served: tuple[str, Counting]) -> None:
    url, backend = served
    backend.refuse = True
    answer = post(url, "k")
    assert answer.status_code == 503 and answer.headers["Retry-After"] and backend.submits == 0
    assert "cannot be read" in answer.json()["error"]


def test_a_retry_while_the_first_is_under_way_waits_for_its_run(served: tuple[str, Counting]) -> None:
    url, backend = served
    backend.hold.clear()
    answers: list[requests.Response] = []
    first = threading.Thread(target=lambda: answers.append(post(url, "k")))
    first.start()
    assert backend.entered.wait(30)
    second = threading.Thread(target=lambda: answers.append(post(url, "k")))
    second.start()
    backend.hold.set()
    first.join(30)
    second.join(30)
    assert [a.json()["runId"] for a in answers] == ["r-000000000001"] * 2 and backend.submits == 1


class LosesFirstAnswer(http.server.BaseHTTPRequestHandler):
    """Forwards to the API, but the first POST's answer is lost: the connection closes once the API took it."""

    target = ""
    posts: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        key = self.headers.get("Idempotency-Key", "")
        LosesFirstAnswer.posts.append(key)
        answer = requests.post(self.target + self.path, data=body, timeout=30,
                               headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
        if len(LosesFirstAnswer.posts) == 1:
            self.close_connection = True
            return  # no answer at all: the client's connection ends
        self.send_response(answer.status_code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_the_cli_retries_a_lost_submit_with_its_key_and_makes_one_run(served: tuple[str, Counting],
                                                                      tmp_path: Path) -> None:
    url, backend = served
    path = tmp_path / "wf.yaml"
    path.write_text(one_state("cli"))
    LosesFirstAnswer.target, LosesFirstAnswer.posts = url, []
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), LosesFirstAnswer) as proxy:
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        try:
            out = jr2("submit", str(path), "--server", f"http://127.0.0.1:{proxy.server_address[1]}", "--json",
                      token=TOKEN)
        finally:
            proxy.shutdown()
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"runId": "r-000000000001"} and backend.submits == 1
    keys = LosesFirstAnswer.posts
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0].startswith("jr2-cli-")
    assert "trying again (2 of 3, the same Idempotency-Key)" in out.stderr
