"""ObserverCore: the one Sandbox watch of the process, as a deterministic state machine.

Theory of operation (ADR-0063, dagr T107 and the fixes dagr needed after it). The core does no I/O,
reads no clock and starts no thread: every input comes with the monotonic time `now`, and `step`
returns what to deliver, what to report, the calls to make next and when to be woken. The WatchActor
performs the calls and feeds their results back.

Phases: `idle` → `listing` → `watching` ⇄ `waiting` (a backoff) → … → `stopped`.

Terminations of a watch, and what follows each:
- **Expired** (410, reason `Expired`/`Gone`; an ERROR frame in a 200 or a plain 410) → re-list. The
  version inside the message is the watch cache's oldest, never the head: it is never resumed from.
- **Transport** (stream end, connection error, read timeout, an unusable frame) → resume from the last
  version actually seen. A server that ends a watch it served for a while is a free resume.
- **Transient API** (403, 429 with Retry-After, 5xx, 504 "Too large resource version", a 401 after
  the client's one retry) → back off, then resume (re-list when no version is known).
- **Silence** (nothing at all for the stall bound, 90 s by default) → re-list.

Backoff: the first retry at once, then 250 ms doubling to 30 s with up to 20% jitter (a seeded random,
so tests are exact). Only a successful list, a bookmark or a delivered object clears the failure run;
a watch that merely opens does not. After `max_failures` in a row, or `max_failure_seconds` since the
run began, the core stops with a classified failure that every waiter receives — never a quiet
endless retry, never a hot loop.

Delivery: every Sandbox is identified by annotations (labels only select); one that cannot be is
reported `Foreign` and routed nowhere. Deliveries collapse on (uid, resourceVersion, phase, scheduling
reason, waiting reason), so a repeat from the API, across a reconnect or during a re-list notifies once.
A deleted object, or one a re-list no longer returns, is `Gone` exactly once and its uid retires: late
frames for it are ignored, while a new object under the same key re-arms. The latest delivery per key
is kept (bounded) and handed to a waiter that registers after it; a restored waiter (`restored=True`)
is answered by the first list after start — present or gone — and at once when that list is past.
A dropped watch is never reported as loss.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from jr2_actors.backoff import Backoff, Jitter, NoJitter
from jr2_actors.constants import (
    STALL_BOUND_SECONDS,
    WATCH_BACKOFF,
    WATCH_MAX_FAILURE_SECONDS,
    WATCH_MAX_FAILURES,
    WATCH_MIN_FREE_RESUME_SECONDS,
)
from jr2_actors.errors import ApiStatus
from jr2_actors.kube.frames import Bookmark, Decoded, ErrorFrame, FrameError, WatchEvent
from jr2_actors.watch.identity import Foreign, SandboxKey, identify
from jr2_actors.watch.sandbox import SandboxView, view

MAX_FAILURES = WATCH_MAX_FAILURES
MAX_FAILURE_SECONDS = WATCH_MAX_FAILURE_SECONDS
MIN_FREE_RESUME_SECONDS = WATCH_MIN_FREE_RESUME_SECONDS
KEEP_LATEST = 10_000


class Termination(Enum):
    EXPIRED = "expired"
    TRANSPORT = "transport"
    TRANSIENT = "transient"
    SILENCE = "silence"


# -- inputs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Failure:
    """A call that failed, as the shell saw it: an API answer, or no answer at all."""

    kind: Literal["api", "transport"]
    message: str
    status: int | None = None
    reason: str = ""
    retry_after: float | None = None


@dataclass(frozen=True)
class Started:
    pass


@dataclass(frozen=True)
class Listed:
    items: Sequence[Mapping[str, Any]] = field(repr=False)
    resource_version: str


@dataclass(frozen=True)
class ListFailed:
    failure: Failure


@dataclass(frozen=True)
class WatchOpened:
    stream: int


@dataclass(frozen=True)
class WatchOpenFailed:
    stream: int
    failure: Failure


@dataclass(frozen=True)
class FrameReceived:
    stream: int
    frame: Decoded


@dataclass(frozen=True)
class StreamEnded:
    stream: int
    failure: Failure | None = None


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Registered:
    key: SandboxKey
    restored: bool = False


@dataclass(frozen=True)
class Unregistered:
    key: SandboxKey


@dataclass(frozen=True)
class Shutdown:
    pass


Input = (Started | Listed | ListFailed | WatchOpened | WatchOpenFailed | FrameReceived | StreamEnded | Tick
         | Registered | Unregistered | Shutdown)


# -- outputs -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SandboxSeen:
    key: SandboxKey
    sandbox: SandboxView
    object: Mapping[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class SandboxGone:
    key: SandboxKey
    name: str
    uid: str
    reason: Literal["deleted", "absent", "replaced"]


@dataclass(frozen=True)
class WatchFailed:
    """The watch gave up: the cluster's state is unknown (not lost)."""

    key: SandboxKey
    termination: Termination
    message: str


