"""StreamKeeper: the one Sandbox watch's stream, as a deterministic state machine (ADR-0063, dagr T107).

Theory of operation. The keeper answers one question: is a watch open, from which version, and what
follows when it ends. It knows nothing of Sandboxes: every object it hears (a list's items, a watch
event) is passed on as a `Signal` for the delivery cache. It does no I/O, reads no clock and starts no
thread: every input comes with the monotonic time `now`.

Phases: `idle` → `listing` → `watching` ⇄ `waiting` (a backoff) → …; `stopped` only by `Shutdown`. The
machine is `MACHINE` at the bottom (`step.Machine`): an input off it is our bug and raises `OffTable`;
the world's late answers have rows that ignore them.

Terminations, and what follows each:
- **Expired** (410, reason `Expired`/`Gone`; an ERROR frame in a 200 or the answer to opening) →
  re-list. The version inside the message is the watch cache's oldest, never the head.
- **Any other in-stream ERROR** (500, 504 "Too large resource version", 403, …) → re-list as well
  (ADR-0063: "Any ERROR event re-lists"): the server that sent it is behind or failing at our version,
  so resuming from that version can only fail again.
- **Transport** (stream end, connection error, read timeout) → resume from the last version seen; an
  unusable frame re-lists (it may have been an event). A server that ends a watch it served for a while
  is a free resume.
- **Transient answer on opening** (403, 429 with Retry-After, 5xx, a 401 after the client's one retry)
  → back off, then resume (re-list when no version is known).
- **Silence** (nothing for the stall bound) → re-list; a list not answered within its deadline → re-list.

Backoff: the first retry at once, then 250 ms doubling to 30 s with up to 20 % jitter (a seeded
random), never shorter than a Retry-After. Two counts: the failure run (for the bound) ends with a
list that works, a bookmark or an object; the backoff step ends only with a stream that served — a
bookmark, an object, or a watch that stayed open at least 1 s before it failed (a silence takes the
whole stall bound) — so a server that fails every watch right after a good list backs off to the cap
instead of looping hot.

The bound (12 failures in a row or 300 s): the keeper turns degraded — one `Terminated(action=
"degraded")` and one `Blind` signal (every waiter is told) — and from then on every retry re-lists at
the backoff cap. It never stops for good: the first list that works ends the degradation, and its
`Snapshot(recovered=True)` has the cache reconcile every waiter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, NamedTuple

from jr2_actors.kube.frames import Bookmark, Decoded, ErrorFrame, FrameError, WatchEvent
from jr2_actors.values.backoff import Backoff, Jitter, NoJitter
from jr2_actors.values.constants import (
    STALL_BOUND_SECONDS,
    WATCH_BACKOFF,
    WATCH_LIST_DEADLINE_SECONDS,
    WATCH_MAX_FAILURE_SECONDS,
    WATCH_MAX_FAILURES,
    WATCH_MIN_FREE_RESUME_SECONDS,
)
from jr2_actors.values.errors import ApiStatus
from jr2_actors.values.step import Machine, Walk

# Far enough along any schedule that it waits its cap (Backoff caps the exponent at 64 too).
_AT_THE_CAP = 64


class Termination(Enum):
    EXPIRED = "expired"
    TRANSPORT = "transport"
    TRANSIENT = "transient"
    SILENCE = "silence"


# -- inputs ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Failure:
    """A call that failed, as the shell saw it: an API answer, or no answer at all."""

    kind: Literal["api", "transport"]
    message: str
    status: int | None = None
    reason: str = ""
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Started:
    pass


@dataclass(frozen=True, slots=True)
class Listed:
    items: Sequence[Mapping[str, Any]] = field(repr=False)
    resource_version: str


@dataclass(frozen=True, slots=True)
class ListFailed:
    failure: Failure


@dataclass(frozen=True, slots=True)
class WatchOpened:
    stream: int


@dataclass(frozen=True, slots=True)
class WatchOpenFailed:
    stream: int
    failure: Failure


class FrameReceived(NamedTuple):  # a tuple: one is built per frame
    stream: int
    frame: Decoded


@dataclass(frozen=True, slots=True)
class StreamEnded:
    stream: int
    failure: Failure | None = None


@dataclass(frozen=True, slots=True)
class StreamTick:
    pass


@dataclass(frozen=True, slots=True)
class Shutdown:
    pass


StreamInput = (Started | Listed | ListFailed | WatchOpened | WatchOpenFailed | FrameReceived | StreamEnded | StreamTick
               | Shutdown)


# -- outputs: signals for the delivery cache, reports, actions -------------------------------------

@dataclass(frozen=True, slots=True)
class Snapshot:
    """A list's answer: the whole state. `recovered`: it ends a degradation (reconcile every waiter)."""

    items: Sequence[Mapping[str, Any]] = field(repr=False)
    recovered: bool = False


