"""OperatorActor: the fake jr2 operator, a thin shell over `OperatorCore`.

It hears every Sandbox change in every namespace from the API server actor (a watcher in process, whose
sink tells this actor), lets the core look again only at what changed, at most once per burst of
changes, writes each status only when it changed, deletes what the idle GC reaps, and wakes itself when
a start time or an idle deadline comes due. It never asks the API server and waits: its writes are told
(`Run`), and each comes back as a change like any other.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

import pykka

from jr2_actors.fake.apiserver.selectors import Selector
from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.apiserver.status import StatusError
from jr2_actors.fake.messages import Run, SandboxChanged, Subscribed
from jr2_actors.fake.operator.core import Decision, OperatorCore
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.shell import Deadline, Shell, Timers, tell_quietly
from jr2_actors.shell.clock import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Reconcile:
    pass


@dataclass(frozen=True)
class _Due:
    """The timer: a start time or an idle deadline came due."""


def subscribe(api: pykka.ActorRef[Any], ref: pykka.ActorRef[Any], namespace: str | None) -> None:
    """Tell the API server to feed `ref` every Sandbox change (in `namespace`, or all), the current ones
    first, then `Subscribed(watcher id)` so that `ref` can end it."""

    def sink(frame: dict[str, Any]) -> None:
        tell_quietly(ref, SandboxChanged(frame["type"], frame["object"]))

    def start(state: ClusterState) -> None:
        initial, wid = state.subscribe(SANDBOX, namespace, Selector(), None, sink)
        for frame in initial:
            sink(frame)
        if wid is not None:
            tell_quietly(ref, Subscribed(wid))

    tell_quietly(api, Run(start))


def unsubscribe(api: pykka.ActorRef[Any], watcher: int | None) -> None:
    if watcher is not None:
        tell_quietly(api, Run(lambda s: s.unsubscribe(watcher)))


class OperatorActor(Shell):
    name = "operator"

    def __init__(self, api: pykka.ActorRef[Any], core: OperatorCore, clock: Clock) -> None:
        super().__init__()
        self.api = api
        self.core = core
        self.clock = clock
        self._timers = Timers(clock, name="jr2-fake-operator-timers")
        self._wake: Deadline | None = None
        self._wake_at: float | None = None
        self._scheduled = False
        self._watch: int | None = None

    def started(self) -> None:
        self._wake = Deadline(self._timers, self.actor_ref, _Due())
        subscribe(self.api, self.actor_ref, None)

    def cleanup(self) -> None:
        self._timers.stop()
        unsubscribe(self.api, self._watch)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, SandboxChanged):
            self.core.observe(message.type, message.object)
            if not self._scheduled:  # coalesce a burst of changes into one step
                self._scheduled = True
                tell_quietly(self.actor_ref, _Reconcile())
        elif isinstance(message, _Reconcile):
            self._scheduled = False
            self._step()
        elif isinstance(message, _Due):
            if self._wake is not None:
                self._wake.fired()
            self._wake_at = None
            self._step()
        elif isinstance(message, Subscribed):
            self._watch = message.watcher
        elif isinstance(message, Run):
            result = message.fn(self.core)
            self._step()
            return result
        return None

    def _step(self) -> None:
        decision = self.core.step(self.clock.wall())
        if decision.statuses or decision.deletes:
            tell_quietly(self.api, Run(_writer(decision)))
        if self._wake is not None and decision.next_wake != self._wake_at:
            # Re-armed only when the wall time it is due at moves (the timer thread is woken by each arm).
            wake = self._wake_at = decision.next_wake
            self._wake.arm(None if wake is None else self.clock.monotonic() + max(wake - self.clock.wall(), 0.0))


def _writer(decision: Decision) -> Any:
    def write(state: ClusterState) -> None:
        # The world may have moved since the core looked: a Sandbox gone or recreated is skipped (its
        # uid no longer matches), and the change that moved it is already on its way to the operator.
        for ns, name, uid in decision.deletes:
            with contextlib.suppress(StatusError):
                state.delete(SANDBOX, ns, name, preconditions={"uid": uid})
        for (ns, name), status in decision.statuses.items():
            with contextlib.suppress(StatusError):
                state.replace_status(SANDBOX, ns, name, status, uid=decision.uids.get((ns, name)))
    return write
