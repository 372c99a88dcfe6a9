"""Commands that wait for a run exit by how it ended (issue 19, item 2): `submit --wait`, `submit --watch`,
`wait RUN…` and `events`; and every client command leaves at once with 130 on Ctrl-C, a slow server too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jr2_actors.commands.client import EXIT_BY_STATUS
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Pick
from jr2_actors.fake.operator.core import Node
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.values.workflow import read_document
from tests.support.api_on_fake import api_on_fake
from tests.support.client_commands import TOKEN, jr2, one_line_exit_2
from tests.support.slow_server import SlowServer
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

WORKFLOW = one_state("cli")

pytestmark = pytest.mark.slow


def workflow_file(tmp_path: Path) -> str:
    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW)
    return str(path)


def test_submit_wait_exits_0_for_a_run_that_ends_done(server: tuple[str, FakeCluster, Orchestrator],
                                                      tmp_path: Path) -> None:
    url, cluster, _ = server
    cluster.script("worker", [Pick("finish")])
    out = jr2("submit", workflow_file(tmp_path), "--wait", "--server", url)
    assert out.returncode == 0, out.stderr
    submitted, ended = out.stdout.strip().splitlines()
    assert submitted.startswith("submitted r-") and ended == f"{submitted.split()[1]} done"


def test_submit_wait_exits_3_for_a_run_that_ends_failed_and_says_why(server: tuple[str, FakeCluster, Orchestrator],
                                                                     tmp_path: Path) -> None:
    url, _, _ = server  # unscripted, the fake's agent says "Done." without a pick: nudged once, then a fault
    out = jr2("submit", workflow_file(tmp_path), "--wait", "--server", url)
    assert out.returncode == EXIT_BY_STATUS["failed"] == 3, out.stderr
    assert "failed: worker ended its Turn without a pick" in out.stdout


def test_submit_watch_prints_the_feed_and_exits_by_the_end(server: tuple[str, FakeCluster, Orchestrator],
                                                          tmp_path: Path) -> None:
    url, cluster, _ = server
    cluster.script("worker", [Pick("finish")])
    out = jr2("submit", workflow_file(tmp_path), "--watch", "--server", url)
    assert out.returncode == 0, out.stderr
    assert "started cli in state work" in out.stdout and "ended done" in out.stdout


def test_wait_for_several_runs_exits_with_the_first_that_did_not_end_done(
        server: tuple[str, FakeCluster, Orchestrator]) -> None:
    url, cluster, orch = server
    cluster.script("worker", [Pick("finish")])
    good = orch.submit(read_document(WORKFLOW))
    assert orch.wait_finished(good, 30)
    bad = orch.submit(read_document(WORKFLOW))  # no script left: it fails
    out = jr2("wait", good, bad, "--server", url)
    assert out.returncode == 3, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == f"{good} done" and lines[1].startswith(f"{bad} failed: ")
    as_json = jr2("wait", good, "--server", url, "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["status"] == "done"


def test_wait_for_an_unknown_run_is_one_line_and_exit_2(server: tuple[str, FakeCluster, Orchestrator]) -> None:
    url, _, _ = server
    one_line_exit_2(jr2("wait", "r-nosuchrun", "--server", url), "no run r-nosuchrun")


def test_events_of_a_run_cancelled_while_it_waited_for_a_node_exits_5_not_2(tmp_path: Path) -> None:
    # Its teardown's lines (the wait ended, the Sandbox deleted) follow `ended`: the feed did not end early.
    with api_on_fake(tmp_path, TOKEN, nodes=[Node("tiny", 100, 2**30)], harness=False) as (url, _, orch):
        run_id = orch.submit(read_document(WORKFLOW))
        wait_until(lambda: bool((orch.status(run_id) or {}).get("waiting")), what="waiting")
        orch.cancel(run_id)
        assert orch.wait_finished(run_id, 30)
        out = jr2("events", run_id, "--server", url)
        assert out.returncode == EXIT_BY_STATUS["cancelled"] == 5, out.stderr
        kinds = [line.split()[2] for line in out.stdout.strip().splitlines()]  # HH:MM:SS ZONE kind…
        assert "ended" in kinds and kinds[-1] != "ended"


@pytest.mark.parametrize("command", [["status", "r-1"], ["runs"], ["cancel", "r-1"], ["wait", "r-1"],
                                     ["resubmit", "r-1"]])
def test_ctrl_c_leaves_a_command_at_once_with_130_while_the_server_is_slow(command: list[str]) -> None:
    slow = SlowServer("hold")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", *command, "--server", slow.url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "JR2_INSTANCE_TOKEN": TOKEN})
        assert slow.got_request.wait(30), "the command never asked"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)  # not the server's 30 s read timeout: now
        assert proc.returncode == 130 and "Traceback" not in err, err
    finally:
        slow.close()