@dataclass(frozen=True, slots=True)
class Change:
    """One ADDED / MODIFIED / DELETED event off the stream."""

    event: WatchEvent


@dataclass(frozen=True, slots=True)
class Blind:
    """The failure bound is passed: the cluster's state is unknown (never lost) until a list works."""

    termination: Termination
    message: str


Signal = Snapshot | Change | Blind


@dataclass(frozen=True, slots=True)
class Terminated:
    """One termination handled: what it was, what follows, from which version (None: a re-list)."""

    termination: Termination
    action: Literal["relist", "resume", "degraded"]
    resource_version: str | None
    detail: str
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class UnusableFrame:
    frame: FrameError


@dataclass(frozen=True, slots=True)
class ListNow:
    pass


@dataclass(frozen=True, slots=True)
class WatchFrom:
    resource_version: str
    stream: int


@dataclass(frozen=True, slots=True)
class CloseStream:
    stream: int


Action = ListNow | WatchFrom | CloseStream


@dataclass(slots=True)
class Kept:
    """What one step of the keeper decided."""

    signals: list[Signal] = field(default_factory=list)
    reports: list[Terminated | UnusableFrame] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)


# -- the keeper --------------------------------------------------------------------------------------

Phase = Literal["idle", "listing", "watching", "waiting", "stopped"]


