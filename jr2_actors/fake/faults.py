"""`cluster.faults`: every fault the fake cluster can play, by name, recorded, seeded and replayable.

    cluster.faults.away(seconds=2)                 # the control plane away for two seconds
    cluster.faults.evict("ws-…", reason="Evicted")  # one Sandbox's pod evicted
    cluster.faults.log                              # what was played, when: a schedule
    cluster.faults.play(Faults.draw(seed=7))        # a seed's schedule, played at its times

Each lever is one method with its parameters; each call is recorded as a `FaultCall` (seconds since the
cluster started, the lever's name, its parameters), so what a test did to the cluster is a schedule that
can be printed, saved as JSON (`schedule_json`) and played again (`play`, `fake-cluster --faults FILE`,
the pytest marker `jr2_faults`). A lasting fault (`seconds=`) undoes itself after that long. A lever aimed
at a Sandbox that is not there is recorded as skipped, never raised: a schedule drawn before the run knows
only names.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from jr2_actors.fake.messages import NoSuchSandbox
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.shell.timers import Timers

if TYPE_CHECKING:
    from jr2_actors.fake.cluster import FakeCluster
    from jr2_actors.fake.harness.core import HarnessCore
    from jr2_actors.fake.operator.core import OperatorCore, Taint


@dataclass(frozen=True)
class FaultCall:
    at: float  # seconds after the cluster started (or after `play` began, in a schedule to play)
    name: str  # the lever: a method of `Faults`
    params: Mapping[str, Any] = field(default_factory=dict)
    skipped: str = ""  # why it did nothing (its Sandbox was not there), when it did nothing

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"t={self.at:.2f}s {self.name}({args})" + (f" — skipped: {self.skipped}" if self.skipped else "")

    def json(self) -> dict[str, Any]:
        return {"at": round(self.at, 3), "fault": self.name, **dict(self.params)}


class FaultScheduleError(ValueError):
    """A schedule that cannot be played: it names the entry and what is wrong with it."""


# Each lever's parameters, as a schedule file writes them (name → allowed keys): one source for `load`.
LEVERS: dict[str, frozenset[str]] = {
    "drop_watches": frozenset(),
    "expire_watches": frozenset(),
    "stream_error": frozenset({"status", "message"}),
    "stall_watches": frozenset({"seconds"}),
    "refuse": frozenset({"count", "status", "retry_after", "watch_only"}),
    "away": frozenset({"seconds", "status"}),
    "latency": frozenset({"delay", "seconds"}),
    "rotate_token": frozenset(),
    "evict": frozenset({"sandbox", "reason", "message"}),
    "kernel_oom": frozenset({"sandbox", "message", "watch_lag"}),
    "guard_kill": frozenset({"sandbox", "peak", "limit", "agent"}),
    "quota": frozenset({"seconds", "cpu_millis", "memory_bytes"}),
    "unschedulable": frozenset({"seconds", "taint"}),
    "harness_latency": frozenset({"delay", "seconds"}),
    "harness_restart": frozenset({"sandbox", "watch_lag"}),
    "lose_conversations": frozenset({"sandbox"}),
    "draining": frozenset({"sandbox", "seconds"}),
    "answers_refused": frozenset({"count", "status"}),
}
_CLUSTER_WIDE = ("drop_watches", "expire_watches", "stream_error", "stall_watches", "refuse", "away", "latency",
                 "rotate_token", "quota", "unschedulable", "harness_latency", "answers_refused")
_AIMED = ("evict", "kernel_oom", "guard_kill", "harness_restart", "lose_conversations", "draining")


class Faults:
    """The levers of one `FakeCluster` (its `faults` attribute)."""

    def __init__(self, cluster: FakeCluster) -> None:
        self._cluster = cluster
        self._lock = threading.Lock()
        self._log: list[FaultCall] = []
        # The cluster's clock times every fault (its `at`, a lasting fault's end, a schedule's calls): on a
        # virtual clock a two-hour `unschedulable` ends at its virtual two hours, and the clock knows of it.
        self._clock = cluster.clock
        self._started = self._clock.monotonic()
        self._timer_thread: Timers | None = None

    def _timers(self) -> Timers:
        with self._lock:
            if self._timer_thread is None:
                self._timer_thread = Timers(self._clock, name="jr2-fake-faults")
            return self._timer_thread

    # -- what was played ------------------------------------------------------------------------------

    @property
    def log(self) -> list[FaultCall]:
        with self._lock:
            return list(self._log)

    def describe(self) -> str:
        return "\n".join(c.describe() for c in self.log) or "no fault played"

    def schedule_json(self) -> str:
        """The log as a schedule file `fake-cluster --faults FILE` and `load` read back."""
        return json.dumps([c.json() for c in self.log], indent=1)

    # -- the API server --------------------------------------------------------------------------------

    def drop_watches(self) -> None:
        """Every open watch ends cleanly."""
        self._do("drop_watches", {}, self._cluster.end_watches)

    def expire_watches(self) -> None:
        """The history is compacted and every watch ends: a resume gets the 410 `Expired` frame."""
        def expire() -> None:
            self._cluster.compact()
            self._cluster.end_watches()
        self._do("expire_watches", {}, expire)

    def stream_error(self, status: int = 500, message: str = "an in-stream error") -> None:
        """Every open watch gets an in-stream ERROR frame with this Status, then ends."""
        self._do("stream_error", {"status": status, "message": message},
                 lambda: self._cluster.stream_error(status, message=message))

    def stall_watches(self, seconds: float) -> None:
        """Open watches stay open and silent (a blackholed link) for `seconds`."""
        self._lasting("stall_watches", {"seconds": seconds}, lambda: self._cluster.stall_watches(True),
                      lambda: self._cluster.stall_watches(False))

    def refuse(self, count: int, status: int = 503, retry_after: int | None = None, watch_only: bool = False) -> None:
        """The next `count` requests (only watch opens, with `watch_only`) get `status`, with Retry-After."""
        self._do("refuse", {"count": count, "status": status, "retry_after": retry_after, "watch_only": watch_only},
                 lambda: self._cluster.fail_next(count, status, retry_after=retry_after, watch_only=watch_only))

    def away(self, seconds: float, status: int = 503) -> None:
        """The control plane away for `seconds`: every request gets `status`, open watches end."""
        self._lasting("away", {"seconds": seconds, "status": status}, lambda: self._cluster.away(True, status=status),
                      lambda: self._cluster.away(False))

    def latency(self, delay: float, seconds: float | None = None) -> None:
        """Every API request reaches the server `delay` seconds late (for `seconds`, else until changed)."""
        self._lasting("latency", {"delay": delay, "seconds": seconds}, lambda: self._cluster.set_latency(delay),
                      lambda: self._cluster.set_latency(0.0))

    def rotate_token(self) -> None:
        """The bearer token rotates: the old one gets 401; the token file and kubeconfigs hold the new one."""
        self._do("rotate_token", {}, self._cluster.rotate_token)

    # -- the operator ----------------------------------------------------------------------------------

    def evict(self, sandbox: str, reason: str = "Evicted",
              message: str = "The node was low on resource: memory.") -> None:
        """A Sandbox's pod is evicted: the Sandbox turns `Lost` with that reason."""
        self._do("evict", {"sandbox": sandbox, "reason": reason, "message": message},
                 lambda: self._cluster.evict(sandbox, reason=reason, message=message))

    def kernel_oom(self, sandbox: str, message: str = "the kernel OOM killer ended the Harness",
                   watch_lag: float = 0.0) -> None:
        """The kernel OOM-kills the Sandbox's Harness container: its last end `OOMKilled`, and a new process
        (the lenient Harness lost its conversations, the strict one keeps them; either runs none of the old
        Submissions). The watch shows the end `watch_lag` seconds after the new process answers (before it,
        with a lag below 0: the Harness answers nothing meanwhile)."""
        params = {"sandbox": sandbox, "message": message, **({"watch_lag": watch_lag} if watch_lag else {})}
        self._restart("kernel_oom", params, "OOMKilled", message)

    def quota(self, seconds: float, cpu_millis: int | None = 1, memory_bytes: int | None = None) -> None:
        """A ResourceQuota this tight for `seconds`: new Sandboxes wait `QuotaExceeded` meanwhile."""
        from jr2_actors.fake.operator.core import Quota

        self._lasting("quota", {"seconds": seconds, "cpu_millis": cpu_millis, "memory_bytes": memory_bytes},
                      lambda: self._cluster.set_quota(Quota(cpu_millis=cpu_millis, memory_bytes=memory_bytes)),
                      lambda: self._cluster.set_quota(None))

    def unschedulable(self, seconds: float, taint: str = "") -> None:
        """No node can take a new Sandbox for `seconds` (the scheduler's own words while it waits); what runs
        keeps running. With a `taint` (`dedicated=gpu:NoSchedule`) every node carries it, which no Sandbox
        tolerates; without one the nodes are gone."""
        from dataclasses import replace

        saved: list[Any] = []

        def empty(core: OperatorCore, now: float) -> None:
            saved[:] = list(core.nodes)
            core.nodes = [replace(node, taints=(*node.taints, parse_taint(taint))) for node in saved] if taint else []

        def back(core: OperatorCore, now: float) -> None:
            core.nodes = []
            for node in saved:
                core.add_node(node)

        params = {"seconds": seconds, **({"taint": taint} if taint else {})}
        self._lasting("unschedulable", params, lambda: self._cluster.operate(empty),
                      lambda: self._cluster.operate(back))

    # -- the Harness -----------------------------------------------------------------------------------

    def guard_kill(self, sandbox: str, peak: str = "1.9Gi", limit: str = "2Gi", agent: str = "") -> None:
        """The Harness's memory guard kills the Sandbox's processes while no Submission runs: a kill on its
        `/memory-kills` list alone (a running Turn's kill comes from its script, `GuardKill`)."""
        self._do("guard_kill", {"sandbox": sandbox, "peak": peak, "limit": limit, "agent": agent},
                 lambda: self._cluster.list_kill(sandbox, peak=peak, limit=limit, agent=agent))

    def harness_latency(self, delay: float, seconds: float | None = None) -> None:
        """Each answer to a pick reaches the Harness `delay` seconds late (for `seconds`, else until changed)."""
        self._lasting("harness_latency", {"delay": delay, "seconds": seconds},
                      lambda: self._harness(lambda core: core.set_answer_latency(delay)),
                      lambda: self._harness(lambda core: core.set_answer_latency(0.0)))

    def harness_restart(self, sandbox: str, watch_lag: float = 0.0) -> None:
        """The Harness container restarts (exit 1), its watch view `watch_lag` seconds after the new process
        answers (before it, below 0), as `kernel_oom` with another last end."""
        self._restart("harness_restart", {"sandbox": sandbox, **({"watch_lag": watch_lag} if watch_lag else {})},
                      "Error", "the Harness restarted")

    def _restart(self, name: str, params: Mapping[str, Any], reason: str, message: str) -> None:
        """A Harness process ends and another begins; the operator publishes the end (`restartCount`,
        `lastTerminated`) `watch_lag` seconds after the new process began, or -lag seconds before it: CONTRACTS.md
        §3, "the Sandbox watch … can arrive before or after the new Harness answers"."""
        sandbox, lag = str(params["sandbox"]), float(params.get("watch_lag") or 0.0)
        clock = self._clock

        def publish() -> None:
            self._cluster.kill_harness(sandbox, reason=reason, message=message)

        def begin() -> None:
            self._harness(lambda core: core.begin(sandbox, clock.wall()))

        def late(half: Callable[[], None]) -> None:
            with contextlib.suppress(Exception):  # the Sandbox went meanwhile, or the cluster stopped first
                half()

        def restart() -> None:
            if lag >= 0 and not self._cluster.call(lambda s: any(o["metadata"]["name"] == sandbox
                                                                 for o in s.objects(SANDBOX))):
                raise NoSuchSandbox(sandbox)
            if lag < 0:
                publish()  # first: a Sandbox that is not there skips the call
            self._harness(lambda core: core.end(sandbox, clock.wall()))
            if lag >= 0:
                begin()
            if lag == 0:
                publish()
            else:
                self._timers().schedule(clock.monotonic() + abs(lag), partial(late, publish if lag > 0 else begin),
                                        f"fault {name}: {'the watch shows it' if lag > 0 else 'a new process'}")
        self._do(name, params, restart)

    def lose_conversations(self, sandbox: str) -> None:
        """The Harness forgets its conversations: a `kept: true` admission gets 404 `kept: false`."""
        self._do("lose_conversations", {"sandbox": sandbox}, lambda: self._harness(lambda core: core.lose(sandbox)))

    def draining(self, sandbox: str, seconds: float) -> None:
        """The Harness drains for `seconds`: admissions are answered 503."""
        self._lasting("draining", {"sandbox": sandbox, "seconds": seconds},
                      lambda: self._harness(lambda core: core.set_draining(sandbox, True)),
                      lambda: self._harness(lambda core: core.set_draining(sandbox, False)))

    def answers_refused(self, count: int, status: int = 503) -> None:
        """The next `count` answers to picks are refused with `status` and not taken."""
        self._do("answers_refused", {"count": count, "status": status},
                 lambda: self._harness(lambda core: core.refuse_answers(count, status)))

    # -- schedules -------------------------------------------------------------------------------------

    def play(self, schedule: Iterable[FaultCall], *, stop: threading.Event | None = None) -> threading.Thread:
        """Play a schedule on a thread of its own, each call at its `at` after now; `stop` ends it early."""
        calls = sorted(schedule, key=lambda c: c.at)
        for call in calls:
            _check(call)
        halt = stop or threading.Event()
        began = self._clock.monotonic()
        timers = self._timers()
        finished = threading.Event()
        left = [len(calls)]

        def fire(call: FaultCall) -> None:
            try:
                if not halt.is_set():
                    getattr(self, call.name)(**dict(call.params))
            finally:
                left[0] -= 1  # the timer thread runs every call: no lock needed
                if not left[0]:
                    finished.set()

        def run() -> None:
            handles = [timers.schedule(began + call.at, partial(fire, call), f"fault {call.name}") for call in calls]
            if not calls:
                return
            while not finished.wait(0.05):  # the calls run on the timer thread, at their times on the clock
                if halt.is_set():
                    for handle in handles:
                        timers.cancel(handle)
                    return

        thread = threading.Thread(target=run, name="jr2-fake-faults", daemon=True)
        thread.start()
        return thread

    @staticmethod
    def draw(seed: int, *, sandboxes: Sequence[str] = (), window: float = 4.0, count: int | None = None) -> list[
            FaultCall]:
        """A seed's schedule over `window` seconds: cluster-wide levers, and levers aimed at `sandboxes` when
        some are named. The same seed draws the same schedule."""
        rng = random.Random(seed)  # noqa: S311 - a test's schedule, not a secret
        names = list(_CLUSTER_WIDE) + (list(_AIMED) if sandboxes else [])
        calls = []
        for _ in range(count if count is not None else rng.randint(3, 8)):
            name = rng.choice(names)
            at = round(rng.uniform(0.0, window), 2)
            span = round(rng.uniform(0.2, 2.0), 2)
            params: dict[str, Any] = {}
            if name in ("stall_watches", "away", "quota", "unschedulable"):
                params["seconds"] = span
            elif name == "refuse":
                params.update(count=rng.randint(1, 6), status=rng.choice((403, 429, 500, 503)))
                if params["status"] == 429:
                    params["retry_after"] = 1
            elif name == "stream_error":
                params["status"] = rng.choice((500, 504, 403))
            elif name in ("latency", "harness_latency"):
                params.update(delay=rng.choice((0.05, 0.5)), seconds=span)
            elif name == "answers_refused":
                params["count"] = rng.randint(1, 3)
            if name in _AIMED:
                params["sandbox"] = rng.choice(list(sandboxes))
                if name == "draining":
                    params["seconds"] = span
            calls.append(FaultCall(at, name, params))
        return sorted(calls, key=lambda c: c.at)

    @staticmethod
    def load(doc: object) -> list[FaultCall]:
        """A schedule read from JSON or YAML: a list of `{at, fault, …its parameters}`; anything else is a
        `FaultScheduleError` naming the entry."""
        if not isinstance(doc, list):
            raise FaultScheduleError("a fault schedule is a list of {at, fault, ...parameters}")
        calls = []
        for i, entry in enumerate(doc):
            if not isinstance(entry, dict):
                raise FaultScheduleError(f"entry {i}: not a mapping")
            entry = dict(entry)
            at, name = entry.pop("at", None), entry.pop("fault", None)
            if not isinstance(at, int | float) or isinstance(at, bool) or not 0 <= at <= 86_400:
                raise FaultScheduleError(f"entry {i}: 'at' must be seconds from 0 to 86400")
            call = FaultCall(float(at), str(name), entry)
            _check(call, f"entry {i}: ")
            calls.append(call)
        return calls

    # -- inside -----------------------------------------------------------------------------------------

    def _harness(self, fn: Callable[[HarnessCore], object]) -> None:
        self._cluster.harness(fn)

    def _record(self, name: str, params: Mapping[str, Any], skipped: str = "") -> None:
        with self._lock:
            self._log.append(FaultCall(round(self._clock.monotonic() - self._started, 3), name, dict(params), skipped))

    def _do(self, name: str, params: Mapping[str, Any], fn: Callable[[], object]) -> None:
        try:
            fn()
        except NoSuchSandbox as e:  # only that: any other KeyError is our bug, never a skipped call
            self._record(name, params, f"no such Sandbox {e}")
            return
        self._record(name, params)

    def _lasting(self, name: str, params: Mapping[str, Any], on: Callable[[], object],
                 off: Callable[[], object]) -> None:
        self._do(name, params, on)
        seconds = params.get("seconds")
        if seconds is None:
            return

        def undo() -> None:
            with contextlib.suppress(Exception):  # the cluster stopped first: nothing left to undo
                off()

        self._timers().schedule(self._clock.monotonic() + float(seconds), undo, f"fault {name}: its end")

    def cancel(self) -> None:
        """Drop the undos still due (the cluster is stopping)."""
        with self._lock:
            thread, self._timer_thread = self._timer_thread, None
        if thread is not None:
            thread.stop()


