"""`jr2-actors serve` as a process: every bad input is one line and exit 2; SIGTERM in the middle of a run
exits 0 within the grace period with no row lost, and a restart on the same state directory continues the
run to its end without a second Sandbox (issue 9 item 5, issue 12)."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick, Say
from jr2_actors.testing.processes import children, ended
from jr2_actors.values.constants import SERVE_STOP_SECONDS
from jr2_actors.values.workflow import read_document
from tests.support.serving import KEY, Serve, jr2, serve_env
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG")
WORKFLOW = one_state("served")


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None, signing_key=KEY.encode()) as c:
        yield c


def test_sigterm_mid_run_exits_zero_and_a_restart_continues_the_run(cluster: FakeCluster, tmp_path: Path) -> None:
    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    cluster.script("worker", [Say("working on it"), Hang()], [Say("again, from the start"), Pick("finish")])
    first = Serve(kubeconfig, tmp_path / "state")
    resp = first.call("POST", "/runs", json={"workflow": read_document(WORKFLOW)})
    assert resp.status_code == 201, resp.text
    run_id = resp.json()["runId"]
    wait_until(lambda: (first.call("GET", f"/runs/{run_id}").json().get("turn") or {}).get("phase") == "running",
               timeout=30, what="the Turn running")
    first.proc.send_signal(signal.SIGTERM)
    assert first.proc.wait(SERVE_STOP_SECONDS) == 0, "".join(first.lines)
    assert not any("Traceback" in line for line in first.lines), "".join(first.lines)
    with sqlite3.connect(tmp_path / "state" / "state.db") as db:
        rows = db.execute("SELECT run_id, status FROM runs").fetchall()
    assert rows == [(run_id, "live")]  # no row lost: the run is there to restore

    second = Serve(kubeconfig, tmp_path / "state")
    try:
        wait_until(lambda: second.call("GET", f"/runs/{run_id}").json().get("status") == "done", timeout=30,
                   what="the restored run to finish")
        creates = [r for r in cluster.requests() if r["method"] == "POST" and r["path"].endswith("/sandboxes")]
        assert len(creates) == 1  # the restart re-adopted the Sandbox it wrote
    finally:
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(SERVE_STOP_SECONDS) == 0


def test_sigterm_with_an_event_stream_open_still_exits_zero_in_time(cluster: FakeCluster, tmp_path: Path) -> None:
    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    cluster.script("worker", [Hang()])
    served = Serve(kubeconfig, tmp_path / "state")
    run_id = served.call("POST", "/runs", json={"workflow": read_document(WORKFLOW)}).json()["runId"]
    stream = served.call("GET", f"/runs/{run_id}/events", stream=True)
    assert stream.status_code == 200
    lines = stream.iter_lines(decode_unicode=True)
    assert next(lines).startswith(": jr2 feed of")  # a follower is attached, its worker busy for good
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(SERVE_STOP_SECONDS) == 0, "".join(served.lines)
    rest = list(lines)  # the stream ended with the server (a hang here is the bug), whole frames only
    assert all(not line or line.startswith((":", "id:", "event:", "data:")) for line in rest), rest
    stream.close()


@linux_only
def test_a_supervised_serve_stops_at_sigterm_as_serve_does(cluster: FakeCluster, tmp_path: Path) -> None:
    served = Serve(cluster.write_kubeconfig(str(tmp_path / "kubeconfig")), tmp_path / "state", extra=["--supervise"])
    [child] = children(served.proc.pid)  # serve, started by its supervisor
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(SERVE_STOP_SECONDS) == 0, "".join(served.lines)
    served.log.whole(10)
    assert any("stopped in" in line for line in served.lines), "".join(served.lines)
    assert not any("did not stop" in line or "Traceback" in line for line in served.lines), "".join(served.lines)
    assert ended(child)  # ended with its supervisor's stop


@linux_only
def test_a_supervised_serve_whose_threads_cannot_run_is_ended_at_its_budget_exit_0_and_restores(
        cluster: FakeCluster, tmp_path: Path) -> None:
    """Serve's SIGTERM handler needs serve's interpreter lock; with thousands of threads waking at once it did
    not run for minutes (issue 29's 5,000-run stop). A stopped process stands in for that: none of its threads
    runs, so only the supervisor can end it — at the budget, exit 0, every step it took on disk."""
    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    cluster.script("worker", [Say("working on it"), Hang()], [Say("again, from the start"), Pick("finish")])
    served = Serve(kubeconfig, tmp_path / "state", extra=["--supervise"])
    run_id = served.call("POST", "/runs", json={"workflow": read_document(WORKFLOW)}).json()["runId"]
    wait_until(lambda: (served.call("GET", f"/runs/{run_id}").json().get("turn") or {}).get("phase") == "running",
               timeout=30, what="the Turn running")
    [child] = children(served.proc.pid)
    os.kill(child, signal.SIGSTOP)
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(SERVE_STOP_SECONDS) == 0, "".join(served.lines)
    served.log.whole(10)
    said = [line for line in served.lines if "did not stop within its 10 s budget" in line]
    assert len(said) == 1 and "ERROR" in said[0] and not served.tracebacks(), "".join(served.lines)
    wait_until(lambda: ended(child), what="serve reaped")
    second = Serve(kubeconfig, tmp_path / "state")
    try:
        wait_until(lambda: second.call("GET", f"/runs/{run_id}").json().get("status") == "done", timeout=30,
                   what="the restored run to finish")
    finally:
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(SERVE_STOP_SECONDS) == 0


def test_supervise_is_refused_for_the_dev_server_in_one_line() -> None:
    out = jr2("serve", "--fake-cluster", "--supervise")
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "--supervise is for the pod's serve" in out.stderr


def test_a_cluster_that_refuses_the_token_is_not_ready_and_says_why(cluster: FakeCluster, tmp_path: Path) -> None:
    import yaml

    config = cluster.kubeconfig()
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-clusters-token")
    config["users"][0]["user"]["tokenFile"] = str(wrong)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    served = Serve(str(kubeconfig), tmp_path / "state")
    try:
        health = served.call("GET", "/healthz")
        assert health.status_code == 503 and "has not listed yet" in health.json()["reason"]
        wait_until(lambda: any("WARNING" in line and "401" in line for line in served.lines),
                   what="the refusal logged at the default level")
        assert not any("not-the-clusters-token" in line for line in served.lines)  # never the token itself
    finally:
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(SERVE_STOP_SECONDS) == 0


def test_a_busy_port_is_one_line_and_exit_2(cluster: FakeCluster, tmp_path: Path) -> None:
    import socket

    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = jr2("serve", "--namespace", "jr2", "--state-dir", str(tmp_path / "s"), "--kubeconfig", kubeconfig,
                  "--listen", f"127.0.0.1:{port}")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "cannot listen there" in out.stderr, out.stderr
    assert not (tmp_path / "s").exists()  # a start refused leaves nothing behind


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        ((), {"JR2_INSTANCE_TOKEN": ""}, "the Instance token is missing"),
        ((), {"JR2_INSTANCE_TOKEN": "short"}, "shorter than 16 characters"),
        ((), {"JR2_SIGNING_KEY": ""}, "the signing key is missing"),
        ((), {"JR2_SIGNING_KEY": "too-short"}, "shorter than 32 bytes"),
        (("--token-file", "/nonexistent/token"), {}, "cannot read /nonexistent/token"),
        (("--listen", "nonsense"), {}, "is not HOST:PORT"),
        (("--listen", "127.0.0.1:70000"), {}, "is not HOST:PORT"),
        (("--namespace", "Not_A_Namespace"), {}, "is not a valid namespace"),
        (("--kubeconfig", "/nonexistent/kubeconfig"), {}, "/nonexistent/kubeconfig"),
        (("--instance-harness", "notaurl"), {}, "is not an http(s) URL"),
        (("--instance-harness", "http://h:99999"), {}, "is not an http(s) URL"),
        (("--sandbox-image", ""), {}, "is not an image reference"),
        (("--sandbox-image", "ghcr.io/jr2/sandbox latest"), {}, "is not an image reference"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], env: dict[str, str],
                                          says: str) -> None:
    base = ["--namespace", "jr2", "--state-dir", str(tmp_path / "state"), "--kubeconfig", str(tmp_path / "none")]
    argv = list(base)
    for i in range(0, len(args), 2):  # a later flag overrides the base's
        if args[i] in argv:
            argv[argv.index(args[i]) + 1] = args[i + 1]
        else:
            argv += [args[i], args[i + 1]]
    out = jr2("serve", *argv, env=serve_env(**env))
    assert out.returncode == 2, out
    assert says in out.stderr and out.stderr.strip().count("\n") == 0, out.stderr
    assert "Traceback" not in out.stderr


def test_an_unwritable_state_dir_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    kubeconfig = tmp_path / "kubeconfig"  # read, never reached: the state dir is refused first
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: "
                          "{server: 'http://127.0.0.1:9'}}]\nusers: [{name: u, user: {token: t}}]\n"
                          "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    out = jr2("serve", "--namespace", "jr2", "--state-dir", str(blocked / "state"), "--kubeconfig", str(kubeconfig),
              "--listen", "127.0.0.1:0")
    assert out.returncode == 2 and "--state-dir" in out.stderr and out.stderr.strip().count("\n") == 0


def test_a_missing_namespace_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = jr2("serve", "--state-dir", str(tmp_path))
    assert out.returncode == 2 and "--namespace" in out.stderr and out.stderr.strip().count("\n") == 0


def test_the_readmes_serve_on_the_fake_cluster_recipe_runs_the_example_to_done(tmp_path: Path) -> None:
    """README: `fake-cluster --pick-first` and `serve` started apart, the example run to its end."""
    import subprocess
    import sys
    from importlib import resources

    kubeconfig = tmp_path / "kubeconfig"
    fake = subprocess.Popen([sys.executable, "-m", "jr2_actors", "fake-cluster", "--pick-first", "--kubeconfig-out",
                             str(kubeconfig)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=serve_env(TMPDIR=str(tmp_path)))
    try:
        wait_until(lambda: kubeconfig.exists() and kubeconfig.stat().st_size > 0, timeout=30, what="its kubeconfig")
        served = Serve(str(kubeconfig), tmp_path / "state")
        try:
            example = resources.files("jr2_actors").joinpath("examples/fix-and-review.yaml").read_text()
            run_id = served.call("POST", "/runs", json={"workflow": read_document(example)}).json()["runId"]
            wait_until(lambda: served.call("GET", f"/runs/{run_id}").json().get("status") != "running", timeout=60,
                       what="the example run to end")
            assert served.call("GET", f"/runs/{run_id}").json()["status"] == "done"
        finally:
            served.proc.send_signal(signal.SIGTERM)
            assert served.proc.wait(SERVE_STOP_SECONDS) == 0
    finally:
        fake.send_signal(signal.SIGINT)
        assert fake.wait(15) == 130
