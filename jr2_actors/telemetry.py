"""The orchestrator's metrics: one `Telemetry` per orchestrator, exposed in the Prometheus text format.

Why one object and no global: an embedding test harness runs several orchestrators in one process, so
each has its own `CollectorRegistry` (never prometheus_client's global one). Each family owns its
recorder and its metric names (`shell/metrics.py`, and `metrics.py` in `watch/`, `workspace/`, `store/`,
`kube/`, `harness/`, `run/`); this module only composes them into one registry, above the families: no family imports
it. An actor made outside an orchestrator gets its family's `OFF` recorder, which records nothing.

Labels are bounded: by actor kind (the class), by a fixed set of values (an HTTP verb, an event type, a
cause), and never by run, Workspace or request path. docs/operations.md says what each metric means and
which alert to set.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from jr2_actors.agent.metrics import HarnessMetrics
from jr2_actors.kube.metrics import KubeMetrics
from jr2_actors.run.metrics import RunMetrics
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.shell.metrics import ActorMetrics
from jr2_actors.store.metrics import StoreMetrics
from jr2_actors.watch.metrics import WatchMetrics
from jr2_actors.workspace.metrics import WorkspaceMetrics


class Telemetry:
    """One orchestrator's metrics: its own registry, and each family's recorder on it.

    `clock`: what the mailboxes stamp and ages are read on (the real clock by default; a test injects a
    `VirtualClock` to age a message without waiting).
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        clock = clock or SystemClock()
        self.registry = CollectorRegistry()
        self.watch = WatchMetrics(self.registry, clock)
        self.workspaces = WorkspaceMetrics(self.registry, clock)
        self.store = StoreMetrics(self.registry, clock)
        self.kube = KubeMetrics(self.registry)
        self.harness = HarnessMetrics(self.registry)
        self.runs = RunMetrics(self.registry, clock)
        self.actors = ActorMetrics(self.registry, clock)  # last, as /metrics has always listed it

    def exposition(self) -> bytes:
        """The Prometheus text format 0.0.4, as `/metrics` serves it."""
        return generate_latest(self.registry)


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""What `/metrics` is served as: the Prometheus text format `generate_latest` writes."""