def _check(call: FaultCall, where: str = "") -> None:
    """A call is played only when its lever exists and each parameter is of its kind (a schedule file is
    outside input: a wrong one is refused by entry and key before anything is played)."""
    allowed = LEVERS.get(call.name)
    if allowed is None:
        raise FaultScheduleError(f"{where}no fault named {call.name!r} (one of: {', '.join(sorted(LEVERS))})")
    unknown = set(call.params) - allowed
    if unknown:
        raise FaultScheduleError(f"{where}{call.name} takes no {', '.join(sorted(unknown))} "
                                 f"(it takes: {', '.join(sorted(allowed)) or 'nothing'})")
    for key, value in call.params.items():
        if not _KINDS.get(key, _text)(value):
            raise FaultScheduleError(f"{where}{call.name}: {key}={value!r} is not {_WORDS.get(key, 'a short text')}")


def _seconds(v: object) -> bool:
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 86_400)


def _lag(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and -60 <= v <= 60


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1_000_000


def _status(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 100 <= v <= 599


def _text(v: object) -> bool:
    return isinstance(v, str) and len(v) <= 1024


def _flag(v: object) -> bool:
    return isinstance(v, bool)


def _millis(v: object) -> bool:
    return v is None or _count(v) or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2**62)


_KINDS: dict[str, Callable[[object], bool]] = {
    "seconds": _seconds, "delay": _seconds, "count": _count, "status": _status, "retry_after": _seconds,
    "watch_only": _flag, "cpu_millis": _millis, "memory_bytes": _millis, "watch_lag": _lag}
_WORDS = {"watch_lag": "seconds from -60 to 60",
          "seconds": "seconds from 0 to 86400", "delay": "seconds from 0 to 86400", "count": "a count from 0",
          "status": "an HTTP status (100-599)", "retry_after": "seconds", "watch_only": "true or false",
          "cpu_millis": "a whole number", "memory_bytes": "a whole number"}


def parse_taint(text: str) -> Taint:
    """`key=value:Effect`, `key:Effect` or `key` (NoSchedule), as `kubectl taint` writes one."""
    from jr2_actors.fake.operator.core import Taint

    head, _, effect = text.rpartition(":") if ":" in text else (text, "", "NoSchedule")
    key, _, value = head.partition("=")
    return Taint(key, value, effect or "NoSchedule")
