"""WorkspaceActor: one Workspace, a thin shell over `WorkspaceCore` (DESIGN.md).

It registers with the WatchActor for its Sandbox's key and performs what the core asks: write the Sandbox
(the first write creates; a name already taken is read and told as `NameTaken` — the core adopts it only
when its annotations name this very Workspace), then its token Secret owned by the Sandbox's uid; renew the
Lease (a merge patch of `jr2.dev/keepalive`); attach through the Harness; delete with the uid it wrote and
the newest version it knows as preconditions (a 409 is read again and told as `DeleteConflict`, with the
Lease stamps this Workspace sent: the core's delete guard decides). Cluster writes run one at a time, in
order, on the kube pool (a delete never overtakes the write before it); the attach runs on a pool of its
own, so a slow Harness never delays any Workspace's Lease, write or delete. The Lease's schedule is the
process's renewal lane's (`workspace/renewals.py`) from `HoldLease` to `DropLease`: a renewal is no message
here, only one refused for good is (`LeaseRefused`); the delete takes the Lease back and waits for its
renewal in flight before it leaves, and carries the version that renewal wrote. Every report goes to the parent;
`Release(why)` ends it, and it stops itself once `Released` is told and its last call is back. A stop ends
its attach at once (the attach's Harness client is closed: its retries and its request in flight end), so an
orchestrator's stop never waits for a Harness that refuses connections; its cluster writes' retries are
timers, which end with it. A call that raises what nobody expected is our bug: it fails the actor (its
parent hears an `ActorFault`), never vanishes into an unread future."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import pykka
import requests

from jr2_actors.harness.client import HarnessClient
from jr2_actors.harness.errors import HARNESS_ERRORS
from jr2_actors.harness.tokens import harness_token
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SANDBOX, SECRET
from jr2_actors.shell import Deadline, Recipient, Shell, Timers, jitter_source, logs, tell_quietly
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.values.errors import KUBE_ERRORS, KubeError
from jr2_actors.watch import messages as watch
from jr2_actors.watch.deliveries import SandboxGone, SandboxSeen, WatchFailed
from jr2_actors.watch.identity import identify
from jr2_actors.workspace import answers, reading
from jr2_actors.workspace import core as ws_core
from jr2_actors.workspace import messages as ws
from jr2_actors.workspace import metrics as workspace_metrics
from jr2_actors.workspace.manifest import (
    WorkspaceSpec,
    attach_branch,
    attach_slots,
    keepalive,
    lease_patch,
    sandbox_body,
    token_secret,
)
from jr2_actors.workspace.messages import Release
from jr2_actors.workspace.metrics import WorkspaceTelemetry
from jr2_actors.workspace.renewals import Lease, RenewalLane

log = logging.getLogger(__name__)

HarnessFactory = Callable[[str, str], HarnessClient]


@dataclass(frozen=True)
class _Done:
    """A call came back from a pool: the core's input it produced (or None), on which lane."""

    event: ws.ShellInput | None
    lane: Literal["kube", "attach"]
    note: str = ""


@dataclass(frozen=True)
class _Crashed:
    """A pool call raised what nobody expected: the actor fails on it (our bug, told to the parent)."""

    error: str


@dataclass(frozen=True)
class _Tick:
    pass


