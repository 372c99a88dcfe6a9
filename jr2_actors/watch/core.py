"""WatchCore: the one Sandbox watch of the process, as a deterministic state machine (ADR-0063).

Theory of operation. Two halves, one reason to change each, as client-go splits its Reflector from its
Store and handlers:

- `watch/stream.py` — `StreamKeeper` keeps the stream: list, watch, the terminations and what follows
  each, backoff, the resume version, the failure bound and the degraded mode that never stops for good.
- `watch/deliveries.py` — `DeliveryCache` decides what each waiter is told: identity, dedup,
  retirement, the latest delivery per key, registrations, blindness and the reconcile after it.

This facade hands every wire input to the keeper and every signal the keeper passes on (a list's
snapshot, a watch event, the watch going blind) and every registration to the cache, and returns one
`Step`: what to deliver, what to report, the calls to make next and when to be woken. It does no I/O,
reads no clock and starts no thread; the WatchActor performs the calls and feeds their results back.
A dropped watch is never reported as loss.
"""

from __future__ import annotations

from dataclasses import dataclass

from jr2_actors.kube.frames import WatchEvent
from jr2_actors.values.backoff import Backoff, Jitter
from jr2_actors.values.constants import (
    STALL_BOUND_SECONDS,
    WATCH_BACKOFF,
    WATCH_LIST_DEADLINE_SECONDS,
    WATCH_MAX_FAILURE_SECONDS,
    WATCH_MAX_FAILURES,
)
from jr2_actors.values.step import Step
from jr2_actors.watch.deliveries import (
    KEEP_LATEST,
    Delivery,
    DeliveryCache,
    OwnStampsView,
    SandboxGone,
    SandboxSeen,
    WatchFailed,
)
from jr2_actors.watch.identity import Foreign, SandboxKey
from jr2_actors.watch.stream import (
    Action,
    FrameReceived,
    Phase,
    StreamInput,
    StreamKeeper,
    Terminated,
    UnusableFrame,
)


@dataclass(frozen=True, slots=True)
class Registered:
    key: SandboxKey
    restored: bool = False


@dataclass(frozen=True, slots=True)
class Unregistered:
    key: SandboxKey


@dataclass(frozen=True, slots=True)
class Ended:
    """The run is over for good (`DeliveryCache.run_ended`)."""

    run_id: str


Input = StreamInput | Registered | Unregistered | Ended
Report = Terminated | Foreign | UnusableFrame


# The one Step shape (step.py): its reports hold the deliveries (what a waiter is told, in order) first, then
# what is only for whoever operates the pod (terminations, foreign Sandboxes, unusable frames).
WatchStep = Step[Action, Delivery | Report]
DELIVERIES = (SandboxSeen, SandboxGone, WatchFailed)


def deliveries(step: WatchStep) -> tuple[Delivery, ...]:
    """The step's deliveries, in order."""
    return tuple(r for r in step.reports if isinstance(r, DELIVERIES))


def reports(step: WatchStep) -> tuple[Report, ...]:
    """The step's reports for the operator (no delivery)."""
    return tuple(r for r in step.reports if not isinstance(r, DELIVERIES))


class WatchCore:
    def __init__(self, *, stall_bound: float = STALL_BOUND_SECONDS, list_deadline: float = WATCH_LIST_DEADLINE_SECONDS,
                 max_failures: int = WATCH_MAX_FAILURES, max_failure_seconds: float = WATCH_MAX_FAILURE_SECONDS,
                 rng: Jitter | None = None, backoff: Backoff = WATCH_BACKOFF, keep_latest: int = KEEP_LATEST,
                 deliver_all: bool = False, own_stamps: OwnStampsView | None = None) -> None:
        self.keeper = StreamKeeper(stall_bound=stall_bound, list_deadline=list_deadline, max_failures=max_failures,
                                   max_failure_seconds=max_failure_seconds, rng=rng, backoff=backoff)
        self.cache = DeliveryCache(keep_latest=keep_latest, deliver_all=deliver_all, own_stamps=own_stamps)

    def step(self, event: Input, now: float) -> WatchStep:
        if isinstance(event, Registered):
            told = self.cache.register(event.key, event.restored)
            return Step(reports=tuple(told.deliveries), deadline=self.deadline)
        if isinstance(event, Unregistered):
            self.cache.unregister(event.key)
            return Step(deadline=self.deadline)
        if type(event) is FrameReceived and type(event.frame) is WatchEvent \
                and self.keeper.took_event(event.stream, event.frame, now):  # nearly every frame: no table walk
            told = self.cache.change(event.frame)
            return Step((), (*told.deliveries, *told.reports), self.deadline)
        if isinstance(event, Ended):
            self.cache.run_ended(event.run_id)
            return Step(deadline=self.deadline)
        kept = self.keeper.step(event, now)
        delivered: list[Delivery] = []
        said: list[Report] = list(kept.reports)
        for signal in kept.signals:
            told = self.cache.hear(signal)
            delivered += told.deliveries
            said += told.reports
        return Step(tuple(kept.actions), (*delivered, *said), self.deadline)

    # -- what the shell and its Health read --------------------------------------------------------------

    @property
    def deadline(self) -> float | None:
        return self.keeper.deadline

    @property
    def deadline_kept(self) -> bool:
        """Whether the deadline is one the server's keepalives push on: a watching stream's stall bound (a
        driven VirtualClock may leap over it with them, `Timers.schedule(kept=True)`)."""
        return self.keeper.phase == "watching"

    @property
    def phase(self) -> Phase:
        return self.keeper.phase

    @property
    def up(self) -> bool:
        """False while degraded (blind past the failure bound) or stopped."""
        return not self.keeper.degraded and self.keeper.phase != "stopped"

    @property
    def resource_version(self) -> str | None:
        return self.keeper.resource_version

    @property
    def stream(self) -> int:
        return self.keeper.stream

    @property
    def failures(self) -> int:
        return self.keeper.failures

    @property
    def last_error(self) -> str | None:
        return self.keeper.last_error

    @property
    def failing_since(self) -> float | None:
        return self.keeper.failing_since

    @property
    def waiters(self) -> frozenset[SandboxKey]:
        return frozenset(self.cache.waiters)

    @property
    def tracked(self) -> int:
        return self.cache.tracked

    @property
    def listed(self) -> bool:
        return self.cache.listed_once


