"""The watch's metrics: events by type, re-lists by cause, reconnects (counted as they
happen), and its state, published by the WatchActor after each step and read at scrape time.

Labels are bounded: a frame's type (the event types of `kube.frames.EventType` and the three others), a
re-list's cause, the keeper's `Phase`. docs/operations.md says what each means and which alert to set.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric

from jr2_actors.kube.frames import Bookmark, Decoded, ErrorFrame, EventType, FrameError, WatchEvent
from jr2_actors.shell.actor import Metered
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.watch import core as watch_core
from jr2_actors.watch import stream
from jr2_actors.watch.stream import Phase

WATCH_EVENTS = "jr2_watch_events_total"
WATCH_RELISTS = "jr2_watch_relists_total"
WATCH_RECONNECTS = "jr2_watch_reconnects_total"
WATCH_UP = "jr2_watch_up"
WATCH_DEGRADED = "jr2_watch_degraded"
WATCH_PHASE = "jr2_watch_phase"
WATCH_FAILURES = "jr2_watch_failures"
WATCH_WAITERS = "jr2_watch_waiters"
WATCH_TRACKED = "jr2_watch_tracked_objects"
WATCH_LAST_FRAME_AGE = "jr2_watch_last_frame_age_seconds"
WATCH_VERSION_AGE = "jr2_watch_resource_version_age_seconds"

FrameType = EventType | Literal["BOOKMARK", "ERROR", "unusable"]
RelistCause = Literal["expired", "silence", "error_frame", "degraded", "unusable_frame", "list_failed", "other"]
WATCH_EVENT_TYPES: tuple[FrameType, ...] = (*typing.get_args(EventType), "BOOKMARK", "ERROR", "unusable")
RELIST_CAUSES: tuple[RelistCause, ...] = typing.get_args(RelistCause)
WATCH_PHASES: tuple[Phase, ...] = typing.get_args(Phase)


def frame_type(frame: Decoded) -> FrameType:
    """A watch frame's `type` label: the event's type, BOOKMARK, ERROR, or `unusable`."""
    if isinstance(frame, WatchEvent):
        return frame.type
    if isinstance(frame, Bookmark):
        return "BOOKMARK"
    if isinstance(frame, ErrorFrame):
        return "ERROR"
    return "unusable"


def relist_cause(event: watch_core.Input, report: stream.Terminated, degraded: bool) -> RelistCause:
    """Why the watch re-lists, from the input that ended the stream and the keeper's report of it. A
    re-list while degraded (or the one that declares it) is `degraded`, whatever failed this time."""
    if report.action == "degraded" or degraded:
        return "degraded"
    if report.termination is stream.Termination.EXPIRED:
        return "expired"
    if report.termination is stream.Termination.SILENCE:
        return "silence"
    if isinstance(event, stream.FrameReceived):
        if isinstance(event.frame, ErrorFrame):
            return "error_frame"
        if isinstance(event.frame, FrameError):
            return "unusable_frame"
    if isinstance(event, stream.ListFailed | stream.StreamTick):  # a failed list, or one out of time
        return "list_failed"
    return "other"


@dataclass(frozen=True)
class WatchState:
    """What the WatchActor publishes after each step, read at scrape time."""

    phase: Phase
    degraded: bool
    failures: int
    waiters: int
    tracked: int
    resource_version: str | None
    listed: bool = False  # a list has answered since start: readiness (`/healthz`) reads it here


class WatchMetrics:
    """The one Sandbox watch: events by type, re-lists by cause, reconnects (counted as
    they happen), and its state — phase, degraded, the age of the resume version, seconds since the last
    frame — published by the WatchActor after each step and read at scrape time."""

    def __init__(self, registry: CollectorRegistry | None, clock: Clock) -> None:
        self._clock = clock
        self._on = registry is not None
        events = Counter(WATCH_EVENTS, "Watch frames received, by type (an unusable line is `unusable`).",
                         ["type"], registry=registry)
        self._events = {t: events.labels(t) for t in WATCH_EVENT_TYPES}
        relists = Counter(WATCH_RELISTS, "Re-lists decided, by cause (every one while degraded is `degraded`).",
                          ["cause"], registry=registry)
        self._relists = {c: relists.labels(c) for c in RELIST_CAUSES}
        self._reconnects = Counter(WATCH_RECONNECTS, "Watches opened after the first one (a resume or after a "
                                                     "re-list).", registry=registry)
        self._state: WatchState | None = None
        self._version_since = 0.0
        self._frame_at = 0.0
        self._opened = False
        if registry is not None:
            registry.register(self)

    @property
    def on(self) -> bool:
        """Counted in a registry (False for `OFF`): the shell skips building what would not be recorded."""
        return self._on

    def frame(self, frame: Decoded) -> None:
        if self._on:
            self._frame_at = self._clock.monotonic()
            self._events[frame_type(frame)].inc()

    def relist(self, cause: RelistCause) -> None:
        if self._on:
            self._relists[cause if cause in self._relists else "other"].inc()

    def watch_opened(self) -> None:
        if self._on:
            if self._opened:
                self._reconnects.inc()
            self._opened = True

    @property
    def state(self) -> WatchState | None:
        """The last state the WatchActor published (None before its first step, or when not counted)."""
        return self._state

    def publish(self, state: WatchState) -> None:
        if self._on:
            now = self._clock.monotonic()
            previous = self._state
            if previous is None:
                self._frame_at = now  # "seconds since the last frame, or since the watch started"
            if previous is None or previous.resource_version != state.resource_version:
                self._version_since = now
            self._state = state

    def collect(self) -> Iterator[Metric]:
        state = self._state
        if state is None:
            return
        now = self._clock.monotonic()
        yield GaugeMetricFamily(WATCH_UP, "1 while the watch is not degraded (nor stopped).",
                                value=0.0 if state.degraded or state.phase == "stopped" else 1.0)
        yield GaugeMetricFamily(WATCH_DEGRADED, "1 while the watch is blind past its failure bound, re-listing.",
                                value=1.0 if state.degraded else 0.0)
        phase = GaugeMetricFamily(WATCH_PHASE, "The watch's phase: 1 for the current one.", labels=["phase"])
        for name in WATCH_PHASES:
            phase.add_metric([name], 1.0 if state.phase == name else 0.0)
        yield phase
        yield GaugeMetricFamily(WATCH_FAILURES, "Failures in a row (the bound turns the watch degraded).",
                                value=state.failures)
        yield GaugeMetricFamily(WATCH_WAITERS, "Sandboxes with a registered recipient.", value=state.waiters)
        yield GaugeMetricFamily(WATCH_TRACKED, "Sandboxes the watch follows now.", value=state.tracked)
        yield GaugeMetricFamily(WATCH_LAST_FRAME_AGE, "Seconds since the last frame (or since the watch started).",
                                value=max(now - self._frame_at, 0.0))
        if state.resource_version is not None:
            yield GaugeMetricFamily(WATCH_VERSION_AGE, "Seconds since the resume version last moved (absent while "
                                                       "re-listing, when there is none).",
                                    value=max(now - self._version_since, 0.0))


class WatchTelemetry(Metered, Protocol):
    """What a WatchActor is counted in (the orchestrator's `Telemetry` is one)."""

    @property
    def watch(self) -> WatchMetrics: ...


OFF = WatchMetrics(None, SystemClock())
"""For a watch outside an orchestrator: records nothing."""
