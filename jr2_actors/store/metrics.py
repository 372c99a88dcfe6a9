"""The run store's metrics: persist latency and blob size, rows by status, sweeps, rows set aside.

Rows are labelled by the store's own statuses (`store.rows.STATUSES`), nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from jr2_actors.shell.actor import Metered
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.store.files import Footprint
from jr2_actors.store.rows import STATUSES

STORE_PERSIST_SECONDS = "jr2_store_persist_seconds"
STORE_PERSIST_FAILURES = "jr2_store_persist_failures_total"
STORE_BLOB_BYTES = "jr2_store_blob_bytes"
STORE_ROWS = "jr2_store_rows"
STORE_SWEEPS = "jr2_store_sweeps_total"
STORE_SWEPT_ROWS = "jr2_store_swept_rows_total"
STORE_SET_ASIDE_ROWS = "jr2_store_set_aside_rows"
STORE_FILE_BYTES = "jr2_store_file_bytes"
STORE_FINISHED_RUN_BYTES = "jr2_store_finished_run_bytes"
STORE_VOLUME_AVAILABLE_BYTES = "jr2_store_volume_available_bytes"
STORE_VOLUME_CAPACITY_BYTES = "jr2_store_volume_capacity_bytes"

# A 1 KB persist takes about 0.03 ms, a 100 KB one about 0.5 ms (docs/benchmarks.md); the alert is a p99
# over 50 ms, so the buckets are fine below it and coarse above.
PERSIST_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
# A run's blob is about 1 KB, a Pool of 40 about 100 KB (ADR-0065).
BLOB_BUCKETS = (1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0)


class StoreMetrics:
    """The run store: persist latency and blob size (each persist), rows by status (recounted by the
    StoreActor at most once a second after writes), sweeps, and the live rows set aside as unrestorable."""

    def __init__(self, registry: CollectorRegistry | None, clock: Clock) -> None:
        self._on = self.enabled = registry is not None
        self.monotonic: Callable[[], float] = clock.monotonic  # what a persist is timed on
        self._persist = Histogram(STORE_PERSIST_SECONDS, "Time to write one run's row (the StoreActor's "
                                                         "upsert, JSON encoding included).",
                                  buckets=PERSIST_BUCKETS, registry=registry)
        self._failures = Counter(STORE_PERSIST_FAILURES, "Persists that raised (the disk, or our bug).",
                                 registry=registry)
        self._blob = Histogram(STORE_BLOB_BYTES, "Size of the blob written by one persist.", buckets=BLOB_BUCKETS,
                               registry=registry)
        sweeps = Counter(STORE_SWEEPS, "Sweeps of finished rows older than 7 days, by outcome.", ["outcome"],
                         registry=registry)
        self._sweeps = {o: sweeps.labels(o) for o in ("ok", "failed")}
        self._swept = Counter(STORE_SWEPT_ROWS, "Rows the sweeps removed.", registry=registry)
        self._rows: dict[str, int] | None = None
        self._footprint: Footprint | None = None
        self._set_aside = 0
        self.write_error = ""  # published by the StoreActor: why it cannot write now ("" while it can)
        self.checked_at: float | None = None  # when it last found out (a write, or its own check)
        if registry is not None:
            registry.register(self)

    def persisted(self, seconds: float, size: int) -> None:
        if self._on:
            self._persist.observe(seconds)
            self._blob.observe(size)

    def writes(self, error: str) -> None:
        """Whether the store can write, as the StoreActor last found (`/healthz` reads it, never asks)."""
        if self._on:
            self.write_error, self.checked_at = error, self.monotonic()

    def persist_failed(self) -> None:
        if self._on:
            self._failures.inc()

    def swept(self, removed: int | None) -> None:
        """A sweep ended: `removed` rows, or None when it failed."""
        if self._on:
            self._sweeps["ok" if removed is not None else "failed"].inc()
            if removed:
                self._swept.inc(removed)

    def rows(self, counts: dict[str, int]) -> None:
        if self._on:
            self._rows = dict(counts)

    def footprint(self, found: Footprint) -> None:
        """The files' sizes and the volume's room, read with the rows' recount."""
        if self._on:
            self._footprint = found

    def set_aside(self, count: int) -> None:
        """How many live rows this process could not restore (each left on disk as it is)."""
        if self._on:
            self._set_aside = count

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(STORE_SET_ASIDE_ROWS, "Live rows that could not be restored: set aside, left in "
                                                      "state.db as they are (the log names each).",
                                value=self._set_aside)
        found = self._footprint
        if found is not None:
            files = GaugeMetricFamily(STORE_FILE_BYTES, "Size of each of the store's files on the volume.",
                                      labels=["file"])
            for name, size in found.files.items():
                files.add_metric([name], size)
            yield files
            yield GaugeMetricFamily(STORE_FINISHED_RUN_BYTES, "Bytes a finished run takes in history.db now: its "
                                                              "pages in use over its rows (0 when empty).",
                                    value=found.finished_run_bytes)
            yield GaugeMetricFamily(STORE_VOLUME_AVAILABLE_BYTES, "Bytes the state volume still has for the store.",
                                    value=found.volume_available)
            yield GaugeMetricFamily(STORE_VOLUME_CAPACITY_BYTES, "The state volume's size.",
                                    value=found.volume_capacity)
        rows = self._rows
        if rows is None:
            return
        family = GaugeMetricFamily(STORE_ROWS, "Rows in state.db by status (recounted at most once a second).",
                                   labels=["status"])
        for status in STATUSES:
            family.add_metric([status], rows.get(status, 0))
        yield family


class StoreTelemetry(Metered, Protocol):
    """What a StoreActor is counted in (the orchestrator's `Telemetry` is one)."""

    @property
    def store(self) -> StoreMetrics: ...


OFF = StoreMetrics(None, SystemClock())
"""For a store outside an orchestrator: records nothing."""
