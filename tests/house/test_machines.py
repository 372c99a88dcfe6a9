"""Every state machine is one `step.Machine` table, and docs/architecture.md carries each as the code has
it; the one misuse policy holds for each: an input off the table raises `OffTable` in the core."""

from __future__ import annotations

from typing import Any

import pytest

from jr2_actors.agent import core as turn
from jr2_actors.agent import messages as seat
from jr2_actors.agent import seat_core
from jr2_actors.run import turn as run_turn
from jr2_actors.run import turn_record
from jr2_actors.values.step import Machine, OffTable
from jr2_actors.watch import stream
from jr2_actors.workspace import core as workspace
from tests.support.paths import DOCS

MACHINES: dict[str, Machine[Any]] = {
    "Workspace": workspace.MACHINE,
    "Turn": turn.MACHINE,
    "the seat": seat_core.MACHINE,
    "the Sandbox watch": stream.MACHINE,
    "the run's Turn": run_turn.TURN,
}


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_the_architecture_doc_carries_each_machines_table_as_the_code_has_it(name: str) -> None:
    doc = (DOCS / "architecture.md").read_text()
    assert MACHINES[name].markdown() in doc


def test_a_turn_input_off_the_table_raises_where_it_used_to_be_dropped_unseen() -> None:
    core = turn.TurnCore("coder", 1, "c-1")
    with pytest.raises(OffTable, match="Turn 1: Events in idle"):
        core.step(seat.Events([], "1"))  # a stream read nobody asked for
    with pytest.raises(OffTable, match="Admitted in idle"):
        core.step(seat.Admitted("s-1", "0"))  # an admission's answer with no admission out


def test_the_stream_keeper_raises_on_a_second_start_and_ignores_a_late_answer() -> None:
    keeper = stream.StreamKeeper()
    assert keeper.step(stream.Started(), 0.0).actions == [stream.ListNow()]
    with pytest.raises(OffTable, match="Started in listing"):
        keeper.step(stream.Started(), 1.0)
    keeper.step(stream.Listed([], "5"), 2.0)
    late = keeper.step(stream.ListFailed(stream.Failure("transport", "late")), 3.0)
    assert (late.actions, late.reports, keeper.phase) == ([], [], "watching")


def test_the_runs_turn_takes_its_own_inputs_only_where_its_table_says() -> None:
    with pytest.raises(OffTable, match="Ready in running"):
        run_turn.TURN.edge("run r turn 1", "running", turn_record.Ready())  # a Turn started twice
    with pytest.raises(OffTable, match="StateLeft in answered"):
        run_turn.TURN.edge("run r turn 1", "answered", turn_record.StateLeft())  # answered: it left with its state
    assert run_turn.TURN.edge("t", "waiting", turn_record.HarnessGone("F-1", "x")).to == frozenset()


def test_a_handler_that_moves_off_its_edge_raises() -> None:
    machine: Machine[object] = Machine("M", ((("a",), int, ("b",), None),))
    machine.move("m", ("a", int), "b")
    with pytest.raises(OffTable, match="int in a cannot lead to c"):
        machine.move("m", ("a", int), "c")
    with pytest.raises(ValueError, match="two rows"):
        Machine("M", ((("a",), int, (), None), (("a", "b"), (str, int), (), None)))
