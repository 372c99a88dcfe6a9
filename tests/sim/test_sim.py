"""The simulation end to end: seeds played on the fake cluster hold every invariant, and `jr2-actors sim`
refuses a bad `--seeds` in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from jr2_actors.sim.runner import Sim
from jr2_actors.sim.schedule import draw
from tests.support.cli_process import jr2

pytestmark = pytest.mark.slow


def test_a_seed_with_no_fault_ends_every_run_done_and_leaves_nothing(tmp_path: Path) -> None:
    schedule = draw(1, faults=0)
    result = Sim(schedule, str(tmp_path)).run()
    assert result.violations == []
    assert set(result.statuses.values()) == {"done"} and len(result.statuses) == len(schedule.runs)


# A fixed set CI plays on every change against each fake Harness (docs/reliability.md); any seed's failure fails
# it. Twelve seeds a mode, one test a play, so pytest-xdist's workers share them out; each plays in a process of
# its own, as `sim --jobs` does, so no seed's threads or patched store reach another's.
CI_SEEDS = range(1, 13)


@pytest.mark.parametrize("seed", CI_SEEDS)
@pytest.mark.parametrize("harness", ["lenient", "strict"])
def test_the_fixed_ci_seeds_hold_every_invariant(harness: str, seed: int) -> None:
    done = jr2("sim", "--seeds", str(seed), "--harness", harness, timeout=110)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"1 seed(s) ({harness})" in done.stdout and ", 0 failed" in done.stdout


def test_sim_refuses_a_harness_that_is_not_one_in_one_line_and_exit_2() -> None:
    done = jr2("sim", "--seeds", "1", "--harness", "kind")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "harness" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("seeds", ["x", "5-1", ""])
def test_sim_refuses_seeds_that_are_not_seeds_in_one_line_and_exit_2(seeds: str) -> None:
    done = jr2("sim", "--seeds", seeds)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "seed" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("harness", ["lenient", "strict"])
def test_a_crash_trial_kills_serve_mid_burst_and_every_accepted_run_still_ends_done(tmp_path: Path,
                                                                                   harness: str) -> None:
    from jr2_actors.sim.crash import Trial

    result = Trial(1, 0, str(tmp_path), harness_mode=harness).run()
    assert result.violations == []
    assert result.accepted > 0 and set(result.statuses.values()) == {"done"}
    assert len(result.statuses) == result.accepted
