"""`jr2-actors top`: what it reads off an exposition and shows, and one line and exit 2 for a server it
cannot read (not there, not http, not Prometheus text, not jr2's)."""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from rich.console import Console

from jr2_actors import cli
from jr2_actors.commands.topview import render
from jr2_actors.console.top import Scrape, quantile
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.watch.metrics import WatchState
from jr2_actors.workspace.messages import WaitEntry
from tests.support.metrics_text import FakeRun, Record
from tests.support.probes import Gated
from tests.support.waiting import wait_until


def shown(scrape: Scrape) -> str:
    console = Console(file=io.StringIO(), width=160)
    console.print(render(scrape, server="http://orchestrator"))
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue()


def test_the_view_shows_the_actor_falling_behind_the_watch_and_the_waits() -> None:
    clock = VirtualClock(wall=1_790_000_000.0)
    telemetry = Telemetry(clock=clock)
    gate = threading.Event()
    ref = Gated.start(gate, telemetry, name="F-9")
    try:
        for i in range(4):
            ref.tell(i)
        wait_until(lambda: ref.actor_inbox.qsize() == 3)  # type: ignore[attr-defined]
        clock.advance(75.0)
        telemetry.watch.publish(WatchState("watching", False, 0, 1, 3, "41"))
        telemetry.runs.update(FakeRun("r-1", "code", {"F-9": Record("placing")},
                                      [("F-9", WaitEntry("quota", "exceeded quota", clock.wall() - 30))]).view())
        text = shown(Scrape.parse(telemetry.exposition().decode(), 0.0))
    finally:
        gate.set()
        ref.stop(block=True, timeout=10)
    stuck = next(line for line in text.splitlines() if "Gated" in line and "F-9" not in line)
    assert " 3 " in stuck and "1m15s" in stuck  # three waiting, the oldest for 75 s
    assert "F-9" in text  # named among the busiest
    assert "watching, up" in text and "3 followed, 1 with a recipient" in text
    assert "1 waiting on quota: quota 1 (the oldest for 30.0 s)" in text  # by reason too (issue 19 item 6)
    live = next(line for line in text.splitlines() if "live runs" in line)
    assert " 1 " in live and "code" not in live  # one live run; its state is not in /metrics (GET /runs has it)


def test_live_refreshes_show_rates_from_two_scrapes() -> None:
    telemetry = Telemetry(clock=VirtualClock())
    gate = threading.Event()
    gate.set()
    ref = Gated.start(gate, telemetry, name="F-9")
    ref.ask("one", timeout=10)
    before = Scrape.parse(telemetry.exposition().decode(), 10.0)
    for _ in range(8):
        ref.ask("more", timeout=10)
    now = Scrape.parse(telemetry.exposition().decode(), 12.0)
    ref.stop(block=True, timeout=10)
    console = Console(file=io.StringIO(), width=160)
    console.print(render(now, before))
    out = console.file
    assert isinstance(out, io.StringIO)
    assert "4.0/s" in out.getvalue()  # 8 messages in 2 s
    assert "rate" not in shown(now)  # one scrape: no rate column


def test_a_quantile_is_the_bound_of_its_bucket() -> None:
    buckets = [(0.001, 90.0), (0.01, 99.0), (0.1, 100.0), (float("inf"), 100.0)]
    assert quantile(buckets, 100.0, 0.5) == 0.001
    assert quantile(buckets, 100.0, 0.99) == 0.01
    assert quantile(buckets, 100.0, 1.0) == 0.1
    assert quantile([(0.1, 0.0), (float("inf"), 2.0)], 2.0, 0.99) == float("inf")
    assert quantile([], 0.0, 0.99) is None


class Answer(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[tuple[ThreadingHTTPServer, type[Answer]]]:
    handler = type("Handler", (Answer,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, handler
    server.shutdown()
    server.server_close()


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
    return captured.err


def test_a_server_top_cannot_read_is_one_line_and_exit_2(
        capsys: pytest.CaptureFixture[str], answering: tuple[ThreadingHTTPServer, type[Answer]]) -> None:
    server, handler = answering
    url = f"http://127.0.0.1:{server.server_address[1]}"
    assert "connection refused" in one_line(capsys, ["top", "--once", "--server", nowhere()])
    assert "not an http(s) URL" in one_line(capsys, ["top", "--once", "--server", "ftp://host"])
    handler.body = b"<html>not metrics</html>"
    assert "not Prometheus text" in one_line(capsys, ["top", "--once", "--server", url])
    handler.body = b"# TYPE other_total counter\nother_total 1\n"
    assert "no jr2 metrics" in one_line(capsys, ["top", "--once", "--server", url])
    with pytest.raises(SystemExit) as bad:  # argparse's own exit, in one line too
        cli.main(["top", "--interval", "0"])
    assert bad.value.code == 2 and "above zero" in capsys.readouterr().err


def nowhere() -> str:
    """A loopback URL where nothing listens (a port just given back)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"
