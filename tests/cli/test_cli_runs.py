"""The commands a person runs: `demo` (the README's promise), and the client commands against a real
orchestrator's API — each as a process, with good input and bad."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiServer
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.values.workflow import read_document
from tests.support.api_on_fake import api_on_fake
from tests.support.client_commands import TOKEN, jr2, one_line_exit_2
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
WORKFLOW = one_state("cli")


# -- demo ----------------------------------------------------------------------------------------------

def test_the_demo_runs_the_bundled_example_to_done() -> None:
    out = jr2("demo", tz="JST-9")  # a zone of its own, so a UTC clock cannot pass for local
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    # Issue 19 item 8: each feed line is stamped with a person's clock and its zone, never a bare UTC time.
    assert re.search(r"^\d{2}:\d{2}:\d{2} JST  .*ended done$", text, re.MULTILINE), text[:400]
    for line in ("placing F-1: waiting for a node — 0/1 nodes are available: 1 Insufficient cpu.",
                 "memory kill during coder's Turn (peak 1.9Gi of 2Gi)",
                 "reviewer admitted; told: memory limit in coder's Turn (peak 1.9Gi of 2Gi)",
                 "reviewer picked reject → code", "reviewer picked approve → done", "ended done",
                 "still waiting for a node"):
        assert line in text, line
    assert "placed F-1 after" in text and text.count("placing F-1:") == 1
    # The final RunStatus, then the summary of both runs (issue 19 item 8) and their one-line timeline.
    status, summary = text.rstrip().rsplit("\n  F-1: deleted\n\n", 1)
    assert "(fix-and-review): done, state done" in status
    table, timeline = summary.split("\n\n")
    head, neighbour, example = table.splitlines()
    assert head.split() == ["RUN", "ENDED", "STATES", "TURNS", "WAITS", "NOTICES", "DURATION"]
    assert neighbour.startswith("neighbour  done ") and " build → hold → done " in neighbour
    assert example.startswith("example    done ") and " code → review → code → review → done  4 " in example
    assert re.search(r" 1 \(\d+s\) +1 +\d+s$", example), example  # one wait, one notice (the guard kill)
    assert timeline.startswith("timeline: 0.0s neighbour started · ") and "\n" not in timeline
    assert "example waits for a node" in timeline and timeline.endswith("example ended done")


def test_the_demo_runs_your_own_workflow(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(WORKFLOW)
    out = jr2("demo", "--workflow", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "worker picked finish → done" in out.stdout and "ended done" in out.stdout


@pytest.mark.parametrize(("content", "says"), [(None, "No such file"), ("name: [", "not valid YAML"),
                                               ("name: x\nstart: a\nstates: {a: {final: maybe}}",
                                                "states.a.final")])
def test_a_bad_workflow_for_the_demo_is_one_line_and_exit_2(tmp_path: Path, content: str | None,
                                                            says: str) -> None:
    path = tmp_path / "bad.yaml"
    if content is not None:
        path.write_text(content)
    one_line_exit_2(jr2("demo", "--workflow", str(path)), says)


def test_demo_keep_stays_up_until_ctrl_c_and_leaves_nothing_behind(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", "demo", "--keep"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    kubeconfig = ""
    for line in proc.stdout:
        if "the fake cluster stays up" in line:
            kubeconfig = line.split("KUBECONFIG=")[1].split()[0]
            break
    assert kubeconfig and Path(kubeconfig).exists()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 130  # issue 19 item 2: Ctrl-C leaves every command with 130
    assert not Path(kubeconfig).exists() and list(tmp_path.iterdir()) == []  # its temp folder is gone


# -- the client commands ---------------------------------------------------------------------------------

def test_submit_runs_status_events_and_cancel(server: tuple[str, FakeCluster, Orchestrator], tmp_path: Path) -> None:
    url, cluster, orch = server
    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW)
    cluster.script("worker", [Hang()], [Pick("finish")])
    submitted = jr2("submit", str(path), "--server", url, "--json")
    assert submitted.returncode == 0, submitted.stderr
    run_id = json.loads(submitted.stdout)["runId"]
    wait_until(lambda: (orch.status(run_id) or {}).get("turn", {}).get("phase") == "running", what="running")
    runs = jr2("runs", "--server", url)
    assert runs.returncode == 0 and run_id in runs.stdout and "running" in runs.stdout
    status = jr2("status", run_id, "--server", url)
    assert status.returncode == 0 and f"run {run_id} (cli): running, state work" in status.stdout
    assert "W: running" in status.stdout
    follower = subprocess.Popen([sys.executable, "-m", "jr2_actors", "events", run_id, "--server", url],
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "JR2_INSTANCE_TOKEN": TOKEN})
    cancelled = jr2("cancel", run_id, "--server", url)
    assert cancelled.returncode == 0 and f"cancelling {run_id}" in cancelled.stdout
    out, _ = follower.communicate(timeout=30)
    # events exits by how the run ended (5: cancelled), as `wait` does
    assert follower.returncode == 5 and "started cli in state work" in out and "ended cancelled" in out
    gone = jr2("status", run_id, "--server", url, "--json")
    assert json.loads(gone.stdout)["status"] == "cancelled"  # a finished run, from the store
    again = jr2("cancel", run_id, "--server", url)
    assert again.returncode == 0 and again.stdout.strip() == f"{run_id} had already ended: cancelled"


def test_events_on_a_quiet_run_leaves_at_once_on_ctrl_c(server: tuple[str, FakeCluster, Orchestrator]) -> None:
    url, cluster, orch = server
    cluster.script("worker", [Hang()])
    run_id = orch.submit(read_document(WORKFLOW))
    wait_until(lambda: (orch.status(run_id) or {}).get("turn", {}).get("phase") == "running", what="running")
    follower = subprocess.Popen([sys.executable, "-m", "jr2_actors", "events", run_id, "--server", url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "JR2_INSTANCE_TOKEN": TOKEN})
    assert follower.stdout is not None
    for line in follower.stdout:  # the feed so far; then the run says nothing (its Turn hangs)
        if "admitted" in line:
            break
    follower.send_signal(signal.SIGINT)
    _, err = follower.communicate(timeout=10)  # not the next heartbeat, nor the next event: now
    assert follower.returncode == 130 and "Traceback" not in err, err


class CuttableProxy:
    """A TCP forwarder on loopback whose `cut()` breaks every connection through it, as a serve restart
    breaks its followers' streams (the API behind it goes on)."""

    def __init__(self, target: tuple[str, int]) -> None:
        import socket

        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._open: list[Any] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: Any, dst: Any) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.close()

    def cut(self) -> None:
        import socket

        with self._lock:
            socks, self._open = self._open, []
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()
        self.cut()


