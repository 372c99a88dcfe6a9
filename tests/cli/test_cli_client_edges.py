"""The client commands' last rough edges, each as a user meets it: `-o name` prints the bare run id (kubectl's
and Argo's habit), a client pointed at another HTTP server says so in one line instead of printing its HTML
page, and `wait --timeout` gives up as kubectl's does (exit 1, one line)."""

from __future__ import annotations

import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick
from jr2_actors.orchestrator import Orchestrator
from tests.support import cli_process
from tests.support.api_on_fake import api_on_fake
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
TOKEN = "client-edges-token-0123456789abcdef"


def jr2(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_process.jr2(*args, token=TOKEN)


def one_line_exit(out: subprocess.CompletedProcess[str], code: int, says: str) -> None:
    assert out.returncode == code, out
    assert says in out.stderr and out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr, out.stderr


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, FakeCluster, Orchestrator]]:
    with api_on_fake(tmp_path, TOKEN) as served:
        yield served


def test_o_name_prints_the_bare_run_id(server: tuple[str, FakeCluster, Orchestrator], tmp_path: Path) -> None:
    url, cluster, _ = server
    path = tmp_path / "wf.yaml"
    path.write_text(one_state("named"))
    cluster.script("worker", [Pick("finish")], [Pick("finish")])
    first = jr2("submit", str(path), "-o", "name", "--server", url)
    assert first.returncode == 0, first.stderr
    run_id = first.stdout.strip()
    assert first.stdout == run_id + "\n" and run_id.startswith("r-") and " " not in run_id, first.stdout
    waited = jr2("submit", str(path), "--wait", "-o", "name", "--server", url)  # the id, then the wait's: the id
    assert waited.returncode == 0, waited.stderr
    second = waited.stdout.split()[0]
    assert waited.stdout == f"{second}\n{second}\n" and second != run_id, waited.stdout
    assert jr2("status", second, "-o", "name", "--server", url).stdout == second + "\n"
    listed = jr2("runs", "--all", "-o", "name", "--server", url)
    assert sorted(listed.stdout.split()) == sorted([run_id, second]), listed.stdout
    refused = jr2("events", run_id, "-o", "name", "--server", url)  # a feed's lines are not runs
    assert refused.returncode == 2 and "invalid choice: 'name'" in refused.stderr


class NotJr2(http.server.BaseHTTPRequestHandler):
    """Another HTTP server: its own HTML error page for every path but `/runs`, which it answers 200 in HTML."""

    def do_GET(self) -> None:
        if self.path.startswith("/runs?") or self.path == "/runs":
            body = b"<!DOCTYPE html>\n<html>\n<body>\n<p>a welcome page</p>\n</body>\n</html>\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404)  # http.server's page: a dozen lines of HTML

    def do_POST(self) -> None:
        self.send_error(405, "Method Not Allowed", "\n".join(f"line {i}" for i in range(40)))

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def not_jr2() -> Iterator[str]:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotJr2) as peer:
        threading.Thread(target=peer.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{peer.server_address[1]}"
        finally:
            peer.shutdown()


def test_another_http_server_is_one_line_naming_what_it_answered(not_jr2: str, tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(one_state("elsewhere"))
    one_line_exit(jr2("status", "r-0123456789ab", "--server", not_jr2), 2,
                  "answered 404: Not Found (text/html), not a jr2 orchestrator's answer: is --server right?")
    one_line_exit(jr2("events", "r-0123456789ab", "--server", not_jr2), 2, "answered 404: Not Found (text/html)")
    one_line_exit(jr2("submit", str(path), "--server", not_jr2), 2, "answered 405")
    one_line_exit(jr2("runs", "--server", not_jr2), 2, "answered text/html, not JSON: is --server a jr2 orchestrator?")


def test_wait_timeout_gives_up_as_kubectls_does(server: tuple[str, FakeCluster, Orchestrator]) -> None:
    url, cluster, orch = server
    from jr2_actors.values.workflow import read_document

    cluster.script("worker", [Hang()])
    run_id = orch.submit(read_document(one_state("slow")))
    wait_until(lambda: (orch.status(run_id) or {}).get("turn", {}).get("phase") == "running", what="running")
    one_line_exit(jr2("wait", run_id, "--timeout", "0", "--server", url), 1,
                  f"timed out waiting for {run_id} (still running after 0s)")
    one_line_exit(jr2("wait", run_id, "--timeout", "1500ms", "--server", url), 1, "still running after 1.5s")
    for bad in ("-3", "3x", "s", "1e9"):
        one_line_exit(jr2("wait", run_id, "--timeout", bad, "--server", url), 2, "is not a duration")
    orch.cancel(run_id)
    ended = jr2("wait", run_id, "--timeout", "1m", "--server", url)  # an end within it: exit by the end
    assert ended.returncode == 5 and "cancelled" in ended.stdout, ended
