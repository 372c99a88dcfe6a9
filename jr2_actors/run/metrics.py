"""The runs' metrics: live runs, their Workspaces by phase, open waits by `on` and reason and the oldest on
each `on` (published by each RunActor after its step, read at scrape time); and the notices told to Agents by
kind, read off the runs' feed on its way to the hub.

Labels are bounded and ours alone: Workspace phases are `workspace.messages.WorkspacePhase` and `releasing`, waits
are `workspace.core.WaitOn` by `run.listing.wire.WAIT_REASONS`, notice kinds `run.notices.NoticeKind`. Nothing a
workflow's author wrote (its name, its states, Workspaces, agents or picks) is a label: `/metrics` is open, and the
runs by state are for the token's holders (`GET /runs`, which `jr2-actors top` reads when it has the token).
Next stage: `telemetry.py`, which composes it into the registry.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric

from jr2_actors.agent.metrics import HarnessTelemetry
from jr2_actors.run.core import RunCore
from jr2_actors.run.feed.hub import FeedHub, Published
from jr2_actors.run.feed.lines import AdmittedLine
from jr2_actors.run.listing.wire import WAIT_REASONS, wait_reason
from jr2_actors.run.notices import NoticeKind
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.shell.recipient import Recipient
from jr2_actors.workspace.messages import WaitOn, WorkspacePhase
from jr2_actors.workspace.metrics import WorkspaceTelemetry

RUNS_LIVE = "jr2_runs_live"
WORKSPACES = "jr2_workspaces"
RUN_WAITS_OPEN = "jr2_run_waits_open"
RUN_WAIT_OLDEST = "jr2_run_wait_oldest_seconds"
HARNESS_NOTICES = "jr2_harness_notices_total"  # the Harness's name: the notices are told in its admissions

WORKSPACE_PHASES: tuple[str, ...] = (*typing.get_args(WorkspacePhase), "releasing")
WAIT_ONS: tuple[WaitOn, ...] = typing.get_args(WaitOn)
NOTICE_KINDS: tuple[NoticeKind, ...] = typing.get_args(NoticeKind)
# The open waits by `on` and the wait's reason (run.listing.wire.WAIT_REASONS), each pair a scheduler
# gives shown from the start (at 0), so a rate or an alert has its series before the first wait: a quota
# wait is `quota`, a node wait any of the others (or `quota`, for a node wait whose words name a quota).
WAIT_SERIES: tuple[tuple[str, str], ...] = (*(("node", r) for r in WAIT_REASONS if r != "quota"), ("quota", "quota"))


@dataclass(frozen=True)
class RunView:
    """What the scrape needs of one live run, published by its RunActor after each step."""

    run_id: str
    phases: tuple[str, ...] = ()  # its Workspaces' phases
    waits: tuple[tuple[str, str, float], ...] = ()  # (on, reason, since wall) of each open wait

    @classmethod
    def of(cls, run: RunCore) -> RunView:
        return cls(run.run_id,
                   tuple("releasing" if r.releasing else r.phase for r in run.workspaces.values()),
                   tuple((w.on, wait_reason(w.on, w.message), w.since) for _, w in run.waiting()))


class RunMetrics:
    """Live runs, their Workspaces by phase, open waits by `on` and the oldest of each."""

    def __init__(self, registry: CollectorRegistry | None, clock: Clock) -> None:
        self._clock = clock
        self._on = registry is not None
        self._lock = threading.Lock()
        self._runs: dict[str, RunView] = {}
        notices = Counter(HARNESS_NOTICES, "Notices told to Agents in admissions, by kind (each notice the "
                                           "ledger raises is told once, at the next admission in its scope).",
                          ["kind"], registry=registry)
        self._notices = {k: notices.labels(k) for k in (*NOTICE_KINDS, "other")}
        if registry is not None:
            registry.register(self)

    def update(self, view: RunView) -> None:
        """A RunActor's step ended: its run as it now is (`RunView.of`)."""
        if self._on:
            with self._lock:
                self._runs[view.run_id] = view

    def forget(self, run_id: str) -> None:
        if self._on:
            with self._lock:
                self._runs.pop(run_id, None)

    def feed_tap(self, hub: FeedHub) -> Recipient:
        """A recipient for the runs' feed that hands it to the hub, then counts the notices of each admission
        the hub took (a line told twice is counted once)."""
        return _NoticeTap(self._notices, hub) if self._on else hub

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            views = list(self._runs.values())
        now = self._clock.wall()
        phases = dict.fromkeys(WORKSPACE_PHASES, 0)
        waits: dict[tuple[str, str], int] = dict.fromkeys(WAIT_SERIES, 0)
        oldest: dict[str, float] = dict.fromkeys(WAIT_ONS, 0.0)
        for view in views:
            for phase in view.phases:
                key = phase if phase in phases else "other"
                phases[key] = phases.get(key, 0) + 1
            for on, reason, since in view.waits:
                key = on if on in oldest else "other"
                pair = (key, reason if reason in WAIT_REASONS else "other")
                waits[pair] = waits.get(pair, 0) + 1
                oldest[key] = max(oldest.get(key, 0.0), now - since)
        yield GaugeMetricFamily(RUNS_LIVE, "Live runs (by state: GET /runs, with the token).", value=len(views))
        workspaces = GaugeMetricFamily(WORKSPACES, "Workspaces of live runs by phase.", labels=["phase"])
        for phase, n in phases.items():
            workspaces.add_metric([phase], n)
        yield workspaces
        open_waits = GaugeMetricFamily(RUN_WAITS_OPEN, "Open waits of Workspaces by what they wait on (a node "
                                                       "with room, or quota) and why (the scheduler's words "
                                                       "classified: capacity, taint, selector, quota, other).",
                                       labels=["on", "reason"])
        oldest_wait = GaugeMetricFamily(RUN_WAIT_OLDEST, "How long the oldest open wait on each has lasted.",
                                        labels=["on"])
        for (on, reason), n in sorted(waits.items()):
            open_waits.add_metric([on, reason], n)
        for on, age in oldest.items():
            oldest_wait.add_metric([on], max(age, 0.0))
        yield open_waits
        yield oldest_wait


class _NoticeTap:
    def __init__(self, counters: Mapping[str, Counter], hub: FeedHub) -> None:
        self._counters = counters
        self._hub = hub

    def tell(self, message: object) -> None:
        """`run.feed.Published`: its `admitted` lines carry the notices told."""
        if not isinstance(message, Published):
            self._hub.tell(message)
            return
        taken = self._hub.publish(message.run_id, message.events, finished=message.finished,
                                  dropped=message.dropped)
        for event in taken:
            if isinstance(event.line, AdmittedLine):
                for notice in event.line.notices:
                    self._counters.get(notice.kind, self._counters["other"]).inc()


class RunTelemetry(WorkspaceTelemetry, HarnessTelemetry, Protocol):
    """What a RunActor is counted in, with the Workspaces and seats it starts (`Telemetry` is one)."""

    @property
    def runs(self) -> RunMetrics: ...


OFF = RunMetrics(None, SystemClock())
"""For a run outside an orchestrator: records nothing."""
