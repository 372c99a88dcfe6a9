"""OperatorActor: the fake jr2 operator, a thin shell over `OperatorCore`.

It hears every Sandbox change from the API server actor (in process, as a watcher), reconciles the
whole namespace at most once per burst of changes, writes each status only when it changed, deletes
what the idle GC reaps, and wakes itself when a start time or an idle deadline comes due.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import pykka

from jr2_actors.actorkit import Timers
from jr2_actors.clock import Clock
from jr2_actors.fake.apiserver.actor import ASK_TIMEOUT, Call
from jr2_actors.fake.apiserver.selectors import Selector
from jr2_actors.fake.apiserver.state import ClusterState, StatusError
from jr2_actors.fake.operator.core import OperatorCore
from jr2_actors.kube.kinds import SANDBOX

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Changed:
    pass


@dataclass(frozen=True)
class Reconcile:
    pass


@dataclass(frozen=True)
class Script:
    """Change the operator's model (a fault, a node, a quota), then reconcile."""

    fn: Callable[[OperatorCore, float], Any]


class OperatorActor(pykka.ThreadingActor):
    def __init__(self, api: pykka.ActorRef[Any], namespace: str, core: OperatorCore, clock: Clock) -> None:
        super().__init__()
        self.api = api
        self.namespace = namespace
        self.core = core
        self.clock = clock
        self._timers = Timers(clock, name="jr2-fake-operator-timers")
        self._wake: int | None = None
        self._scheduled = False
        self._watch: int | None = None

    def on_start(self) -> None:
        ref = self.actor_ref

        def sink(_: dict[str, Any]) -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(Changed())

        ns = self.namespace
        _, self._watch = self.api.ask(Call(lambda s: s.subscribe(SANDBOX, ns, Selector(), str(s.rv), sink)),
                                      timeout=ASK_TIMEOUT)
        self.actor_ref.tell(Reconcile())

    def on_stop(self) -> None:
        self._timers.stop()
        wid = self._watch
        if wid is not None:
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                self.api.ask(Call(lambda s: s.unsubscribe(wid)), timeout=ASK_TIMEOUT)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Changed):
            if not self._scheduled:  # coalesce a burst of changes into one reconcile
                self._scheduled = True
                self.actor_ref.tell(Reconcile())
        elif isinstance(message, Reconcile):
            self._scheduled = False
            self._reconcile()
        elif isinstance(message, Script):
            result = message.fn(self.core, self.clock.wall())
            self._reconcile()
            return result
        return None

    def _reconcile(self) -> None:
        ns = self.namespace
        sandboxes = cast(list[dict[str, Any]], self.api.ask(
            Call(lambda s: [o for o in s.objects(SANDBOX) if o["metadata"].get("namespace") == ns]),
            timeout=ASK_TIMEOUT))
        decision = self.core.reconcile(sandboxes, self.clock.wall())
        writes = {o["metadata"]["name"]: decision.statuses[o["metadata"]["name"]] for o in sandboxes
                  if o["metadata"]["name"] in decision.statuses
                  and o.get("status") != decision.statuses[o["metadata"]["name"]]}
        deletes = decision.deletes

        def write(state: ClusterState) -> None:
            # The world may have moved since the read: a vanished Sandbox is simply skipped, and the
            # change that moved it has already queued the next reconcile.
            for name in deletes:
                with contextlib.suppress(StatusError):
                    state.delete(SANDBOX, ns, name)
            for name, status in writes.items():
                with contextlib.suppress(StatusError):
                    state.replace_status(SANDBOX, ns, name, status)

        if writes or deletes:
            self.api.ask(Call(write), timeout=ASK_TIMEOUT)
        self._timers.cancel(self._wake)
        self._wake = None
        if decision.next_wake is not None:
            ref = self.actor_ref
            at = self.clock.monotonic() + max(decision.next_wake - self.clock.wall(), 0.0)
            self._wake = self._timers.schedule(at, lambda: _tell(ref, Reconcile()))


def _tell(ref: pykka.ActorRef[Any], message: object) -> None:
    with contextlib.suppress(pykka.ActorDeadError):
        ref.tell(message)