def test_events_resumes_after_its_feed_breaks_from_its_last_line(server: tuple[str, FakeCluster, Orchestrator]) -> None:
    """Issue 19 item 2: the follow outlives a broken stream (as a serve restart breaks it) and resumes with
    Last-Event-ID: every line once, in order, a run named by a prefix, and the exit by the run's end."""
    url, cluster, orch = server
    cluster.script("worker", [Hang()])
    run_id = orch.submit(read_document(WORKFLOW))
    wait_until(lambda: (orch.status(run_id) or {}).get("turn", {}).get("phase") == "running", what="running")
    host, port = url.removeprefix("http://").rsplit(":", 1)
    proxy = CuttableProxy((host, int(port)))
    follower = subprocess.Popen([sys.executable, "-m", "jr2_actors", "events", run_id[:6], "--server", proxy.url,
                                 "-o", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "JR2_INSTANCE_TOKEN": TOKEN})
    assert follower.stdout is not None
    try:
        ids = []
        for line in follower.stdout:
            ids.append(json.loads(line)["id"])
            if json.loads(line)["kind"] == "admitted":
                break
        proxy.cut()  # the stream breaks though the run goes on
        orch.cancel(run_id)
        out, err = follower.communicate(timeout=60)
    finally:
        proxy.close()
        if follower.poll() is None:
            follower.kill()
    ids += [json.loads(line)["id"] for line in out.splitlines() if "id" in json.loads(line)]
    assert follower.returncode == 5, err  # cancelled
    assert ids == sorted(set(ids)) and len(ids) > 3, ids  # no line twice, none out of order
    assert "resuming after line" in err and "Traceback" not in err, err


