"""WorkspaceActor: one Workspace, a thin shell over `WorkspaceCore` (DESIGN.md).

It registers with the WatchActor for its Sandbox's key, performs what the core asks — apply the Sandbox
(then its token Secret, owned by the Sandbox's uid), renew the Lease (a merge patch of
`jr2.dev/keepalive`), attach through the Harness, delete — on a shared worker pool so its mailbox never
blocks on the network, and tells its parent every report (feed lines, `waiting`, running, lost, fault).
The parent releases it with `Release(why)`; it stops itself once released and its last call is done.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import pykka

from jr2_actors.actorkit import Deadline, Shell, Timers, jitter_source, tell_quietly
from jr2_actors.clock import Clock, SystemClock
from jr2_actors.errors import ClusterAccessError, KubeError, KubeProtocolError, KubeTransportError
from jr2_actors.harness.client import HarnessClient, HarnessError, HarnessProtocolError, HarnessUnreachable
from jr2_actors.harness.tokens import harness_token
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SANDBOX, SECRET
from jr2_actors.watch.actor import Recipient, Register, SandboxGone, SandboxSeen, Unregister, WatchClosed, WatchFailed
from jr2_actors.workspace import core as ws
from jr2_actors.workspace.manifest import (
    WorkspaceSpec,
    attach_branch,
    attach_slots,
    lease_patch,
    sandbox_body,
    token_secret,
)

log = logging.getLogger(__name__)
KUBE_ERRORS = (KubeError, KubeTransportError, KubeProtocolError, ClusterAccessError)
HARNESS_ERRORS = (HarnessError, HarnessUnreachable, HarnessProtocolError)

HarnessFactory = Callable[[str, str], HarnessClient]


@dataclass(frozen=True)
class Release:
    why: str = "teardown"  # teardown | run-stopped | run-faulted


@dataclass(frozen=True)
class _Done:
    """A call finished on the worker pool: the core's input it produced (or None)."""

    event: ws.Input | None
    note: str = ""
    lane: str = ""


@dataclass(frozen=True)
class _Tick:
    pass


