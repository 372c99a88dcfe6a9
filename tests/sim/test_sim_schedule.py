"""The simulation's schedules: drawn from the seed alone, covering every fault, and `--seeds` parsed strictly."""

from __future__ import annotations

import pytest

from jr2_actors.sim.schedule import FAULT_KINDS, SHAPES, draw, parse_seeds
from jr2_actors.values.workflow import parse_workflow
from jr2_actors.watch.identity import sandbox_name


def test_a_seed_draws_the_same_schedule_every_time_and_another_seed_another() -> None:
    assert draw(7).describe() == draw(7).describe()
    assert draw(7) == draw(7)
    assert draw(7).describe() != draw(8).describe()


def test_over_a_hundred_seeds_every_fault_and_every_workflow_shape_is_drawn() -> None:
    kinds = {f.kind for seed in range(1, 101) for f in draw(seed).faults}
    shapes = {r.shape for seed in range(1, 101) for r in draw(seed).runs}
    assert kinds == set(FAULT_KINDS)
    assert shapes == set(SHAPES)


def test_every_drawn_workflow_is_valid_and_routes_each_fault_back_into_its_state() -> None:
    for seed in range(1, 30):
        for plan in draw(seed).runs:
            workflow = parse_workflow(plan.document)
            for name, state in workflow.states.items():
                if state.turn is not None:
                    assert state.on["workspace.lost"] == name and state.on["agent.fault"] == name


def test_runs_of_a_seed_have_distinct_sandbox_names_though_two_share_an_id_prefix() -> None:
    schedule = draw(3)
    ids = [r.run_id for r in schedule.runs]
    assert ids[0][:8] == ids[1][:8] and ids[0] != ids[1]
    names = [sandbox_name(r.run_id, w) for r in schedule.runs for w in r.document["workspaces"]]
    assert len(names) == len(set(names))


def test_guard_kill_peaks_are_unique_in_a_seed_so_each_notice_can_be_counted() -> None:
    for seed in range(1, 50):
        schedule = draw(seed)
        peaks = [p for r in schedule.runs for p in r.guard_peaks] + [f.peak for f in schedule.faults if f.peak]
        assert len(peaks) == len(set(peaks))


def test_faults_are_in_time_order_within_the_window() -> None:
    for seed in range(1, 50):
        times = [f.at for f in draw(seed).faults]
        assert times == sorted(times) and all(0 <= t <= 4.0 for t in times)


@pytest.mark.parametrize(("text", "seeds"), [("7", [7]), ("1-3", [1, 2, 3]), ("1,5,9-10", [1, 5, 9, 10]),
                                             ("2,1-3", [2, 1, 3]), (" 4 ", [4])])
def test_seeds_are_read_as_numbers_and_ranges_each_once(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "x", "5-1", "-3", "1-", "1-x", "0-100000", "1.5", "²"])
def test_a_seeds_text_that_is_not_seeds_is_refused_by_its_part(text: str) -> None:
    with pytest.raises(ValueError, match="seed"):
        parse_seeds(text)


def test_a_restart_draws_its_watch_lag_from_the_seed_within_two_seconds_either_way_and_nothing_else_does() -> None:
    lags = []
    for seed in range(1, 80):
        schedule = draw(seed)
        assert schedule == draw(seed)  # the same seed, the same lags
        for f in schedule.faults:
            if f.kind in ("harness-restart", "kernel-kill"):
                assert -2.0 <= f.lag <= 2.0 and f"watch {f.lag:+.2f}s" in f.describe()
                lags.append(f.lag)
            else:
                assert f.lag == 0.0
    assert min(lags) < 0 < max(lags)  # the watch leads the new process, or lags it


def test_seed_32_draws_the_runs_and_faults_it_drew_before_the_watch_lag() -> None:
    # The lag has a generator of its own: a seed replays the schedule it named before (docs/reliability.md).
    schedule = draw(32)
    assert [(f.at, f.kind) for f in schedule.faults] == [(0.08, "kernel-kill"), (0.48, "harness-draining"),
                                                         (0.65, "token-rotation"), (0.67, "quota")]
    assert [r.shape for r in schedule.runs] == ["review", "fan-out", "same-agent"]
