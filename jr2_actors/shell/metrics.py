"""The shell's metrics: every actor's mailbox and message counts, by kind, read at scrape time.

Each actor's inbox is a `Mailbox`, which stamps every message with the time it was queued and counts it;
the shell's receive loop times each message on the same clock. `ActorMetrics` reads them over one
orchestrator's live actors, adding what stopped actors had counted. The few instances named (the busiest
mailboxes) are capped at `METRICS_BUSIEST_ACTORS`, each by `shown_name`; every other label is the actor's
kind (its class).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from itertools import compress
from operator import attrgetter
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.shell.kind_totals import Kind, Totals, cumulative
from jr2_actors.shell.mailbox import PROCESSING_BUCKETS, Mailbox
from jr2_actors.shell.stall import StallCheck
from jr2_actors.values.constants import METRICS_BUSIEST_ACTORS

_MAILBOX, _QUEUE = attrgetter("mailbox"), attrgetter("queue")

ACTOR_INSTANCES = "jr2_actor_instances"
ACTOR_MAILBOX_DEPTH = "jr2_actor_mailbox_depth"
ACTOR_MAILBOX_DEPTH_MAX = "jr2_actor_mailbox_depth_max"
ACTOR_MAILBOX_HIGH_WATER = "jr2_actor_mailbox_depth_high_water"
ACTOR_OLDEST_MESSAGE_AGE = "jr2_actor_oldest_message_age_seconds"
ACTOR_MESSAGES_RECEIVED = "jr2_actor_messages_received_total"
ACTOR_MESSAGES_PROCESSED = "jr2_actor_messages_processed_total"
ACTOR_MESSAGE_FAILURES = "jr2_actor_message_failures_total"
ACTOR_PROCESSING_SECONDS = "jr2_actor_processing_seconds"
ACTOR_BUSIEST_DEPTH = "jr2_actor_busiest_mailbox_depth"
ACTOR_BUSIEST_AGE = "jr2_actor_busiest_oldest_message_age_seconds"


def shown_name(actor: Counted) -> str:
    """The name an actor goes by on the open surfaces (`/metrics`, `/healthz`): the run it serves (an id this
    process minted) when it serves one, else its own name. A Workspace's path and an agent's name are a
    workflow author's words, which only the token's holders read."""
    context = getattr(actor, "log_context", None)
    run = context.get("run") if isinstance(context, dict) else None
    return str(run) if run else actor.name


class Counted(Protocol):
    """What `ActorMetrics` reads of an actor: its mailbox and its name (`shell.actor.Shell` is one)."""

    mailbox: Mailbox
    name: str


class ActorMetrics:
    """The shell base's metrics, read at scrape time over one orchestrator's live actors, by kind."""

    def __init__(self, registry: CollectorRegistry | None, clock: Clock) -> None:
        """`registry`: where the figures are read (None: count nothing). `clock`: what the mailboxes stamp
        and ages are read on (a test injects a `VirtualClock` to age a message without waiting)."""
        self._on = registry is not None
        self.monotonic: Callable[[], float] = clock.monotonic
        self._lock = threading.Lock()
        self._live: dict[str, dict[int, Counted]] = {}  # by kind: a scrape takes each kind's list as it is
        self._retired: dict[str, Totals] = {}
        self._stall = StallCheck()
        if registry is not None:
            registry.register(self)

    def register(self, actor: Counted) -> None:
        """The actor started (on its own thread, before anything else it does)."""
        if self._on:
            with self._lock:
                self._live.setdefault(type(actor).__name__, {})[id(actor)] = actor

    def retire(self, actor: Counted) -> None:
        """The actor's loop has ended: fold its counts into its kind's totals."""
        if self._on:
            kind = type(actor).__name__
            with self._lock:
                if self._live.get(kind, {}).pop(id(actor), None) is not None:
                    self._retired.setdefault(kind, Totals()).add(actor.mailbox)

    def stalled(self, bound: float) -> str:
        """An actor whose oldest waiting message has waited past `bound` (stuck, not slow), named with that age;
        "" when none has. Reads the mailboxes' stamps, asks no actor (`shell/stall.py`)."""
        with self._lock:
            live = [actor for actors in self._live.values() for actor in actors.values()]
        if (stuck := self._stall.look(live, bound, self.monotonic())) is None:
            return ""
        who = f"{type(stuck[0]).__name__} {shown_name(stuck[0])}".rstrip()
        return f"{who} has not taken a message for {stuck[1]:.0f}s"

    def collect(self) -> Iterator[Metric]:
        now = self.monotonic()
        with self._lock:
            by_kind = {kind: list(actors.values()) for kind, actors in self._live.items() if actors}
            kinds = {kind: Kind(totals=Totals(t.received, t.failures, t.seconds, t.high_water, list(t.buckets)))
                     for kind, t in self._retired.items()}
        busiest: dict[tuple[str, str], tuple[int, float]] = {}  # (kind, shown name): two of a run's are one
        # Per kind, each figure one pass in C over its mailboxes (shell/kind_totals.py): at 5,000 runs a scrape
        # reads 10,000 of them, and a Python loop a mailbox cost a scrape 13 ms.
        for name, actors in by_kind.items():
            boxes = list(map(_MAILBOX, actors))
            depths = list(map(len, map(_QUEUE, boxes)))  # a deque's length: no lock, as `stalled` reads the heads
            kind = kinds.setdefault(name, Kind())
            kind.instances = len(boxes)
            kind.depth = sum(depths)
            kind.depth_max = max(depths)
            kind.totals.add_all(boxes, kind.depth_max)
            if not kind.depth:
                continue
            # Only the actors with mail: picked out in C, not a Python test an actor.
            for actor, waiting in zip(compress(actors, depths), filter(None, depths), strict=True):
                age = actor.mailbox.oldest_age(now)
                kind.oldest = max(kind.oldest, age)
                key = (name, shown_name(actor))
                had, oldest_age = busiest.get(key, (0, 0.0))
                busiest[key] = (had + waiting, max(oldest_age, age))
        label = ["kind"]
        instances = GaugeMetricFamily(ACTOR_INSTANCES, "Live actors of a kind.", labels=label)
        depth = GaugeMetricFamily(ACTOR_MAILBOX_DEPTH, "Messages waiting in the mailboxes of a kind's actors, "
                                                       "summed.", labels=label)
        depth_max = GaugeMetricFamily(ACTOR_MAILBOX_DEPTH_MAX, "The deepest single mailbox of a kind now.",
                                      labels=label)
        high_water = GaugeMetricFamily(ACTOR_MAILBOX_HIGH_WATER, "The deepest any mailbox of a kind has been "
                                                                 "since the orchestrator started.", labels=label)
        oldest = GaugeMetricFamily(ACTOR_OLDEST_MESSAGE_AGE, "How long the oldest waiting message of a kind's "
                                                             "actors has waited.", labels=label)
        received = CounterMetricFamily(ACTOR_MESSAGES_RECEIVED, "Messages put in a kind's mailboxes.", labels=label)
        processed = CounterMetricFamily(ACTOR_MESSAGES_PROCESSED, "Messages a kind's actors have handled (failed "
                                                                  "ones too).", labels=label)
        failures = CounterMetricFamily(ACTOR_MESSAGE_FAILURES, "Messages whose handling raised (an ask's caller "
                                                               "got the error; a tell's actor died), and starts "
                                                               "that raised.", labels=label)
        seconds = HistogramMetricFamily(ACTOR_PROCESSING_SECONDS, "Time to handle one message.", labels=label)
        for name, kind in sorted(kinds.items()):
            t = kind.totals
            instances.add_metric([name], kind.instances)
            depth.add_metric([name], kind.depth)
            depth_max.add_metric([name], kind.depth_max)
            high_water.add_metric([name], t.high_water)
            oldest.add_metric([name], kind.oldest)
            received.add_metric([name], t.received)
            processed.add_metric([name], sum(t.buckets))
            failures.add_metric([name], t.failures)
            seconds.add_metric([name], cumulative(PROCESSING_BUCKETS, t.buckets), t.seconds)
        yield from (instances, depth, depth_max, high_water, oldest, received, processed, failures, seconds)
        depth_family = GaugeMetricFamily(ACTOR_BUSIEST_DEPTH, "Mailbox depth of the busiest few actors (at "
                                         f"most {METRICS_BUSIEST_ACTORS}, by depth).", labels=["kind", "name"])
        age_family = GaugeMetricFamily(ACTOR_BUSIEST_AGE, "Oldest waiting message of the busiest few actors.",
                                       labels=["kind", "name"])
        ranked = sorted(((waiting, age, kind_name, name) for (kind_name, name), (waiting, age) in busiest.items()),
                        reverse=True)
        for waiting, age, kind_name, name in ranked[:METRICS_BUSIEST_ACTORS]:
            depth_family.add_metric([kind_name, name], waiting)
            age_family.add_metric([kind_name, name], age)
        yield depth_family
        yield age_family




OFF = ActorMetrics(None, SystemClock())
"""For an actor made outside an orchestrator (a test, the fake cluster): counts nothing."""
