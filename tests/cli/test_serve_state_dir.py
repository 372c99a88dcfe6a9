"""`serve` and its state directory as processes (issue 16 items 7 and 8): one owner per `--state-dir` — a
second `serve` is one line naming the holder's pid and exit 2, and a SIGKILLed owner's lock goes with it;
a `state.db` that is not ours is one line and exit 2, never a traceback."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang
from jr2_actors.values.constants import SERVE_STOP_SECONDS
from jr2_actors.values.workflow import read_document
from tests.support.serving import KEY, Serve, jr2
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
WORKFLOW = one_state("owned")


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None, signing_key=KEY.encode()) as c:
        yield c


def serve_args(state: Path, kubeconfig: str) -> list[str]:
    return ["serve", "--namespace", "jr2", "--state-dir", str(state), "--kubeconfig", kubeconfig,
            "--listen", "127.0.0.1:0"]


def test_a_second_serve_on_one_state_dir_is_one_line_naming_the_holder_and_exit_2(cluster: FakeCluster,
                                                                                  tmp_path: Path) -> None:
    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    cluster.script("worker", [Hang()], [Hang()])
    state = tmp_path / "state"
    first = Serve(kubeconfig, state)
    try:
        run_id = first.call("POST", "/runs", json={"workflow": read_document(WORKFLOW)}).json()["runId"]
        second = jr2(*serve_args(state, kubeconfig))
        assert second.returncode == 2, second
        assert second.stderr.strip().count("\n") == 0 and "Traceback" not in second.stderr, second.stderr
        assert f"--state-dir {state}: in use by process {first.proc.pid} " in second.stderr, second.stderr
        assert [r["runId"] for r in first.call("GET", "/runs").json()["runs"]] == [run_id]  # the owner goes on
    finally:
        first.proc.send_signal(signal.SIGKILL)  # the kernel lets go of the lock: no stale lock blocks a restart
        first.proc.wait(SERVE_STOP_SECONDS)
    third = Serve(kubeconfig, state)
    try:
        assert [r["runId"] for r in third.call("GET", "/runs").json()["runs"]] == [run_id]
    finally:
        third.proc.send_signal(signal.SIGTERM)
        assert third.proc.wait(SERVE_STOP_SECONDS) == 0


def _random_bytes(path: Path) -> None:
    path.write_bytes(bytes((i * 7919 + 13) % 256 for i in range(16384)))


def _another_schema(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO runs (name) VALUES ('not a jr2 run')")


def _another_schema_in_wal_mode(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
    db.close()  # the last connection's close checkpoints and removes its -wal and -shm


@pytest.mark.parametrize(("make", "says"), [
    (_random_bytes, "not a jr2 run store (file is not a database)"),
    (_another_schema, "not a jr2 run store (its runs table has the columns id, name)"),
    (_another_schema_in_wal_mode, "not a jr2 run store (its runs table has the columns id, name)"),
])
def test_a_state_db_that_is_not_ours_is_one_line_and_exit_2(cluster: FakeCluster, tmp_path: Path, make: object,
                                                            says: str) -> None:
    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    state = tmp_path / "state"
    state.mkdir()
    assert callable(make)
    make(state / "state.db")
    before = (state / "state.db").read_bytes()
    out = jr2(*serve_args(state, kubeconfig))
    assert out.returncode == 2, out
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr, out.stderr
    assert f"{state / 'state.db'}: {says}" in out.stderr, out.stderr
    assert (state / "state.db").read_bytes() == before  # left as it is
    # nothing made beside it but the state folder's lock (kept by design: store/lock.py)
    assert sorted(p.name for p in state.iterdir()) == ["lock", "state.db"]
