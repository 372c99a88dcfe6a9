"""`/metrics` and `/healthz` are open (no token): nothing a workflow's author wrote reaches them — not the
workflow's name, its states, Workspaces, agents or picks. The runs by state are for the token's holders:
`GET /runs`, which `jr2-actors top` reads when it is given the token."""

from __future__ import annotations

import io
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from rich.console import Console

from jr2_actors import cli
from jr2_actors.commands.topview import render, states_of
from jr2_actors.console.top import Scrape
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.shell import logs
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.workflow import read_document
from tests.support.metrics_text import value
from tests.support.probes import Gated
from tests.support.waiting import wait_until

# Each word is the author's and unique enough that finding it anywhere in an exposition means it leaked.
AUTHOR_WORDS = ("zqWorkflowName", "zqStateOne", "zqStateTwo", "zqFinal", "zqSpace", "zqAgent", "zqpick")
DOCUMENT = """
name: zqWorkflowName
workspaces:
  zqSpace: {size: {cpu: "1", memory: "1Gi"}}
agents:
  zqAgent: {instructions: "You work.", workspace: zqSpace, access: write}
start: zqStateOne
states:
  zqStateOne:
    holds: [zqSpace]
    after: {seconds: 600, to: zqStateTwo}
  zqStateTwo:
    holds: [zqSpace]
    turn: {agent: zqAgent, prompt: "Work."}
    on: {zqpick: zqFinal}
  zqFinal: {final: done}
"""


def leaked(text: str) -> list[str]:
    return [w for w in AUTHOR_WORDS if w.lower() in text.lower()]


def test_metrics_name_no_author_word_while_runs_live_nor_after(tmp_path: Path) -> None:
    clock = VirtualClock(settle=True)
    with FakeCluster(namespace="jr2", clock=clock) as cluster:
        cluster.harness(lambda core: core.pick_first_allowed(True))
        client = cluster.client()
        try:
            with Orchestrator(client, state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key,
                              clock=clock) as orchestrator:
                ids = [orchestrator.submit(read_document(DOCUMENT)) for _ in range(3)]
                clock.run_until(lambda: all((orchestrator.status(r) or {}).get("children", [{}])[0].get("phase")
                                            == "running" for r in ids))
                live = orchestrator.metrics()
                assert value(live, "jr2_runs_live") == 3  # counted, by no state
                assert leaked(live) == []
                assert {r["state"] for r in orchestrator.runs()} == {"zqStateOne"}  # the token's holders see it
                clock.run_until(lambda: all((orchestrator.status(r) or {}).get("status") == "done" for r in ids))
                after = orchestrator.metrics()
                assert value(after, "jr2_runs_live") == 0
                assert leaked(after) == []
                _, reason = orchestrator.health()
                assert leaked(reason) == []
        finally:
            client.close()


def test_the_busiest_actors_are_named_by_the_run_they_serve_never_by_an_author_word() -> None:
    telemetry = Telemetry(clock=VirtualClock())
    gate = threading.Event()
    logs.bind({"run": "r-0123456789ab"})  # what a RunActor's children are started under
    try:
        refs = [Gated.start(gate, telemetry, name=name) for name in ("zqSpace", "zqAgent")]
    finally:
        logs.bind({})
    lone = Gated.start(gate, telemetry, name="watch")  # an actor that serves no run keeps its own name
    try:
        for ref in (*refs, lone):
            for i in range(3):
                ref.tell(i)
        wait_until(lambda: all(r.actor_inbox.qsize() == 2 for r in (*refs, lone)))  # type: ignore[attr-defined]
        text = telemetry.exposition().decode()
        assert leaked(text) == []
        # The run's two actors of one kind are one series (their depths summed), never two of one name.
        assert value(text, "jr2_actor_busiest_mailbox_depth", kind="Gated", name="r-0123456789ab") == 4
        assert value(text, "jr2_actor_busiest_mailbox_depth", kind="Gated", name="watch") == 2
        assert leaked(telemetry.actors.stalled(-1.0)) == []
    finally:
        gate.set()
        for ref in (*refs, lone):
            ref.stop(block=True, timeout=10)


def test_top_counts_the_runs_by_state_from_the_api_not_from_metrics() -> None:
    scrape = Scrape.parse("# TYPE jr2_runs_live gauge\njr2_runs_live 3.0\n", 0.0)
    scrape.states = states_of(b'{"runs":[{"runId":"r-1","state":"code"},{"runId":"r-2","state":"code"},'
                              b'{"runId":"r-3","state":"review"}]}')
    console = Console(file=io.StringIO(), width=160)
    console.print(render(scrape))
    out = console.file
    assert isinstance(out, io.StringIO)
    assert "3 — code 2, review 1" in out.getvalue()


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"runs": {}}', b'{"runs": [1]}', b"{" * 100_000])
def test_a_runs_answer_top_cannot_read_is_one_clear_error(body: bytes) -> None:
    from jr2_actors.commands.common import UsageError

    with pytest.raises(UsageError, match="GET /runs answered"):
        states_of(body)


class _Api(BaseHTTPRequestHandler):
    token = "t0ken-for-top-0123456789"
    asked: ClassVar[list[tuple[str, str]]] = []

    def do_GET(self) -> None:
        self.asked.append((self.path, self.headers.get("Authorization", "")))
        if self.path == "/metrics":
            body = b"# TYPE jr2_runs_live gauge\njr2_runs_live 2.0\n"
        elif self.headers.get("Authorization") != f"Bearer {self.token}":
            body = b'{"error": "unauthorized"}'
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        else:
            body = b'{"runs":[{"runId":"r-1","state":"code"},{"runId":"r-2","state":"code"}]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_top_with_the_token_asks_get_runs_for_the_states_and_without_it_does_not(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        monkeypatch.delenv("JR2_INSTANCE_TOKEN", raising=False)
        assert cli.main(["top", "--once", "--server", url]) == 0
        assert [path for path, _ in _Api.asked] == ["/metrics"]  # no token: /metrics alone
        assert "code" not in capsys.readouterr().out
        monkeypatch.setenv("JR2_INSTANCE_TOKEN", _Api.token)
        assert cli.main(["top", "--once", "--server", url]) == 0
        assert "2 — code 2" in capsys.readouterr().out
        wrong = tmp_path / "token"
        wrong.write_text("not-the-token\n")
        assert cli.main(["top", "--once", "--server", url, "--token-file", str(wrong)]) == 2
        err = capsys.readouterr().err
        assert "refused the token" in err and len(err.strip().splitlines()) == 1 and "not-the-token" not in err
    finally:
        server.shutdown()
        server.server_close()
