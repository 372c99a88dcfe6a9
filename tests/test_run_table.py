"""Issue 18 item 2: `GET /runs` answers from the table the runs keep current by tells (`run/table.py`), never
by asking a run — a run stuck in a handler is listed with its last known row, and each row is the one
`GET /runs/{id}` shows."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang
from jr2_actors.fake.operator.core import Node
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run.actor import RunActor
from jr2_actors.run.table import RunRow, RunTable
from jr2_actors.values.workflow import read_document
from tests.waiting import wait_until
from tests.workflows import one_state

BLOCK = "block until the gate opens"  # a message only `_Blocking` runs take: its handler waits on the gate
LISTED = ("runId", "placing", "workflow", "status", "state", "startedAt", "endedAt", "durationSeconds")


def test_the_table_keeps_the_last_row_told_and_lists_only_the_ids_asked_in_order() -> None:
    table = RunTable()
    table.tell(RunRow("r-b", {"runId": "r-b", "state": "one"}))
    table.tell(RunRow("r-a", {"runId": "r-a", "state": "one"}))
    table.tell(RunRow("r-b", {"runId": "r-b", "state": "two"}))
    assert table.rows(["r-b", "r-a", "r-gone"]) == [{"runId": "r-a", "state": "one"},
                                                    {"runId": "r-b", "state": "two"}]
    table.rows(["r-a"])[0]["cluster"] = {}  # a copy: the caller's additions do not reach the table
    assert table.rows(["r-a"]) == [{"runId": "r-a", "state": "one"}]
    table.forget("r-a")
    assert table.rows(["r-a", "r-b"]) == [{"runId": "r-b", "state": "two"}] and len(table) == 1
    with pytest.raises(TypeError, match="RunRow"):
        table.tell("not a row")


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(nodes=[Node("only", 4000, 16 * 2**30)], start_seconds=0.05, long_poll=0.5,
                     bookmark_interval=None) as c:
        yield c


def _listed(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k in LISTED}


@pytest.mark.slow
def test_runs_answers_while_a_run_is_stuck_in_a_handler_with_its_last_row(cluster: FakeCluster, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    entered = threading.Event()

    class _Blocking(RunActor):
        def on_receive(self, message: Any) -> Any:
            if message == BLOCK:
                entered.set()
                gate.wait(60)
                return None
            return super().on_receive(message)

    monkeypatch.setattr("jr2_actors.orchestrator.RunActor", _Blocking)
    cluster.script("worker", [Hang()], [Hang()])
    with Orchestrator(cluster.client(), state_dir=str(tmp_path), signing_key=cluster.signing_key,
                      instance_harness=cluster.instance_harness_url) as orch:
        stuck, other = orch.submit(read_document(one_state("stuck"))), orch.submit(read_document(one_state("other")))
        wait_until(lambda: all((orch.status(r) or {}).get("turn", {}).get("phase") == "running"
                               for r in (stuck, other)), what="both Turns admitted")
        # `cluster` is the watch's health at each call (shell/last_answer.py), not the run's row: left out here.
        before = {row["runId"]: _listed(row) for row in orch.runs()}
        for run_id in (stuck, other):  # the rows match GET /runs/{id} after the run's changes
            assert _listed(orch.status(run_id) or {}) == before[run_id]
        ref = orch._live(stuck)
        assert ref is not None
        ref.tell(BLOCK)
        try:
            assert entered.wait(30)
            listed = {row["runId"]: _listed(row) for row in orch.runs()}  # answers: no run is asked
            assert listed[stuck] == before[stuck]  # its last known row
            assert listed[other]["workflow"] == "other"
            assert orch.runs(stuck[:6]) and all(r["runId"].startswith(stuck[:6]) for r in orch.runs(stuck[:6]))
        finally:
            gate.set()
        orch.cancel(other)
        assert orch.wait_finished(other, 30)
        assert other not in {row["runId"] for row in orch.runs()}
        assert len(orch.run_table) == 1  # a finished run's row is forgotten