def test_events_gives_up_on_a_server_that_does_not_come_back(server: tuple[str, FakeCluster, Orchestrator]) -> None:
    _, cluster, orch = server
    cluster.script("worker", [Hang()])
    run_id = orch.submit(read_document(WORKFLOW))
    own = ApiServer(Api(orch, TOKEN))
    own.start()
    follower = subprocess.Popen([sys.executable, "-m", "jr2_actors", "events", run_id, "--server", own.url,
                                 "--resume-for", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "JR2_INSTANCE_TOKEN": TOKEN})
    assert follower.stdout is not None
    for line in follower.stdout:
        if "started" in line:
            break
    own.stop()
    _, err = follower.communicate(timeout=60)
    assert follower.returncode == 2, err
    assert err.strip().splitlines()[-1].startswith("jr2-actors: ") and "gave up resuming after 1s" in err, err
    assert "Traceback" not in err


def test_a_run_waiting_for_capacity_is_marked_in_runs(tmp_path: Path) -> None:
    from jr2_actors.fake.operator.core import Node

    with api_on_fake(tmp_path, TOKEN, nodes=[Node("tiny", 100, 2**30)], harness=False) as (url, _, orch):
        path = tmp_path / "wf.yaml"
        path.write_text(WORKFLOW)
        run_id = json.loads(jr2("submit", str(path), "--server", url, "--json").stdout)["runId"]
        wait_until(lambda: bool(orch.status(run_id)["waiting"]), what="waiting")  # type: ignore[index]
        runs = jr2("runs", "--server", url)
        head, row = runs.stdout.splitlines()
        assert head.split()[-1] == "PLACING" and row.split()[0] == run_id and row.split()[-1] == "W"
        status = jr2("status", run_id, "--server", url)
        assert "W waiting for a node: 0/1 nodes are available: 1 Insufficient cpu. (capacity, since " \
            in status.stdout


def test_a_refused_token_is_one_line_and_exit_2(server: tuple[str, FakeCluster, Orchestrator]) -> None:
    url, _, _ = server
    one_line_exit_2(jr2("runs", "--server", url, token="not-the-token-at-all-000"), "refused the token")


def test_a_missing_token_is_one_line_and_exit_2(server: tuple[str, FakeCluster, Orchestrator]) -> None:
    url, _, _ = server
    one_line_exit_2(jr2("runs", "--server", url, token=None), "JR2_INSTANCE_TOKEN")


def test_an_unreachable_server_is_one_line_and_exit_2() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    one_line_exit_2(jr2("runs", "--server", f"http://127.0.0.1:{port}"), ": connection refused")


