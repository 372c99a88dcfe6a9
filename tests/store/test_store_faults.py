"""Issue 16 items 6-8 through the Orchestrator and its API: 201 means the run's first row is on disk; a store
that cannot write refuses new runs with 503, says so on /healthz for as long as it lasts (and no longer),
and its live runs hold before their next side effect and go on when it can write again; one owner per state
directory; a row that cannot be restored is set aside while every other run is restored."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiServer
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run.actor import RunActor
from jr2_actors.store.lock import StateDirInUse
from jr2_actors.store.messages import Fetch
from jr2_actors.store.metrics import STORE_PERSIST_FAILURES, STORE_SET_ASIDE_ROWS
from jr2_actors.values.constants import RUN_REVIVALS
from jr2_actors.values.errors import Unavailable
from jr2_actors.values.workflow import read_document
from tests.support.metrics_text import value
from tests.support.probes import CRASH, crashing
from tests.support.stores import unwritable
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
TOKEN = "t0ken-for-the-store-tests-0123456789"
WORKFLOW = one_state("stored")


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None) as c:
        yield c


def orchestrator(cluster: FakeCluster, state: Path) -> Orchestrator:
    return Orchestrator(cluster.client(), state_dir=str(state), signing_key=cluster.signing_key)


def rows(state: Path) -> list[tuple[str, str]]:
    """What is on disk, live rows and the history's, read on a connection of the test's own."""
    found: list[tuple[str, str]] = []
    for name in ("state.db", "history.db"):
        if (state / name).exists():
            with sqlite3.connect(state / name) as db:
                found += [(str(r), str(s)) for r, s in db.execute("SELECT run_id, status FROM runs")]
    return sorted(found)


def failures(orch: Orchestrator) -> float:
    return value(orch.metrics(), STORE_PERSIST_FAILURES) or 0.0


def sandboxes_created(cluster: FakeCluster) -> int:
    return sum(1 for r in cluster.requests() if r["method"] == "POST" and r["path"].endswith("/sandboxes"))


# -- item 6 ------------------------------------------------------------------------------------------------

def test_post_runs_answers_503_with_the_reason_while_the_store_cannot_write_and_201_means_on_disk(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse = unwritable(monkeypatch)
    state = tmp_path / "state"
    with orchestrator(cluster, state) as orch:
        server = ApiServer(Api(orch, TOKEN), timeout=2.0)
        server.start()
        try:
            def call(method: str, path: str, **kw: Any) -> requests.Response:
                return requests.request(method, server.url + path, headers={"Authorization": f"Bearer {TOKEN}"},
                                        timeout=10, **kw)

            wait_until(lambda: call("GET", "/healthz").status_code == 200, what="ready")
            refuse.set()
            for _ in range(3):
                resp = call("POST", "/runs", json={"workflow": read_document(WORKFLOW)})
                assert resp.status_code == 503, resp.text
                assert resp.json()["error"] == ("the store cannot write: OperationalError: attempt to write a "
                                                "readonly database")
                assert resp.headers["Retry-After"] == "5"
            health = call("GET", "/healthz")
            assert health.status_code == 503 and "the store cannot write" in health.json()["reason"]
            assert call("GET", "/runs").json() == {"runs": []}  # nothing was accepted, so nothing is lost
            assert sandboxes_created(cluster) == 0 and rows(state) == []

            refuse.clear()
            # No run had to write for it: the probe has the store check again, and reads its finding.
            wait_until(lambda: call("GET", "/healthz").status_code == 200, what="ready once the disk writes")
            resp = call("POST", "/runs", json={"workflow": read_document(WORKFLOW)})
            assert resp.status_code == 201, resp.text
            assert rows(state) == [(resp.json()["runId"], "live")]  # on disk when the 201 left
        finally:
            server.stop()


def test_submit_returns_once_the_first_row_is_on_disk_and_refuses_while_the_store_cannot_write(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse = unwritable(monkeypatch)
    cluster.script("worker", [Hang()])
    state = tmp_path / "state"
    with orchestrator(cluster, state) as orch:
        for _ in range(5):
            run_id = orch.submit(read_document(WORKFLOW))
            assert run_id in dict(rows(state))  # on disk as submit returned
        refuse.set()
        with pytest.raises(Unavailable, match=r"the store cannot write: .*readonly"):
            orch.submit(read_document(WORKFLOW), run_id="r-refused")
        assert orch.status("r-refused") is None and "r-refused" not in [i for i, _ in rows(state)]
        refuse.clear()


def test_a_create_whose_ask_timed_out_is_withdrawn_when_it_lands_so_no_run_refused_503_ever_starts(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store slow past the submit's ask: the client is told 503, but the create is still in the store's
    mailbox and lands later — it must not become a run nobody was told of (restored and run at the next start)."""
    from jr2_actors.store.rows import RunStore

    gate, held = threading.Event(), threading.Event()
    write = RunStore.persist_many

    def slow(store: RunStore, *args: Any, **kwargs: Any) -> Any:
        held.set()
        gate.wait(30)  # the disk stalls (an fsync on a busy volume) past the submit's ask
        return write(store, *args, **kwargs)

    state = tmp_path / "state"
    with orchestrator(cluster, state) as orch:
        monkeypatch.setattr("jr2_actors.orchestrator.PERSIST_ASK_SECONDS", 0.2)
        monkeypatch.setattr(RunStore, "persist_many", slow)
        with pytest.raises(Unavailable):
            orch.submit(read_document(WORKFLOW))
        assert held.is_set()
        gate.set()  # the create lands now, after its 503
        assert orch._store is not None
        assert orch._store.ask(Fetch("x"), timeout=10) is None  # behind the late create (and its withdrawal)
        assert rows(state) == []
        assert orch.runs() == []
    with orchestrator(cluster, state) as again:  # a restart restores nothing: the refused run never starts
        assert again.runs() == [] and rows(state) == []
    assert sandboxes_created(cluster) == 0


