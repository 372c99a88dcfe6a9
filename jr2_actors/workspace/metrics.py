"""The Workspaces' metrics: how long a watch delivery took, from the API server's write to the
WorkspaceActor's receipt (only where the server stamps its writes: the fake cluster).

The name is the watch's (`jr2_watch_delivery_latency_seconds`): it measures the watch's path, at its end.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Histogram

from jr2_actors.shell.actor import Metered
from jr2_actors.shell.clock import Clock, SystemClock

WATCH_DELIVERY_LATENCY = "jr2_watch_delivery_latency_seconds"

# From the server's write to the Workspace's receipt: about a millisecond on loopback, tens on a cluster.
DELIVERY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class WorkspaceMetrics:
    def __init__(self, registry: CollectorRegistry | None, clock: Clock) -> None:
        self._clock = clock
        self._on = registry is not None
        self._delivery = Histogram(WATCH_DELIVERY_LATENCY, "From the API server's write to the WorkspaceActor's "
                                                           "receipt of the delivery (only where the server "
                                                           "stamps its writes: the fake cluster).",
                                   buckets=DELIVERY_BUCKETS, registry=registry)

    def delivered(self, written_at: float) -> None:
        """A WorkspaceActor received a delivery of a write the server stamped at `written_at` (wall)."""
        if self._on:
            self._delivery.observe(max(self._clock.wall() - written_at, 0.0))


class WorkspaceTelemetry(Metered, Protocol):
    """What a WorkspaceActor is counted in (the orchestrator's `Telemetry` is one)."""

    @property
    def workspaces(self) -> WorkspaceMetrics: ...


OFF = WorkspaceMetrics(None, SystemClock())
"""For a Workspace outside an orchestrator: records nothing."""
