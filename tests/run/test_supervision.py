"""The supervision policy is a pure function: died n times → revive, abandon, or nothing to restore."""

from __future__ import annotations

from jr2_actors.run.supervision import after_death
from jr2_actors.values.constants import RUN_REVIVALS


def test_a_run_is_revived_up_to_its_revivals_then_abandoned_naming_its_deaths() -> None:
    for deaths in range(1, RUN_REVIVALS + 1):
        verdict = after_death("r-1", deaths, "RuntimeError: boom", row_live=True)
        assert verdict.do == "revive" and f"({deaths} of {RUN_REVIVALS})" in verdict.why
    past = after_death("r-1", RUN_REVIVALS + 1, "RuntimeError: boom", row_live=True)
    assert past.do == "abandon"
    assert past.why == f"the run's actor died {RUN_REVIVALS + 1} times, last: RuntimeError: boom"


def test_a_row_no_longer_live_has_nothing_to_restore_whatever_the_count() -> None:
    assert after_death("r-1", 1, "x", row_live=False).do == "nothing"
    assert after_death("r-1", RUN_REVIVALS + 5, "x", row_live=False).do == "nothing"
