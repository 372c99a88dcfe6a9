"""What the orchestrator does with a run whose actor died (our bug). Pure: the orchestrator performs it.

A run is restored from its last row, as a restart would restore it (its Workspaces reconcile with the
watch, its Turn is admitted again, ADR-0063), up to `RUN_REVIVALS` deaths in this process; past that the
run is abandoned: its row ends `error` naming the deaths and the last error. A row that is not live any
more (the run finished, or it is gone) has nothing to restore.
Next stage: `revival.py`, the supervisor that performs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from jr2_actors.values.constants import RUN_REVIVALS


@dataclass(frozen=True)
class Verdict:
    do: Literal["revive", "abandon", "nothing"]
    why: str  # the line the orchestrator logs (and, abandoned, the run's fault)


def after_death(run_id: str, deaths: int, error: str, *, row_live: bool, revivals: int = RUN_REVIVALS) -> Verdict:
    """The `deaths`-th death of `run_id`'s actor in this process, of `error`, with its row live or not."""
    if not row_live:
        return Verdict("nothing", f"run {run_id}: its actor died ({error}) and its row is not live; nothing to "
                                  "restore")
    if deaths <= revivals:
        return Verdict("revive", f"run {run_id}: its actor died ({error}); restored from its last row ({deaths} "
                                 f"of {revivals})")
    return Verdict("abandon", f"the run's actor died {deaths} times, last: {error}")
