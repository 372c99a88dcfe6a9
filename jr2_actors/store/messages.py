"""The StoreActor's vocabulary (ADR-0065): what a run or the orchestrator asks of it, and what it answers
— the rows it reads back, and the faults a caller meets. Pure values. Next stage: `actor.py`, the one
writer of `state.db`, which takes them; `rows.py` writes and reads the rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jr2_actors.shell.recipient import Recipient
from jr2_actors.values.errors import Jr2Error
from jr2_actors.values.run_ids import Keyed

# -- what it is asked -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Persist:
    run_id: str
    status: str
    blob: Mapping[str, Any] = field(repr=False)
    reason: str | None = None
    create: bool = False  # the run's first row: refused (`StoreError`) when the id is taken
    keyed: Keyed | None = None  # the request's Idempotency-Key, kept with the first row
    # Told to its recipient once the row is committed, before any ask of the batch is answered (a
    # run's feed lines, published by the store's thread — one thread wake-up fewer on the way to a reader,
    # and still never before the row is on disk, ADR-0065). Not told when the row does not land.
    then: tuple[Recipient, object] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Withdraw:
    """Told after a run's create whose ask timed out: the client was answered 503, so the row, if the create
    landed after all, is deleted — a run nobody was told of must not start at the next restore (ADR-0065)."""
    run_id: str


@dataclass(frozen=True)
class Restore:
    """Answered with `RestoredRuns`: the live runs, and the live rows set aside as unreadable (the boot's
    restore reads nothing else)."""


@dataclass(frozen=True)
class Fetch:
    run_id: str


@dataclass(frozen=True)
class FindKey:
    """Answered with the run an `Idempotency-Key` made and what its row kept (`Keyed`), or None."""
    key: str


@dataclass(frozen=True)
class ListFinished:
    """Answered with the finished rows whose id starts with `prefix`, newest first, at most `limit`."""
    prefix: str
    limit: int


@dataclass(frozen=True)
class Sweep:
    pass


@dataclass(frozen=True)
class Healthy:
    """Ask: True when the store can write, else why not (`/healthz` reports it)."""


# -- what it answers ------------------------------------------------------------------------------------

class StoreError(Exception):
    """A persist the store refuses: our bug (a bad status, a blob that is not JSON, a taken id), never the
    disk's."""


class StoreUnusable(Jr2Error):
    """`state.db` is not a run store of ours (not sqlite, damaged, another program's or another schema's):
    the process cannot start on it. One line, naming the file."""


@dataclass(frozen=True)
class Unreadable:
    """A live row `restore` set aside: it stays on disk as it is."""

    run_id: str
    problem: str


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    status: str
    blob: dict[str, Any]
    reason: str | None
    updated_at: float


@dataclass(frozen=True)
class RestoredRuns:
    runs: list[RunRecord]
    unreadable: list[Unreadable]


class DiskWriteFailed(Exception):
    """The disk refused a persist (read-only, full, I/O error): nothing is wrong with the row; try again."""
