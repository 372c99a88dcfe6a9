"""Issue 18 item 2: `GET /runs` answers from the table the runs keep current by tells (`run/listing/table.py`), never
by asking a run — a run stuck in a handler is listed with its last known row, and each row is the one
`GET /runs/{id}` shows."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jr2_actors.api.app import Api
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang
from jr2_actors.fake.operator.core import Node
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run.actor import RunActor
from jr2_actors.run.listing.table import RunRow, RunTable, encode_row, with_member
from jr2_actors.values.workflow import read_document
from tests.support.backends import QuietBackend
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

BLOCK = "block until the gate opens"  # a message only `_Blocking` runs take: its handler waits on the gate
LISTED = ("runId", "placing", "workflow", "status", "state", "startedAt", "endedAt", "durationSeconds")


def test_the_table_keeps_the_last_row_told_and_lists_the_runs_of_a_prefix_in_order() -> None:
    table = RunTable()
    table.enter(RunRow("r-b", {"runId": "r-b", "state": "one"}))
    table.enter(RunRow("r-a", {"runId": "r-a", "state": "one"}))
    table.enter(RunRow("q-c", {"runId": "q-c", "state": "one"}))
    table.tell(RunRow("r-b", {"runId": "r-b", "state": "two"}))
    assert table.rows("r-") == [{"runId": "r-a", "state": "one"}, {"runId": "r-b", "state": "two"}]
    assert [row["runId"] for row in table.rows()] == ["q-c", "r-a", "r-b"] and table.rows("r-x") == []
    table.rows("r-a")[0]["cluster"] = {}  # a copy: the caller's additions do not reach the table
    assert table.rows("r-a") == [{"runId": "r-a", "state": "one"}]
    table.forget("r-a")
    assert table.rows("r") == [{"runId": "r-b", "state": "two"}] and len(table) == 2
    assert "r-b" in table and "r-a" not in table
    with pytest.raises(TypeError, match="RunRow"):
        table.tell("not a row")


_IDS = st.text(alphabet="ab\u00e9\U0010ffff", max_size=3)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["enter", "tell", "forget"]), _IDS, st.integers(0, 9)), max_size=40),
       st.lists(_IDS, max_size=6))
def test_the_sorted_table_lists_what_a_dict_filtered_and_sorted_would(ops: list[tuple[str, str, int]],
                                                                      prefixes: list[str]) -> None:
    """The table against its model (a dict, filtered by `startswith` and sorted at each call): any order of
    enters, tells and forgets, any prefix — the empty one, one no id has, one past every id."""
    table, model = RunTable(), {}
    for op, run_id, n in ops:
        row = {"runId": run_id, "n": n}
        if op == "enter":
            table.enter(RunRow(run_id, row))
            model[run_id] = row
        elif op == "tell":
            table.tell(RunRow(run_id, row))
            if run_id in model:
                model[run_id] = row
        else:
            table.forget(run_id)
            model.pop(run_id, None)
    for prefix in ["", *prefixes]:
        expected = [model[k] for k in sorted(model) if k.startswith(prefix)]
        assert table.rows(prefix) == expected
        assert table.encoded(prefix) == [encode_row(row) for row in expected]
    assert len(table) == len(model)


# What `listing_doc` makes, and what JSON must escape: a non-ASCII name, quotes, a float, a list.
ROWS: list[dict[str, Any]] = [
    {"runId": "r-0b", "placing": ["W", "X"], "workflow": "r\u00e9sum\u00e9 \"q\"", "status": "running",
     "state": "s", "startedAt": "2026-12-02T01:00:00.000Z", "durationSeconds": 1.5},
    {"runId": "r-0a", "workflow": "w", "status": "running", "state": "t", "startedAt": "2026-12-02T01:00:00.000Z"},
    {"runId": "r-1c", "workflow": "\u2603", "status": "running", "state": "u", "endedAt": None},
]


def _entered() -> RunTable:
    table = RunTable()
    for row in ROWS:
        table.enter(RunRow(row["runId"], row))
    return table


def test_the_encoded_listing_is_byte_for_byte_what_encoding_the_rows_gave() -> None:
    table = _entered()
    old = json.dumps({"runs": table.rows()}, separators=(",", ":")).encode()  # the path before issue 18
    assert b'{"runs":[' + b",".join(table.encoded()) + b"]}" == old
    problem = {"reachable": False, "error": "r\u00e9fus\u00e9"}
    spliced = with_member(table.encoded(), "cluster", problem)
    assert [json.loads(line) for line in spliced] == [{**row, "cluster": problem} for row in table.rows()]
    assert spliced == [json.dumps({**row, "cluster": problem}, separators=(",", ":")).encode()
                       for row in table.rows()]


def test_a_row_told_after_it_was_encoded_is_encoded_again() -> None:
    table = _entered()
    first = table.encoded("r-0a")
    table.tell(RunRow("r-0a", {**ROWS[1], "state": "later"}))
    assert first != table.encoded("r-0a")
    assert json.loads(table.encoded("r-0a")[0]) == {**ROWS[1], "state": "later"}


def test_a_row_told_after_its_run_finished_never_lists_it_again() -> None:
    table = _entered()
    table.forget("r-0a")  # its RunFinished
    table.tell(RunRow("r-0a", {**ROWS[1], "state": "a seat's late report"}))
    table.tell(RunRow("r-zz", {"runId": "r-zz"}))  # never entered
    assert table.encoded("r-0a") == table.encoded("r-z") == [] and table.rows("r-0a") == table.rows("r-z") == []
    assert len(table) == 2


class _TableBackend(QuietBackend):
    """The orchestrator's listing: the table's bytes for the live runs of a prefix, finished ones as dicts."""

    def __init__(self, table: RunTable) -> None:
        self.table = table

    def runs_encoded(self, prefix: str = "") -> list[bytes]:
        return self.table.encoded(prefix)

    def finished_runs(self, prefix: str = "", limit: int = 500) -> list[dict[str, Any]]:
        done = {"runId": "r-0f", "workflow": "w", "status": "done", "state": "end"}
        return [done] if done["runId"].startswith(prefix) else []


def _get(api: Api, query: str) -> tuple[str, dict[str, str], bytes]:
    answer: list[Any] = []
    body = b"".join(api({"REQUEST_METHOD": "GET", "PATH_INFO": "/runs", "QUERY_STRING": query,
                         "HTTP_AUTHORIZATION": "Bearer tok"}, lambda status, headers: answer.append((status, headers))))
    return answer[0][0], dict(answer[0][1]), body


@pytest.mark.parametrize("query", ["", "prefix=r-0", "prefix=r-1", "prefix=r-9", "all=true&prefix=r-0", "all=true"])
def test_get_runs_answers_the_joined_rows_as_encoding_them_did(query: str) -> None:
    backend = _TableBackend(_entered())
    status, headers, body = _get(Api(backend, "tok"), query)
    prefix = query.partition("prefix=")[2]
    live = sorted((row for row in ROWS if row["runId"].startswith(prefix)), key=lambda row: row["runId"])
    every = live + (backend.finished_runs(prefix) if "all=true" in query else [])
    assert status == "200 OK" and headers["Content-Length"] == str(len(body))
    assert body == json.dumps({"runs": every}, separators=(",", ":")).encode()


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


def test_a_run_whose_actor_could_not_start_is_not_listed(cluster: FakeCluster, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The table is the live set (`GET /runs` reads no other): a run entered whose actor then failed to start
    has nobody to keep its row current or forget it, so the failed start forgets it."""

    class _Unstartable(RunActor):
        @classmethod
        def start(cls, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("cannot start a thread")

    with Orchestrator(cluster.client(), state_dir=str(tmp_path), signing_key=cluster.signing_key,
                      instance_harness=cluster.instance_harness_url) as orch:
        monkeypatch.setattr("jr2_actors.orchestrator.RunActor", _Unstartable)
        with pytest.raises(RuntimeError, match="cannot start"):
            orch.submit(read_document(one_state("never")))
        assert orch.runs() == [] and orch.runs_encoded() == [] and len(orch.run_table) == 0


def test_a_run_saved_as_the_orchestrator_stops_is_not_listed_without_an_actor(cluster: FakeCluster, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop that begins while a submit saves its first row: the row is on disk for the next start, but no
    actor runs it here, so the table (the live set `GET /runs` reads) does not list it."""
    with Orchestrator(cluster.client(), state_dir=str(tmp_path), signing_key=cluster.signing_key,
                      instance_harness=cluster.instance_harness_url) as orch:
        save_first = orch._save_first

        def save_then_stop_begins(*args: Any) -> None:
            save_first(*args)
            with orch._lock:
                orch._stopping = True  # what `stop()` sets first

        monkeypatch.setattr(orch, "_save_first", save_then_stop_begins)
        run_id = orch.submit(read_document(one_state("late")))
        assert orch.runs() == [] and len(orch.run_table) == 0 and run_id not in orch.run_table
    with Orchestrator(cluster.client(), state_dir=str(tmp_path), signing_key=cluster.signing_key,
                      instance_harness=cluster.instance_harness_url) as again:
        assert [row["runId"] for row in again.runs()] == [run_id]  # the next start runs it