class NotOurFeed(http.server.BaseHTTPRequestHandler):
    """A server that answers every events request with a stream whose frame is not a jr2 feed event."""

    def do_GET(self) -> None:
        body = b": hi\n\ndata: <html>not json</html>\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_runs_all_status_times_prefixes_resubmit_and_cancel_of_several(
        server: tuple[str, FakeCluster, Orchestrator], tmp_path: Path) -> None:
    """Issue 19 item 2: a header, AGE and DURATION, newest first; --all lists finished runs from the store;
    status shows start, end and took; -o yaml|wide; a unique prefix names a run, an ambiguous one is refused
    with its candidates; resubmit runs the same document anew; cancel takes several runs."""
    import yaml

    url, cluster, orch = server
    cluster.script("worker", [Pick("finish")], [Hang()], [Hang()])
    first = orch.submit(read_document(WORKFLOW))
    assert orch.wait_finished(first, 30)
    runs = jr2("runs", "--server", url)
    assert runs.returncode == 0 and runs.stdout.startswith("no live runs"), runs
    every = jr2("runs", "--all", "--server", url)
    assert every.returncode == 0, every.stderr
    head, row = every.stdout.splitlines()[:2]
    assert head.split() == ["RUN", "WORKFLOW", "STATUS", "STATE", "AGE", "DURATION", "PLACING"], head
    assert row.split()[:4] == [first, "cli", "done", "done"], row
    status = jr2("status", first[:5], "--server", url)  # a unique prefix
    assert status.returncode == 0 and ", ended " in status.stdout and ", took " in status.stdout, status.stdout
    doc = yaml.safe_load(jr2("status", first, "--server", url, "-o", "yaml").stdout)
    assert doc["status"] == "done" and doc["startedAt"] <= doc["endedAt"] and doc["durationSeconds"] >= 0
    again = jr2("resubmit", first[:6], "--server", url, "--json")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)["runId"]
    third = orch.submit(read_document(WORKFLOW))
    wide = jr2("runs", "--server", url, "-o", "wide")
    assert wide.stdout.splitlines()[0].split()[6:8] == ["STARTED", "ENDED"], wide.stdout
    listed = [line.split()[0] for line in wide.stdout.splitlines()[1:]]
    assert set(listed) == {second, third}
    starts = [r["startedAt"] for r in json.loads(jr2("runs", "--server", url, "-o", "json").stdout)]
    assert starts == sorted(starts, reverse=True)  # newest start first
    one_line_exit_2(jr2("status", "r-", "--server", url), "r- is ambiguous: it begins ")
    cancelled = jr2("cancel", second, third[:8], "--server", url)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"cancelling {second}" in cancelled.stdout and f"cancelling {third}" in cancelled.stdout
    partly = jr2("cancel", "r-0123456789ab", second, "--server", url)  # one unknown: the others still answered
    assert partly.returncode == 2 and f"{second} " in partly.stdout and "answered 404" in partly.stderr, partly
    import requests

    for query in ("all=maybe", "prefix=r_%25", "all=true&all=false", "sort=age"):  # never ignored: a 400
        answer = requests.get(f"{url}/runs?{query}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert answer.status_code == 400 and "GET /runs takes" in answer.json()["error"], (query, answer.text)
    bad = jr2("runs", "-o", "xml", "--server", url)
    assert bad.returncode == 2 and "invalid choice: 'xml'" in bad.stderr and "Traceback" not in bad.stderr


def test_a_feed_that_is_not_ours_is_one_line_and_exit_2() -> None:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotOurFeed) as peer:
        threading.Thread(target=peer.serve_forever, daemon=True).start()
        try:
            out = jr2("events", "r-0123456789ab", "--server", f"http://127.0.0.1:{peer.server_address[1]}")
        finally:
            peer.shutdown()
    one_line_exit_2(out, "is not a jr2 feed: an event whose data is not JSON")


def test_an_unknown_run_is_one_line_and_exit_2(server: tuple[str, FakeCluster, Orchestrator]) -> None:
    url, _, _ = server
    one_line_exit_2(jr2("status", "r-0123456789ab", "--server", url), "answered 404")
    one_line_exit_2(jr2("status", "r-nope", "--server", url), "no run r-nope")  # a prefix of none
    odd = jr2("status", "bogus/../x", "--server", url)  # never asked about as another path
    one_line_exit_2(odd, "'bogus/../x' is not a run id or a prefix of one")


def test_a_refused_token_from_a_file_names_the_file(server: tuple[str, FakeCluster, Orchestrator],
                                                    tmp_path: Path) -> None:
    url, _, _ = server
    token_file = tmp_path / "token"
    token_file.write_text("not-the-token-at-all-000")
    one_line_exit_2(jr2("runs", "--server", url, "--token-file", str(token_file), token=None),
                    f"refused the token (check the token in {token_file})")


def test_a_bad_workflow_file_is_one_line_and_exit_2(server: tuple[str, FakeCluster, Orchestrator],
                                                     tmp_path: Path) -> None:
    url, _, _ = server
    path = tmp_path / "bad.yaml"
    path.write_text(WORKFLOW.replace("on: {finish: done}", "on: {finish: nowhere}"))
    one_line_exit_2(jr2("submit", str(path), "--server", url), "states.work.on.finish")
    one_line_exit_2(jr2("submit", str(tmp_path / "absent.yaml"), "--server", url), "No such file")