class WorkspaceActor(Shell):
    def __init__(self, spec: WorkspaceSpec, *, client: KubeClient, watch: pykka.ActorRef[Any], parent: Recipient,
                 signing_key: bytes, pool: Executor, clock: Clock | None = None,
                 harness_factory: HarnessFactory | None = None, restored_wait: ws.RestoredWait | None = None,
                 timers: Timers | None = None, seed: int | None = None, **core_options: Any) -> None:
        """`timers`: a run's Workspaces share one timer thread (on the same clock); by default the actor
        keeps its own."""
        super().__init__()
        self.spec = spec
        self.client = client
        self.watch = watch
        self.parent = parent
        self.name = spec.child
        self.key = signing_key
        self.pool = pool
        self.clock = clock or SystemClock()
        self.core = ws.WorkspaceCore(spec.child, memory_limit=spec.definition.memory, rng=jitter_source(seed),
                                     **core_options)
        self._harness_factory = harness_factory or (lambda url, token: HarnessClient(url, token))
        self._restored_wait = restored_wait
        self._owns_timers = timers is None
        self._timers = timers or Timers(self.clock, name=f"jr2-ws-timers-{spec.name}")
        self._deadline: Deadline | None = None
        self._endpoint = ""
        self._in_flight = 0
        self._released = False
        self._kube_queue: deque[Callable[[], _Done]] = deque()
        self._kube_busy = False

    def started(self) -> None:
        self._deadline = Deadline(self._timers, self.actor_ref, _Tick())
        self.watch.tell(Register(self.spec.key, self.actor_ref, restored=self._restored_wait is not None))
        self._step(ws.Begin(self._restored_wait))

    def cleanup(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        if self._owns_timers:
            self._timers.stop()
        tell_quietly(self.watch, Unregister(self.spec.key, self.actor_ref))

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, SandboxSeen):
            self._endpoint = message.sandbox.endpoint or self._endpoint
            self._step(ws.Observed(message.sandbox))
        elif isinstance(message, SandboxGone):
            self._step(ws.Vanished(f"the Sandbox was deleted ({message.reason})"))
        elif isinstance(message, WatchFailed):
            self._step(ws.WatchUnknown(message.message))
        elif isinstance(message, WatchClosed):
            pass
        elif isinstance(message, _Done):
            self._in_flight -= 1
            if message.lane == "kube":
                self._next_kube()
            if message.note:
                log.warning("%s: %s", self.spec.name, message.note)
            if message.event is not None:
                self._step(message.event)
        elif isinstance(message, _Tick):
            if self._deadline is not None:
                self._deadline.fired()
            self._step(ws.Tick())
        elif isinstance(message, Release):
            self._released = True
            self._step(ws.Release(message.why))  # type: ignore[arg-type]
        self._stop_when_done()
        return None

    # -- the core's decisions, performed -----------------------------------------------------------------

    def _step(self, event: ws.Input) -> None:
        step = self.core.step(event, self.clock.monotonic(), self.clock.wall())
        for report in step.reports:
            tell_quietly(self.parent, report)
        for action in step.actions:
            if isinstance(action, ws.ApplySandbox):
                self._kube(self._apply)
            elif isinstance(action, ws.RenewLease):
                self._kube(self._renew)
            elif isinstance(action, ws.Attach):
                self._run(self._attach)  # its own lane: an attach may take a while; the Lease must not wait
            elif isinstance(action, ws.DeleteSandbox):
                self._kube(self._delete)
        if self._deadline is not None:
            self._deadline.arm(step.deadline)

    def _kube(self, call: Callable[[], _Done]) -> None:
        """Cluster writes run one at a time, in order: a delete never overtakes the apply before it."""
        self._kube_queue.append(call)
        if not self._kube_busy:
            self._next_kube()

    def _next_kube(self) -> None:
        self._kube_busy = bool(self._kube_queue)
        if self._kube_queue:
            call = self._kube_queue.popleft()
            self._run(call, lane="kube")

    def _run(self, call: Callable[[], _Done], lane: str = "harness") -> None:
        self._in_flight += 1
        ref = self.actor_ref

        def work() -> None:
            try:
                done = call()
            except Exception as e:  # our bug: never lose the count, never kill the pool thread
                log.exception("%s: a call failed unexpectedly", self.spec.name)
                done = _Done(None, f"unexpected: {e}")
            tell_quietly(ref, _Done(done.event, done.note, lane))

        self.pool.submit(work)

    def _apply(self) -> _Done:
        try:
            applied = self.client.apply(SANDBOX, self.spec.name, sandbox_body(self.spec, self.key, self.clock.wall()))
            uid = applied["metadata"]["uid"]
            self.client.apply(SECRET, f"{self.spec.name}-token", token_secret(self.spec, self.key, uid))
        except KUBE_ERRORS as e:
            return _Done(ws.ApplyFailed(str(e)))
        return _Done(None)

    def _renew(self) -> _Done:
        try:
            self.client.merge_patch(SANDBOX, self.spec.name, lease_patch(self.clock.wall()))
        except KUBE_ERRORS as e:
            return _Done(None, f"the Lease renewal failed (the next one retries): {e}")
        return _Done(None)

    def _attach(self) -> _Done:
        harness = self._harness_factory(self._endpoint, harness_token(self.key, self.spec.name))
        try:
            repos = harness.attach(attach_slots(self.spec), attach_branch(self.spec))
        except HARNESS_ERRORS as e:
            return _Done(ws.AttachFailed(str(e)))
        return _Done(ws.Attached(repos))

    def _delete(self) -> _Done:
        try:
            self.client.delete(SANDBOX, self.spec.name)  # its token Secret goes with it (owner reference)
        except KUBE_ERRORS as e:
            return _Done(None, f"delete failed (the idle GC reaps it): {e}")
        return _Done(None)

    def _stop_when_done(self) -> None:
        if self._released and self._in_flight == 0 and not self._kube_queue:
            self.actor_ref.stop(block=False)