class StreamKeeper:
    def __init__(self, *, stall_bound: float = STALL_BOUND_SECONDS, list_deadline: float = WATCH_LIST_DEADLINE_SECONDS,
                 max_failures: int = WATCH_MAX_FAILURES, max_failure_seconds: float = WATCH_MAX_FAILURE_SECONDS,
                 rng: Jitter | None = None, backoff: Backoff = WATCH_BACKOFF) -> None:
        self.stall_bound = stall_bound
        self.list_deadline = list_deadline
        self.max_failures = max_failures
        self.max_failure_seconds = max_failure_seconds
        self._random: Jitter = rng or NoJitter()
        self._schedule = backoff
        self.phase: Phase = "idle"
        self.degraded = False
        self.resource_version: str | None = None
        self.stream = 0
        self.failures = 0  # the failure run, for the bound
        self._retries = 0  # the backoff step: ends only with progress on a stream
        self._failure_began: float | None = None
        self.last_error: str | None = None  # The newest failure's cause, whole, while failures run
        self._since = 0.0  # when the current list or watch began
        self._progress_at = 0.0
        self._stream_progressed = False
        self._pending: Action | None = None
        self._wake_at: float | None = None
        self._walk = Walk(MACHINE, "the Sandbox watch")

    def step(self, event: StreamInput, now: float) -> Kept:
        out = Kept()
        with self._walk.take(self.phase, event) as handler:
            handler(self, event, now, out)
        return out

    def _go(self, phase: Phase) -> None:
        self._walk.move(phase)
        self.phase = phase

    @property
    def deadline(self) -> float | None:
        if self.phase == "waiting":
            return self._wake_at
        if self.phase == "watching":
            return self._progress_at + self.stall_bound  # from the last progress, never postponed otherwise
        if self.phase == "listing":
            return self._since + self.list_deadline
        return None

    # -- transitions -----------------------------------------------------------------------------------

    # -- handlers (see MACHINE) ------------------------------------------------------------------------

    def _started(self, event: Started, now: float, out: Kept) -> None:
        self._list(now, out)

    def _shutdown(self, event: Shutdown, now: float, out: Kept) -> None:
        if self.phase == "watching":
            out.actions.append(CloseStream(self.stream))
        self._go("stopped")

    def _list_failed(self, event: ListFailed, now: float, out: Kept) -> None:
        self._failed(_classify(event.failure), event.failure, now, out, relist=True)

    def _opened(self, event: WatchOpened, now: float, out: Kept) -> None:
        if event.stream == self.stream:
            self._progress_at = now

    def _open_failed(self, event: WatchOpenFailed, now: float, out: Kept) -> None:
        if event.stream == self.stream:
            termination = _classify(event.failure)
            self._failed(termination, event.failure, now, out, relist=termination is Termination.EXPIRED)

    def _received(self, event: FrameReceived, now: float, out: Kept) -> None:
        if event.stream == self.stream:
            self._frame(event.frame, now, out)

    def _stream_ended(self, event: StreamEnded, now: float, out: Kept) -> None:
        if event.stream == self.stream:
            self._ended(event.failure, now, out)

    def _late(self, event: StreamInput, now: float, out: Kept) -> None:
        """An answer to a call of an earlier phase (a list past its deadline, a closed stream), a timer due
        before the last move, or anything after the stop: nothing to do."""

    # -- transitions -----------------------------------------------------------------------------------

    def _list(self, now: float, out: Kept) -> None:
        self._go("listing")
        self._since = now
        out.actions.append(ListNow())

    def _watch(self, now: float, out: Kept) -> None:
        assert self.resource_version is not None
        self.stream += 1
        self._go("watching")
        self._since = now
        self._progress_at = now
        self._stream_progressed = False
        out.actions.append(WatchFrom(self.resource_version, self.stream))

    def _listed(self, event: Listed, now: float, out: Kept) -> None:  # a handler too
        out.signals.append(Snapshot(event.items, recovered=self.degraded))
        self.degraded = False
        self.resource_version = event.resource_version
        self.failures = 0
        self._failure_began = None
        self._watch(now, out)

    def took_event(self, stream: int, event: WatchEvent, now: float) -> bool:
        """`step(FrameReceived(stream, event))` for nearly every frame (an event on the stream watched), without
        the table's walk or a `Kept`: the caller hands the event on. False, having done nothing, otherwise."""
        if self.phase != "watching" or stream != self.stream:
            return False
        self._progress(event, now)
        return True

    def _progress(self, frame: WatchEvent | Bookmark, now: float) -> None:
        self._progress_at, self._stream_progressed = now, True
        self._advance(frame.resource_version)
        self.failures = self._retries = 0
        self._failure_began = None

    def _frame(self, frame: Decoded, now: float, out: Kept) -> None:
        self._progress_at = now
        if isinstance(frame, WatchEvent | Bookmark):
            if isinstance(frame, WatchEvent):
                out.signals.append(Change(frame))
            self._progress(frame, now)
        elif isinstance(frame, ErrorFrame):
            out.actions.append(CloseStream(self.stream))
            failure = Failure("api", frame.status.message, frame.status.code, frame.status.reason)
            # ADR-0063: any ERROR event re-lists — a 504 "Too large" would only fail again from this version.
            self._failed(_classify_status(frame.status), failure, now, out, relist=True)
        else:
            out.reports.append(UnusableFrame(frame))
            out.actions.append(CloseStream(self.stream))
            failure = Failure("transport", f"{frame.kind} frame: {frame.detail}")
            self._failed(Termination.TRANSPORT, failure, now, out, relist=True)

    def _advance(self, version: str | None) -> None:
        """Move the resume point forward only: a replayed frame must not drag it back (found by the model
        test — resuming from a replayed version re-delivered an old incarnation's deletion)."""
        if version and (self.resource_version is None or not older(version, self.resource_version)):
            self.resource_version = version

    def _ended(self, failure: Failure | None, now: float, out: Kept) -> None:
        if failure is None and (self._stream_progressed or now - self._since >= WATCH_MIN_FREE_RESUME_SECONDS):
            out.reports.append(Terminated(Termination.TRANSPORT, "resume", self.resource_version,
                                          "the server ended the watch"))
            self._watch(now, out)
            return
        failure = failure or Failure("transport", "the watch ended at once with nothing on it")
        self._failed(Termination.TRANSPORT, failure, now, out, relist=False)

    def _tick(self, event: StreamTick, now: float, out: Kept) -> None:
        if self.phase == "waiting" and self._wake_at is not None and now >= self._wake_at:
            pending, self._pending, self._wake_at = self._pending, None, None
            if isinstance(pending, WatchFrom):
                self._watch(now, out)
            else:
                self._list(now, out)
        elif self.phase == "watching" and now >= self._progress_at + self.stall_bound:
            out.actions.append(CloseStream(self.stream))
            silent = now - self._progress_at
            self._failed(Termination.SILENCE, Failure("transport", f"no frame for {silent:.0f}s"), now, out,
                         relist=True)
        elif self.phase == "listing" and now >= self._since + self.list_deadline:
            # A late answer to this list is still taken if it comes while the next one is pending.
            failure = Failure("transport", f"the list did not answer within {now - self._since:.0f}s")
            self._failed(Termination.TRANSPORT, failure, now, out, relist=True)

    @property
    def failing_since(self) -> float | None:
        """When the current run of failures began (monotonic), None when the stream serves."""
        return self._failure_began

    def _failed(self, termination: Termination, failure: Failure, now: float, out: Kept, *, relist: bool) -> None:
        if self.phase == "watching" and now - self._since >= WATCH_MIN_FREE_RESUME_SECONDS:
            self._retries = 0  # the watch served a while: not the hot loop the schedule guards against
        self.failures += 1
        self._retries += 1
        if self._failure_began is None:
            self._failure_began = now
        detail = _describe(failure)
        self.last_error = detail
        crossing = not self.degraded and (self.failures >= self.max_failures
                                          or now - self._failure_began >= self.max_failure_seconds)
        self.degraded = self.degraded or crossing
        relist = relist or self.degraded or self.resource_version is None
        if relist:
            self.resource_version = None  # never resume from an Expired message's version
        delay = self._schedule.delay(_AT_THE_CAP if self.degraded else self._retries, self._random)
        if failure.retry_after is not None:
            delay = max(delay, failure.retry_after)
        if crossing:
            message = (f"the Sandbox watch is blind after {self.failures} failures in a row "
                       f"({termination.value}): {detail}; it keeps re-listing")
            out.reports.append(Terminated(termination, "degraded", None, message, delay))
            out.signals.append(Blind(termination, message))
        else:
            out.reports.append(Terminated(termination, "relist" if relist else "resume", self.resource_version,
                                          detail, delay))
        if delay <= 0:
            if relist:
                self._list(now, out)
            else:
                self._watch(now, out)
            return
        self._go("waiting")
        self._pending = ListNow() if relist else WatchFrom(self.resource_version or "", self.stream + 1)
        self._wake_at = now + delay