Delivery = SandboxSeen | SandboxGone | WatchFailed


@dataclass(frozen=True)
class Terminated:
    """One termination handled: what it was, what follows, from which version (None: a re-list)."""

    termination: Termination
    action: Literal["relist", "resume", "stop"]
    resource_version: str | None
    detail: str
    delay: float = 0.0


@dataclass(frozen=True)
class UnusableFrame:
    frame: FrameError


Report = Terminated | Foreign | UnusableFrame


@dataclass(frozen=True)
class ListNow:
    pass


@dataclass(frozen=True)
class WatchFrom:
    resource_version: str
    stream: int


@dataclass(frozen=True)
class CloseStream:
    stream: int


@dataclass(frozen=True)
class StopWatching:
    termination: Termination
    message: str


Action = ListNow | WatchFrom | CloseStream | StopWatching


@dataclass(frozen=True)
class Step:
    deliveries: tuple[Delivery, ...] = ()
    reports: tuple[Report, ...] = ()
    actions: tuple[Action, ...] = ()
    deadline: float | None = None  # wake me (with Tick) at this monotonic time


# -- the core ----------------------------------------------------------------------------------------

Phase = Literal["idle", "listing", "watching", "waiting", "stopped"]


class ObserverCore:
    def __init__(self, *, stall_bound: float = STALL_BOUND_SECONDS, max_failures: int = MAX_FAILURES,
                 max_failure_seconds: float = MAX_FAILURE_SECONDS, rng: Jitter | None = None,
                 backoff: Backoff = WATCH_BACKOFF,
                 keep_latest: int = KEEP_LATEST) -> None:
        self.stall_bound = stall_bound
        self.max_failures = max_failures
        self.max_failure_seconds = max_failure_seconds
        self._random: Jitter = rng or NoJitter()
        self._backoff_schedule = backoff
        self._keep = keep_latest
        self.phase: Phase = "idle"
        self.resource_version: str | None = None
        self.stream = 0
        self.failures = 0
        self._failure_began: float | None = None
        self._opened_at = 0.0
        self._progress_at = 0.0
        self._stream_progressed = False
        self._pending: Action | None = None
        self._wake_at: float | None = None
        self._listed_once = False
        self._stop: WatchFailed | None = None
        self.waiters: set[SandboxKey] = set()
        self.deliver_all = False  # a tap (the `watch` command) hears every key, registered or not
        self._restored: set[SandboxKey] = set()
        self._last: OrderedDict[SandboxKey, Delivery] = OrderedDict()  # latest delivery per key (bounded)
        self._signature: dict[SandboxKey, tuple[str, tuple[str, str, str, str]]] = {}
        self._known: dict[str, tuple[SandboxKey, str]] = {}  # name → (key, uid) of live objects
        self._retired: OrderedDict[str, None] = OrderedDict()  # uids (bounded)
        self._foreign_reported: OrderedDict[str, None] = OrderedDict()

    # -- the one entry point ---------------------------------------------------------------------------

    def step(self, event: Input, now: float) -> Step:
        out = _Out()
        if isinstance(event, Registered):
            self._register(event, out)
        elif isinstance(event, Unregistered):
            self.waiters.discard(event.key)
            self._restored.discard(event.key)
        elif self.phase == "stopped":
            pass  # nothing but registrations is answered once stopped
        elif isinstance(event, Started):
            if self.phase == "idle":
                self._list(out)
        elif isinstance(event, Shutdown):
            self._shutdown(out)
        elif isinstance(event, Listed):
            if self.phase == "listing":
                self._listed(event, now, out)
        elif isinstance(event, ListFailed):
            if self.phase == "listing":
                self._failed(_classify(event.failure), event.failure, now, out, relist=True)
        elif isinstance(event, WatchOpened):
            if self.phase == "watching" and event.stream == self.stream:
                self._progress_at = now
        elif isinstance(event, WatchOpenFailed):
            if self.phase == "watching" and event.stream == self.stream:
                termination = _classify(event.failure)
                self._failed(termination, event.failure, now, out, relist=termination is Termination.EXPIRED)
        elif isinstance(event, FrameReceived):
            if self.phase == "watching" and event.stream == self.stream:
                self._frame(event.frame, now, out)
        elif isinstance(event, StreamEnded):
            if self.phase == "watching" and event.stream == self.stream:
                self._ended(event.failure, now, out)
        elif isinstance(event, Tick):
            self._tick(now, out)
        return Step(tuple(out.deliveries), tuple(out.reports), tuple(out.actions), self.deadline)

    @property
    def deadline(self) -> float | None:
        if self.phase == "waiting":
            return self._wake_at
        if self.phase == "watching":
            return self._progress_at + self.stall_bound  # from the last progress, never postponed otherwise
        return None

    # -- transitions -----------------------------------------------------------------------------------

    def _list(self, out: _Out) -> None:
        self.phase = "listing"
        out.actions.append(ListNow())

    def _watch(self, now: float, out: _Out) -> None:
        assert self.resource_version is not None
        self.stream += 1
        self.phase = "watching"
        self._opened_at = now
        self._progress_at = now
        self._stream_progressed = False
        out.actions.append(WatchFrom(self.resource_version, self.stream))

    def _listed(self, event: Listed, now: float, out: _Out) -> None:
        present: set[str] = set()
        present_keys: set[SandboxKey] = set()
        for obj in event.items:
            key = self._observe(obj, out)
            name = _name(obj)
            present.add(name)
            if key is not None:
                present_keys.add(key)
        for name, (key, uid) in list(self._known.items()):
            if name not in present:
                self._gone(key, name, uid, "absent", out)
        if not self._listed_once:
            self._listed_once = True
            for key in sorted(self._restored - present_keys):
                if key in self.waiters and key not in self._last:
                    self._deliver(SandboxGone(key, "", "", "absent"), out)
        self.resource_version = event.resource_version
        self._clear_failures()
        self._watch(now, out)

    def _frame(self, frame: Decoded, now: float, out: _Out) -> None:
        self._progress_at = now
        if isinstance(frame, WatchEvent):
            self._stream_progressed = True
            if frame.type == "DELETED":
                self._deleted(frame.object, out)
            else:
                self._observe(frame.object, out)
            self._advance(frame.resource_version)
            self._clear_failures()
        elif isinstance(frame, Bookmark):
            self._stream_progressed = True
            self._advance(frame.resource_version)
            self._clear_failures()
        elif isinstance(frame, ErrorFrame):
            termination = _classify_status(frame.status)
            out.actions.append(CloseStream(self.stream))
            failure = Failure("api", frame.status.message, frame.status.code, frame.status.reason)
            self._failed(termination, failure, now, out, relist=termination is Termination.EXPIRED)
        else:
            # An unusable line may have been an event: report it and reconcile by a re-list.
            out.reports.append(UnusableFrame(frame))
            out.actions.append(CloseStream(self.stream))
            failure = Failure("transport", f"{frame.kind} frame: {frame.detail}")
            self._failed(Termination.TRANSPORT, failure, now, out, relist=True)

    def _advance(self, version: str | None) -> None:
        """Move the resume point forward only: a replayed frame must not drag it back (found by the model
        test — resuming from a replayed version re-delivered an old incarnation's deletion)."""
        if version and (self.resource_version is None or not _older(version, self.resource_version)):
            self.resource_version = version

    def _ended(self, failure: Failure | None, now: float, out: _Out) -> None:
        if failure is None and (self._stream_progressed or now - self._opened_at >= MIN_FREE_RESUME_SECONDS):
            out.reports.append(Terminated(Termination.TRANSPORT, "resume", self.resource_version,
                                          "the server ended the watch"))
            self._watch(now, out)
            return
        failure = failure or Failure("transport", "the watch ended at once with nothing on it")
        self._failed(Termination.TRANSPORT, failure, now, out, relist=False)

    def _tick(self, now: float, out: _Out) -> None:
        if self.phase == "waiting" and self._wake_at is not None and now >= self._wake_at:
            pending, self._pending, self._wake_at = self._pending, None, None
            if isinstance(pending, WatchFrom):
                self._watch(now, out)
            else:
                self._list(out)
        elif self.phase == "watching" and now >= self._progress_at + self.stall_bound:
            out.actions.append(CloseStream(self.stream))
            silent = now - self._progress_at
            self._failed(Termination.SILENCE, Failure("transport", f"no frame for {silent:.0f}s"), now, out,
                         relist=True)

    def _failed(self, termination: Termination, failure: Failure, now: float, out: _Out, *, relist: bool) -> None:
        self.failures += 1
        if self._failure_began is None:
            self._failure_began = now
        detail = _describe(failure)
        if self.failures > self.max_failures or now - self._failure_began >= self.max_failure_seconds:
            self._give_up(termination, detail, out)
            return
        relist = relist or self.resource_version is None
        if relist:
            self.resource_version = None  # never resume from an Expired message's version
        delay = self._backoff(failure)
        action: Action = ListNow() if relist else WatchFrom(self.resource_version or "", self.stream + 1)
        out.reports.append(Terminated(termination, "relist" if relist else "resume", self.resource_version, detail,
                                      delay))
        if delay <= 0:
            if relist:
                self._list(out)
            else:
                self._watch(now, out)
            return
        self.phase = "waiting"
        self._pending = action
        self._wake_at = now + delay

    def _give_up(self, termination: Termination, detail: str, out: _Out) -> None:
        message = (f"the Sandbox watch stopped after {self.failures} failures in a row "
                   f"({termination.value}): {detail}")
        self.phase = "stopped"
        self._stop = WatchFailed(SandboxKey("", ""), termination, message)
        out.reports.append(Terminated(termination, "stop", self.resource_version, message))
        out.actions.append(StopWatching(termination, message))
        told = self.waiters | (set(self._last) if self.deliver_all else set())
        for key in sorted(told):
            out.deliveries.append(WatchFailed(key, termination, message))

    def _shutdown(self, out: _Out) -> None:
        if self.phase == "watching":
            out.actions.append(CloseStream(self.stream))
        self.phase = "stopped"

    def _backoff(self, failure: Failure) -> float:
        delay = self._backoff_schedule.delay(self.failures, self._random)
        if failure.retry_after is not None:
            delay = max(delay, failure.retry_after)
        return delay

    def _clear_failures(self) -> None:
        self.failures = 0
        self._failure_began = None

    # -- deliveries ------------------------------------------------------------------------------------

    def _register(self, event: Registered, out: _Out) -> None:
        key = event.key
        self.waiters.add(key)
        if event.restored:
            self._restored.add(key)
        if self._stop is not None:
            out.deliveries.append(WatchFailed(key, self._stop.termination, self._stop.message))
            return
        last = self._last.get(key)
        if last is not None:
            out.deliveries.append(last)
        elif event.restored and self._listed_once:
            self._deliver(SandboxGone(key, "", "", "absent"), out)

    def _observe(self, obj: Mapping[str, Any], out: _Out) -> SandboxKey | None:
        ident = identify(obj)
        if isinstance(ident, Foreign):
            self._foreign(ident, out)
            return None
        key = ident
        sandbox = view(obj)
        if sandbox.uid in self._retired:
            return key  # a late frame for a retired object
        previous = self._signature.get(key)
        if previous is not None and previous[0] != sandbox.uid:
            old_uid = previous[0]
            if old_uid not in self._retired:
                self._gone(key, sandbox.name, old_uid, "replaced", out)
        elif previous is not None and (previous[1] == sandbox.signature or _older(sandbox.resource_version,
                                                                                 previous[1][0])):
            return key
        self._signature[key] = (sandbox.uid, sandbox.signature)
        self._known[sandbox.name] = (key, sandbox.uid)
        self._deliver(SandboxSeen(key, sandbox, obj), out)
        if sandbox.terminal:
            self._retire(sandbox.uid)
            self._known.pop(sandbox.name, None)
        return key

    def _deleted(self, obj: Mapping[str, Any], out: _Out) -> None:
        ident = identify(obj)
        if isinstance(ident, Foreign):
            self._foreign(ident, out)
            return
        uid = _uid(obj)
        current = self._signature.get(ident)
        if current is not None and current[0] != uid:
            self._retire(uid)  # an older incarnation's deletion: the key's current object lives on
            return
        self._gone(ident, _name(obj), uid, "deleted", out)

    def _gone(self, key: SandboxKey, name: str, uid: str, reason: Literal["deleted", "absent", "replaced"],
              out: _Out) -> None:
        self._known.pop(name, None)
        if uid in self._retired:
            return
        self._retire(uid)
        self._signature.pop(key, None)
        self._deliver(SandboxGone(key, name, uid, reason), out)

    def _deliver(self, delivery: Delivery, out: _Out) -> None:
        key = delivery.key
        self._last[key] = delivery
        self._last.move_to_end(key)
        while len(self._last) > self._keep:
            self._last.popitem(last=False)
        if key in self.waiters or self.deliver_all:
            out.deliveries.append(delivery)

    def _retire(self, uid: str) -> None:
        self._retired[uid] = None
        while len(self._retired) > self._keep:
            self._retired.popitem(last=False)

    def _foreign(self, foreign: Foreign, out: _Out) -> None:
        tag = f"{foreign.uid}:{foreign.why}"
        if tag in self._foreign_reported:
            return
        self._foreign_reported[tag] = None
        while len(self._foreign_reported) > self._keep:
            self._foreign_reported.popitem(last=False)
        out.reports.append(foreign)


@dataclass
class _Out:
    deliveries: list[Delivery] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)


def _classify(failure: Failure) -> Termination:
    if failure.kind == "transport":
        return Termination.TRANSPORT
    return _classify_status(ApiStatus(failure.status, failure.reason, failure.message))


def _classify_status(status: ApiStatus) -> Termination:
    if status.code == 410 or status.reason in ("Expired", "Gone"):
        return Termination.EXPIRED
    return Termination.TRANSIENT


def _describe(failure: Failure) -> str:
    if failure.kind == "api":
        return f"{failure.status} {failure.reason}: {failure.message}".strip()
    return failure.message


def _older(candidate: str, than: str) -> bool:
    """resourceVersions are opaque, but etcd's are integers: refuse one that is plainly older."""
    try:
        return int(candidate) < int(than)
    except ValueError:
        return False


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def _uid(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""