class WorkspaceActor(Shell):
    log_key = "workspace"

    def __init__(self, spec: WorkspaceSpec, *, client: KubeClient, watch: pykka.ActorRef[Any], parent: Recipient,
                 signing_key: bytes, kube_pool: Executor, attach_pool: Executor, clock: Clock | None = None,
                 harness_factory: HarnessFactory | None = None, restored: ws.Restored | None = None,
                 timers: Timers | None = None, seed: int | None = None, telemetry: WorkspaceTelemetry | None = None,
                 renewals: RenewalLane | None = None, harness_session: requests.Session | None = None,
                 **core_options: Any) -> None:
        """`timers`: a run's Workspaces share one timer thread (on the same clock); by default the actor
        keeps its own. `renewals`: the process's one renewal lane; without it the actor keeps a lane of
        one thread of its own (on its timers). `harness_session`: the process's one Harness session
        (`harness.client.shared_session`), which the attach's client uses and leaves open."""
        super().__init__(telemetry=telemetry)
        self.metrics = workspace_metrics.OFF if telemetry is None else telemetry.workspaces
        self.spec = spec
        self.client = client
        self.watch = watch
        self.parent = parent
        self.name = spec.path
        self.key = signing_key
        self.kube_pool = kube_pool
        self._owns_lane = renewals is None
        self._lease: tuple[str, Lease] | None = None  # the uid the lane renews, and its Lease there
        self.attach_pool = attach_pool
        self.clock = clock or SystemClock()
        self.core = ws_core.WorkspaceCore(spec.path, memory_limit=spec.definition.memory, rng=jitter_source(seed),
                                     secret_name=spec.secret_name, run_id=spec.run_id,
                                               **core_options)
        self._restored = restored
        self._owns_timers = timers is None
        self._timers = timers or Timers(self.clock, name=f"jr2-ws-timers-{spec.name}")
        # The attach's client times its probes on the Workspace's timers: no thread of its own per attach.
        # A partial, not a lambda on `self`: the actor stays out of a reference cycle (freed when it ends,
        # not by the collector's full passes).
        self._harness_factory = harness_factory or partial(HarnessClient, clock=self.clock, timers=self._timers,
                                                           session=harness_session)
        self.renewals = renewals or RenewalLane(clock=self.clock, name=f"jr2-ws-renewals-{spec.name}", threads=1,
                                                timers=self._timers, seed=seed)
        self._deadline: Deadline | None = None
        self._in_flight = 0
        self._released = False
        self._kube_queue: deque[Callable[[], _Done]] = deque()
        # The Lease stamps this Workspace sent (a write that timed out may still have landed), and whether
        # one of its writes is known to have landed: its writes and its renewals append and set them (a
        # deque's append is atomic); the delete reads them once its Lease is back from the lane.
        self._stamps: deque[str] = deque(maxlen=64)  # 64 renewals: over five hours of failed ones
        self._landed = False
        self._kube_busy = False
        self._delete_failures = 0  # in a row (the kube lane's, like the stamps)
        # The attach's Harness client while it is out, and whether the actor stopped: the attach lane sets
        # the one, cleanup the other, under the lock; cleanup closes the client, which ends the attach.
        self._attach_lock = threading.Lock()
        self._attaching: HarnessClient | None = None
        self._stopped = False

    def started(self) -> None:
        self._deadline = Deadline(self._timers, self.actor_ref, _Tick())
        placed = self._restored is not None and self._restored.placed
        self.watch.tell(watch.Register(self.spec.key, self.actor_ref, restored=placed))
        self._step(ws.Begin(self._restored))

    def cleanup(self) -> None:
        with self._attach_lock:
            self._stopped = True
            attaching, self._attaching = self._attaching, None
        if attaching is not None:
            attaching.close()  # its retries and its request in flight end now: the attach lane is free
        if self._deadline is not None:
            self._deadline.cancel()
        if self._lease is not None:
            self.renewals.take_back(self._lease[1])
        if self._owns_lane:
            self.renewals.shutdown(wait=False)
        if self._owns_timers:
            self._timers.stop()
        tell_quietly(self.watch, watch.Unregister(self.spec.key, self.actor_ref))

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, (SandboxSeen, SandboxGone, WatchFailed)):
            if not isinstance(message, WatchFailed) and message.written_at is not None:
                self.metrics.delivered(message.written_at)  # the server's write → this receipt
            self._step(message)  # the watch's deliveries are the core's inputs as they are
        elif isinstance(message, watch.WatchClosed):
            self._step(ws.WatchStopped())
        elif isinstance(message, _Done):
            self._in_flight -= 1
            if message.lane == "kube":
                self._next_kube()
            if message.note:
                log.warning("%s: %s", self.spec.name, message.note)
            if message.event is not None:
                self._step(message.event)
        elif isinstance(message, _Crashed):
            raise RuntimeError(f"a call of Workspace {self.spec.path} failed unexpectedly: {message.error}")
        elif isinstance(message, _Tick):
            if self._deadline is not None:
                self._deadline.fired()
            self._step(ws.WorkspaceTick())
        elif isinstance(message, (Release, ws.LeaseRefused)):
            self._step(message)
        self._stop_when_done()
        return None

    # -- the core's decisions, performed -----------------------------------------------------------------

    def _step(self, event: ws.Input) -> None:
        step = self.core.step(event, self.clock.monotonic(), self.clock.wall())
        for report in step.reports:
            if isinstance(report, ws.Released):
                self._released = True
            tell_quietly(self.parent, report)
        for action in step.actions:
            if isinstance(action, ws.ApplySandbox):
                self._kube(partial(self._apply, action.create))
            elif isinstance(action, ws.ApplySecret):
                self._kube(partial(self._apply_secret, action.uid))
            elif isinstance(action, ws.HoldLease):
                lease = self.renewals.hold(self.spec.key, partial(self._renew, action.uid), action.first_due,
                                           action.interval)
                self._lease = (action.uid, lease)
            elif isinstance(action, ws.DropLease):
                if self._lease is not None:
                    self.renewals.take_back(self._lease[1])
            elif isinstance(action, ws.Attach):
                self._submit(partial(self._attach, action.endpoint), "attach")
            elif isinstance(action, ws.DeleteSandbox):
                self._kube(partial(self._delete, action.uid, action.resource_version))
        if self._deadline is not None:
            self._deadline.arm(step.deadline)

    def _kube(self, call: Callable[[], _Done]) -> None:
        """Cluster writes run one at a time, in order: a delete never overtakes the write before it."""
        self._kube_queue.append(call)
        if not self._kube_busy:
            self._next_kube()

    def _next_kube(self) -> None:
        self._kube_busy = bool(self._kube_queue)
        if self._kube_queue:
            self._submit(self._kube_queue.popleft(), "kube")

    def _submit(self, call: Callable[[], _Done], lane: Literal["kube", "attach"]) -> None:
        self._in_flight += 1
        ref = self.actor_ref
        pool = self.kube_pool if lane == "kube" else self.attach_pool

        def work() -> None:
            try:
                done = call()
            except Exception as e:  # our bug: it must reach the actor, and never kill the pool thread
                log.exception("Workspace %s: a %s call failed unexpectedly", self.spec.path, lane)
                tell_quietly(ref, _Done(None, lane))
                tell_quietly(ref, _Crashed(f"{type(e).__name__}: {e}"))
                return
            tell_quietly(ref, _Done(done.event, lane, done.note))

        pool.submit(logs.carry(work))

    # -- the calls (on a pool thread: they touch no attribute that changes, they return the core's input) --

    def _stamp(self) -> float:
        """The Lease stamp of a write about to leave, remembered for the delete guard (`written_by`)."""
        wall = self.clock.wall()
        self._stamps.append(keepalive(wall))
        return wall

    def _apply(self, create: bool) -> _Done:
        spec, name = self.spec, self.spec.name
        body = sandbox_body(spec, self.key, self._stamp())
        try:
            if create:
                try:
                    created = _Done(answers.applied(self.client.create(SANDBOX, body)), "kube")
                    self._landed = True
                    return created
                except KubeError as e:
                    if e.status != 409:
                        raise
                # The name is taken: whose it is, the core decides (it adopts its own with an apply).
                existing = self.client.get(SANDBOX, name)
                return _Done(ws.NameTaken(name, identify(existing) if existing is not None else None), "kube")
            done = _Done(answers.applied(self.client.apply(SANDBOX, name, body)), "kube")
        except KUBE_ERRORS as e:
            return _Done(answers.write_failed("sandbox", e), "kube")
        self._landed = True
        return done

    def _apply_secret(self, uid: str) -> _Done:
        try:
            self.client.apply(SECRET, self.spec.secret_name, token_secret(self.spec, self.key, uid))
        except KUBE_ERRORS as e:
            return _Done(answers.write_failed("secret", e), "kube")
        return _Done(ws.SecretWritten(), "kube")

    def _renew(self, uid: str, wall: float, stamp: str) -> str | None:
        """On a renewal lane thread (which noted `stamp` for the watch): the version written, or None. Only a
        refusal for good is told to the actor; a transient failure is logged and the next renewal retries."""
        self._stamps.append(stamp)
        try:
            renewed = self.client.merge_patch(SANDBOX, self.spec.name, lease_patch(wall, uid))
        except KUBE_ERRORS as e:
            refused = isinstance(e, KubeError) and e.status in answers.LEASE_REFUSALS
            log.warning("%s: the Lease renewal %s: %s", self.spec.name,
                        "was refused, none follows on this uid" if refused else "failed (the next one retries)", e)
            if isinstance(e, KubeError) and refused:
                tell_quietly(self.actor_ref, ws.LeaseRefused(uid, e.status))
            return None
        self._landed = True
        return answers.version(renewed)

    def _attach(self, endpoint: str) -> _Done:
        harness = self._harness_factory(endpoint, harness_token(self.key, self.spec.name))
        with self._attach_lock:
            stopped = self._stopped
            if not stopped:
                self._attaching = harness
        try:
            if stopped:  # the actor stopped before this call left the queue: nothing to attach for
                return _Done(ws.AttachFailed("the Workspace stopped"), "attach")
            repos = harness.attach(attach_slots(self.spec), attach_branch(self.spec))
        except HARNESS_ERRORS as e:
            return _Done(ws.AttachFailed(str(e), unavailable=answers.unavailable(e)), "attach")
        finally:
            with self._attach_lock:
                if self._attaching is harness:
                    self._attaching = None
            harness.close()
        return _Done(ws.Attached(repos), "attach")

    def _delete(self, uid: str, rv: str) -> _Done:
        if self._lease is not None:  # ADR-0064: never beside or before the renewal before it
            held, lease = self._lease
            self.renewals.take_back(lease)
            self.renewals.wait(lease)
            if held == uid:
                rv = reading.newest(rv, lease.resource_version)  # the renewals' answers never came here
        try:
            if not uid:  # the write's answer never came: delete only what the name holds for this key
                existing = self.client.get(SANDBOX, self.spec.name)
                if existing is None or identify(existing) != self.spec.key:
                    return _Done(ws.Deleted(existed=False), "kube")
                uid, rv = answers.uid(existing), answers.version(existing)
            # Its token Secret goes with it (owner reference). The preconditions keep a successor safe: one
            # that adopted this Sandbox since has written a newer version. A 409 is read again and told to the
            # core, which decides whether it is still ours (ADR-0064's delete guard, `DeleteConflict`).
            try:
                existed = self.client.delete(SANDBOX, self.spec.name, uid=uid, resource_version=rv or None)
            except KubeError as e:
                if e.status != 409 or not rv:
                    raise
                current = self.client.get(SANDBOX, self.spec.name)
                # A restored Workspace none of whose writes has landed yet knows no stamp on it: its uid
                # decides (no successor exists in this process before its teardown is over).
                return _Done(ws.DeleteConflict(uid, str(e), current, tuple(self._stamps) if self._landed else ()),
                             "kube")
        except KUBE_ERRORS as e:
            if isinstance(e, KubeError):
                return self._delete_failed(ws.DeleteFailed(str(e), e.status, e.retry_after))
            return self._delete_failed(ws.DeleteFailed(str(e)))
        self._delete_failures = 0
        return _Done(ws.Deleted(existed), "kube")

    def _delete_failed(self, failed: ws.DeleteFailed) -> _Done:
        """A delete that is retried until it lands logs its 1st, 2nd, 4th, 8th… failure: an outage of an
        hour is a dozen lines per Workspace, not one every few seconds."""
        self._delete_failures += 1
        n = self._delete_failures
        note = f"delete failed ({n} in a row): {failed.message}"
        return _Done(failed, "kube", note if n & (n - 1) == 0 else "")

    def _stop_when_done(self) -> None:
        if self._released and self._in_flight == 0 and not self._kube_queue:
            self.actor_ref.stop(block=False)