# -- the machine -------------------------------------------------------------------------------------

K = StreamKeeper
ON_A_STREAM = (WatchOpened, WatchOpenFailed, FrameReceived, StreamEnded)
MOVES: tuple[Phase, ...] = ("listing", "watching", "waiting")
# One table holds the keeper (`step.Machine`): an input with no row is our bug (`OffTable`) — a second start,
# a call's answer before any call. The world's late answers (a list past its deadline, a stream already
# closed or of an older number, a timer due before the last move) have rows that ignore them, and so does
# everything after the stop. docs/architecture.md prints it; a test keeps the copy true.
MACHINE: Machine[Callable[[StreamKeeper, Any, float, Kept], None]] = Machine("the Sandbox watch", (
    (("idle",), Started, ("listing",), K._started),
    (("idle", "listing", "watching", "waiting"), Shutdown, ("stopped",), K._shutdown),
    (("listing",), Listed, ("watching",), K._listed),
    (("listing",), ListFailed, MOVES, K._list_failed),
    (("watching",), WatchOpened, (), K._opened),
    (("watching",), WatchOpenFailed, MOVES, K._open_failed),
    (("watching",), FrameReceived, MOVES, K._received),
    (("watching",), StreamEnded, MOVES, K._stream_ended),
    (("listing", "watching", "waiting"), StreamTick, MOVES, K._tick),
    (("watching", "waiting"), (Listed, ListFailed), (), K._late),
    (("listing", "waiting"), ON_A_STREAM, (), K._late),
    (("idle",), StreamTick, (), K._late),
    (("stopped",), (Started, Shutdown, Listed, ListFailed, *ON_A_STREAM, StreamTick), (), K._late),
))


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


def older(candidate: str, than: str) -> bool:
    """resourceVersions are opaque, but etcd's are integers: True for one that is plainly older."""
    try:
        return int(candidate) < int(than)
    except ValueError:
        return False