def test_a_live_run_whose_persist_fails_holds_before_its_next_side_effect_and_goes_on_when_the_store_writes(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    refuse = unwritable(monkeypatch)
    cluster.script("worker", [Pick("finish")])
    state = tmp_path / "state"
    with caplog.at_level(logging.WARNING), orchestrator(cluster, state) as orch:
        run_id = orch.submit(read_document(WORKFLOW))
        refuse.set()  # the run's next row (its Workspace's answer) comes before its Turn is admitted
        wait_until(lambda: failures(orch) >= 3, what="the held save tried three times")
        assert cluster.admissions() == []  # the step after the failed save never left the actor
        assert rows(state) == [(run_id, "live")]  # its last row is kept
        ok, reason = orch.health()
        assert not ok and reason.startswith("the store cannot write: ") and "readonly" in reason
        assert [run["runId"] for run in orch.runs()] == [run_id]  # alive, not dead and revived
        refuse.clear()
        assert orch.wait_finished(run_id, 30)
        final = orch.status(run_id)
        assert final is not None and final["status"] == "done"
        assert orch.health() == (True, "")
    assert rows(state) == [(run_id, "done")]
    assert len(cluster.admissions()) == 1 and sandboxes_created(cluster) == 1
    held = [r.getMessage() for r in caplog.records if "could not be written" in r.getMessage()]
    assert len(held) == 1 and held[0].startswith(f"run {run_id}: its row could not be written")
    assert not any("died" in r.getMessage() for r in caplog.records)  # no actor died of the disk


def test_a_revival_the_store_cannot_serve_makes_health_false_until_it_lands(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The orchestrator's health is the present: a run whose actor died past its revivals while the store
    cannot write its end is named on /healthz, and /healthz is true again once its end is written."""
    monkeypatch.setattr("jr2_actors.orchestrator.RunActor", crashing(RunActor))
    refuse = unwritable(monkeypatch)
    cluster.script("worker", [Hang()])
    state = tmp_path / "state"
    with orchestrator(cluster, state) as orch:
        run_id = orch.submit(read_document(WORKFLOW))
        wait_until(lambda: len(cluster.admissions()) == 1, what="the Turn admitted")
        refuse.set()
        for _ in range(RUN_REVIVALS):
            old = orch._live(run_id)
            assert old is not None
            old.tell(CRASH)

            def revived(old: Any = old) -> bool:
                ref = orch._live(run_id)
                return ref is not None and ref is not old and ref.is_alive()

            wait_until(revived, what="the run's actor revived")
        orch._live(run_id).tell(CRASH)  # type: ignore[union-attr]  # past its revivals: its end must be written
        wait_until(lambda: "waits for the store" in orch.health()[1], what="health naming the run")
        assert orch.health()[1].startswith(f"run {run_id} died and waits for the store to restore it: ")
        refuse.clear()
        assert orch.wait_finished(run_id, 30)
        final = orch.status(run_id)
        assert final is not None and final["status"] == "error"
        wait_until(lambda: orch.health() == (True, ""), what="health true again")


# -- item 7 ------------------------------------------------------------------------------------------------

def test_one_orchestrator_owns_a_state_dir_until_it_stops(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.script("worker", [Hang()], [Hang()])
    state = tmp_path / "state"
    first = orchestrator(cluster, state).start()
    try:
        second = orchestrator(cluster, state)
        with pytest.raises(StateDirInUse, match=f"in use by process {os.getpid()} "):
            second.start()
        assert first.health()[1] != "not started" and first.submit(read_document(WORKFLOW))  # the owner goes on
    finally:
        first.stop()
    with orchestrator(cluster, state) as third:  # the lock went with the stop
        assert len(third.runs()) == 1  # and the owner restores what the first left


# -- item 8 ------------------------------------------------------------------------------------------------

def test_a_live_row_that_cannot_be_restored_is_set_aside_and_every_other_run_is_restored(
        cluster: FakeCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cluster.script("worker", [Hang()], [Hang()], [Hang()], [Pick("finish")])  # the last: the good run's again
    state = tmp_path / "state"
    with orchestrator(cluster, state) as orch:
        good = orch.submit(read_document(WORKFLOW), run_id="r-good")
        orch.submit(read_document(WORKFLOW), run_id="r-not-json")
        orch.submit(read_document(WORKFLOW), run_id="r-not-a-run")
        wait_until(lambda: len(cluster.admissions()) == 3, what="three Turns admitted")
    with sqlite3.connect(state / "state.db") as db:
        db.execute("UPDATE runs SET blob = '{not json' WHERE run_id = 'r-not-json'")
        db.execute("UPDATE runs SET blob = '{\"version\": 1}' WHERE run_id = 'r-not-a-run'")
    with sqlite3.connect(state / "state.db") as db:
        before = db.execute("SELECT run_id, status, blob FROM runs WHERE run_id != ?", (good,)).fetchall()
    with caplog.at_level(logging.ERROR, logger="jr2_actors.orchestrator"), orchestrator(cluster, state) as orch:
        assert [run["runId"] for run in orch.runs()] == [good]
        assert value(orch.metrics(), STORE_SET_ASIDE_ROWS) == 2
        assert orch.status("r-not-json") is None and orch.health() != (False, "not started")
        assert orch.wait_finished(good, 30)
    lines = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert sorted(line.split(" ")[1] for line in lines) == ["r-not-a-run", "r-not-json"]  # one line each
    with sqlite3.connect(state / "state.db") as db:
        assert db.execute("SELECT run_id, status, blob FROM runs WHERE run_id != ?", (good,)).fetchall() == before
