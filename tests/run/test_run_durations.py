"""A run's `durationSeconds` is timed on the monotonic clock where this process opened it: a wall-clock step
(NTP) during the run bends neither it nor its stored row; a run opened by an earlier process counts the wall
clock's difference up to its restore (clamped at 0) and the monotonic clock from there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run import messages as run
from jr2_actors.run.core import RunCore
from jr2_actors.run.listing.wire import listing_doc, status_doc, stored_listing_doc
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.workflow import parse_workflow, read_document

WALL0 = 1_790_000_000.0
AFTER = 600.0
STEP_BACK = 3600.0  # the wall clock is set back an hour in the middle of the run
WAITS = f"""
name: waits
workspaces:
  W: {{size: {{cpu: "1", memory: "1Gi"}}}}
agents:
  worker: {{instructions: "You work.", workspace: W, access: write}}
start: wait
states:
  wait:
    after: {{seconds: {AFTER:g}, to: done}}
  done: {{final: done}}
"""


class SteppedWall(VirtualClock):
    """The virtual clock, whose wall reading can be stepped as NTP steps a real one; monotonic never is."""

    def __init__(self) -> None:
        super().__init__(settle=True)
        self.wall_offset = 0.0

    def wall(self) -> float:
        return super().wall() + self.wall_offset


def started_core() -> RunCore:
    document = read_document(WAITS)
    assert isinstance(document, dict)
    core = RunCore("r-durations", parse_workflow(document), document)
    core.step(run.Start(), 0.0, WALL0)
    return core


def test_a_wall_step_back_during_a_run_leaves_its_duration_to_the_monotonic_clock(tmp_path: Path) -> None:
    clock = SteppedWall()
    with FakeCluster(namespace="jr2", clock=clock) as cluster:
        client = cluster.client()
        try:
            with Orchestrator(client, state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key,
                              clock=clock) as orchestrator:
                run_id = orchestrator.submit(read_document(WAITS))
                clock.run_until(lambda: (orchestrator.status(run_id) or {}).get("state") == "wait")
                clock.advance(AFTER / 2)
                clock.wall_offset -= STEP_BACK
                clock.run_until(lambda: (orchestrator.status(run_id) or {}).get("status") == "done")
                final = orchestrator.status(run_id) or {}
                assert final["durationSeconds"] == AFTER  # wall end - wall start would be 0 (clamped) here
                listed = {r["runId"]: r for r in orchestrator.finished_runs()}
                assert listed[run_id]["durationSeconds"] == AFTER
        finally:
            client.close()


def test_the_duration_is_kept_in_the_blob_and_shown_from_the_stored_row() -> None:
    core = started_core()
    core.step(run.RunTick(), AFTER, WALL0 - STEP_BACK)
    assert core.status == "done"
    assert status_doc(core)["durationSeconds"] == listing_doc(core)["durationSeconds"] == AFTER
    blob = json.loads(json.dumps(core.snapshot()))
    assert stored_listing_doc(core.run_id, blob)["durationSeconds"] == AFTER
    restored, _ = RunCore.restore(blob, 10_000.0, WALL0 + 10_000.0)
    assert status_doc(restored)["durationSeconds"] == AFTER  # a finished run's duration is never re-timed


def test_a_run_restored_counts_the_wall_clock_up_to_the_restore_and_the_monotonic_after() -> None:
    blob = json.loads(json.dumps(started_core().snapshot()))
    # The next process restores it 100 s (wall) later, on its own monotonic clock; then the wall steps back.
    restored, _ = RunCore.restore(blob, 5_000.0, WALL0 + 100.0)
    restored.step(run.RunTick(), 5_000.0 + AFTER - 100.0, WALL0 + 100.0 - STEP_BACK)
    assert restored.status == "done"
    assert status_doc(restored)["durationSeconds"] == AFTER


def test_a_wall_clock_behind_the_stored_start_counts_nothing_before_the_restore() -> None:
    blob = json.loads(json.dumps(started_core().snapshot()))
    restored, _ = RunCore.restore(blob, 5_000.0, WALL0 - STEP_BACK)  # this machine's wall clock is behind
    restored.step(run.Cancel("enough"), 5_050.0, WALL0 - STEP_BACK + 50.0)
    assert restored.status == "cancelled"
    assert status_doc(restored)["durationSeconds"] == 50.0  # never negative: 0 before the restore, 50 after


@pytest.mark.parametrize("stored", [-5, "600", float("nan"), float("inf"), True, None, [600]])
def test_a_stored_duration_that_is_not_a_number_of_seconds_falls_back_on_the_wall_times(stored: object) -> None:
    blob = {"document": {"name": "waits"}, "status": "done", "state": "done", "startedWall": WALL0,
            "endedWall": WALL0 + 42.0, "durationSeconds": stored}
    assert stored_listing_doc("r-x", blob)["durationSeconds"] == 42.0


def test_status_and_runs_show_the_servers_duration_not_the_wall_times_difference() -> None:
    from jr2_actors.commands.client import runs_table
    from jr2_actors.run.listing.render import status_lines
    from jr2_actors.values.timefmt import rfc3339_ms

    # The wall clock was set back an hour during a run of 600 s: its two wall times are 3,000 s apart, backwards.
    doc = {"runId": "r-1", "workflow": "waits", "status": "done", "state": "done", "startedAt": rfc3339_ms(WALL0),
           "endedAt": rfc3339_ms(WALL0 + AFTER - STEP_BACK), "durationSeconds": AFTER}
    assert any("took 10m00s" in line for line in status_lines(doc, WALL0 + 10_000.0))
    assert "10m00s" in runs_table([doc], WALL0 + 10_000.0, wide=False)[1]
