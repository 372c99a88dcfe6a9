"""A hypothesis stateful test: random changes, frames and faults against a model of the cluster.

The model's server answers resumes with in-stream errors, fails lists past the failure bound, and
its Workspaces come back under the same key. Properties: once quiet, every waiter's last delivery
equals the cluster's state (a waiter that never saw its Sandbox may still be waiting on a blind
watch's word); no delivery repeats the one before it; no watch ever resumes from an Expired message's
version, nor after any in-stream ERROR or while degraded without a re-list first; a waiter that
registers afresh is never handed a Gone.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from jr2_actors.kube.frames import Bookmark, ErrorFrame, WatchEvent
from jr2_actors.values.errors import ApiStatus
from jr2_actors.watch.core import Input, Registered, WatchCore, deliveries
from jr2_actors.watch.deliveries import Delivery, SandboxGone, SandboxSeen, WatchFailed
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.watch.stream import (
    CloseStream,
    Failure,
    FrameReceived,
    Listed,
    ListFailed,
    ListNow,
    Started,
    StreamEnded,
    StreamTick,
    WatchFrom,
    WatchOpened,
)
from tests.support.sandboxes import sandbox

RUNS = ("run-a", "run-b", "run-c")
MAX_FAILURES = 4
EXPIRED_VERSION = "777777"
EXPIRED = ErrorFrame(ApiStatus(410, "Expired", f"too old resource version: 1 ({EXPIRED_VERSION})"))


class WatchModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.core = WatchCore(rng=random.Random(1), max_failures=MAX_FAILURES, max_failure_seconds=1e12,
                                 stall_bound=90)
        self.now = 0.0
        self.rv = 100
        self.uids = 0
        self.cluster: dict[str, dict[str, Any]] = {}  # run id → object
        self.history: list[tuple[int, str, dict[str, Any]]] = []
        self.mode = "idle"  # listing | watching | waiting
        self.stream = 0
        self.cursor = 0  # next history index the open stream will send
        self.last_frame: Any = None
        self.delivered: dict[SandboxKey, list[Delivery]] = {}  # what the key's current waiter was told
        self.watched_from: list[str] = []
        self.must_relist = False
        self.resumed_without_relist: list[str] = []
        self.fresh_stream = False
        self.gone_on_registration: list[Delivery] = []
        self.told_blind: set[SandboxKey] = set()  # waiters told WatchFailed in this blindness
        self.told_twice: list[Delivery] = []
        for run in RUNS:
            self.feed(Registered(SandboxKey(run, "F-1")))
        self.feed(Started())

    # -- the simulated shell -------------------------------------------------------------------------

    def feed(self, event: Input) -> None:
        step = self.core.step(event, self.now)
        if isinstance(event, Registered):
            self.gone_on_registration += [d for d in deliveries(step) if isinstance(d, SandboxGone)]
        for d in deliveries(step):
            self.delivered.setdefault(d.key, []).append(d)
            if isinstance(d, WatchFailed):
                if d.key in self.told_blind:
                    self.told_twice.append(d)
                self.told_blind.add(d.key)
        if self.core.up:
            self.told_blind.clear()
        if isinstance(event, FrameReceived) and isinstance(event.frame, ErrorFrame):
            self.must_relist = True
        if not self.core.up and not isinstance(event, Registered):
            self.must_relist = True  # degraded: every retry re-lists
        for action in step.actions:
            if isinstance(action, ListNow):
                self.mode = "listing"
                self.must_relist = False
            elif isinstance(action, WatchFrom):
                if self.must_relist:
                    self.resumed_without_relist.append(action.resource_version)
                self.watched_from.append(action.resource_version)
                self.mode = "watching"
                self.stream = action.stream
                self.fresh_stream = True
                start = int(action.resource_version)
                self.cursor = next((i for i, (rv, _, _) in enumerate(self.history) if rv > start), len(self.history))
                self.core.step(WatchOpened(self.stream), self.now)
            elif isinstance(action, CloseStream):
                self.mode = "closed" if self.mode == "watching" else self.mode
        if not step.actions and self.core.phase == "waiting":
            self.mode = "waiting"

    def commit(self, type_: str, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, type_, obj))

    # -- cluster changes -------------------------------------------------------------------------------

    @rule(run=st.sampled_from(RUNS), phase=st.sampled_from(["Pending", "Ready"]),
          reason=st.sampled_from(["", "Unschedulable", "QuotaExceeded", "Scheduled"]))
    def change(self, run: str, phase: str, reason: str) -> None:
        current = self.cluster.get(run)
        if current is None:
            self.uids += 1
            obj = sandbox(run, uid=f"{run}-{self.uids}", phase=phase, scheduled=reason)
            self.cluster[run] = obj
            self.commit("ADDED", obj)
        else:
            obj = sandbox(run, uid=current["metadata"]["uid"], phase=phase, scheduled=reason)
            self.cluster[run] = obj
            self.commit("MODIFIED", obj)

    @rule(run=st.sampled_from(RUNS))
    def delete(self, run: str) -> None:
        obj = self.cluster.pop(run, None)
        if obj is not None:
            self.commit("DELETED", dict(obj, metadata=dict(obj["metadata"])))

    @rule(run=st.sampled_from(RUNS))
    def key_comes_back(self, run: str) -> None:
        """ADR-0064: a Workspace's successor registers under the same key (its predecessor unregistered)."""
        key = SandboxKey(run, "F-1")
        self.delivered[key] = []  # the new waiter's own record
        self.told_blind.discard(key)
        self.feed(Registered(key))

    # -- the wire --------------------------------------------------------------------------------------

    @precondition(lambda self: self.mode == "listing")
    @rule()
    def list_answers(self) -> None:
        self.feed(Listed([dict(o) for o in self.cluster.values()], str(self.rv)))

    @precondition(lambda self: self.mode == "listing")
    @rule()
    def list_fails(self) -> None:
        self.feed(ListFailed(Failure("api", "etcd leader changed", 500, "InternalError")))

    @precondition(lambda self: self.mode == "watching" and self.cursor < len(self.history))
    @rule()
    def deliver(self) -> None:
        self.fresh_stream = False
        rv, type_, obj = self.history[self.cursor]
        self.cursor += 1
        self.last_frame = WatchEvent(type_, obj, str(rv))  # type: ignore[arg-type]
        self.feed(FrameReceived(self.stream, self.last_frame))

    @precondition(lambda self: self.mode == "watching" and self.last_frame is not None)
    @rule()
    def duplicate(self) -> None:
        self.feed(FrameReceived(self.stream, self.last_frame))

    @precondition(lambda self: self.mode == "watching" and self.cursor == len(self.history))
    @rule()
    def bookmark(self) -> None:
        self.feed(FrameReceived(self.stream, Bookmark(str(self.rv))))

    @precondition(lambda self: self.mode == "watching")
    @rule()
    def expire(self) -> None:
        self.feed(FrameReceived(self.stream, EXPIRED))

    @precondition(lambda self: self.mode == "watching")
    @rule(clean=st.booleans())
    def stream_ends(self, clean: bool) -> None:
        self.now += 5
        self.feed(StreamEnded(self.stream, None if clean else Failure("transport", "connection reset")))

    @precondition(lambda self: self.mode == "watching")
    @rule(code=st.sampled_from([403, 500, 504]))
    def in_stream_error(self, code: int) -> None:
        self.feed(FrameReceived(self.stream, ErrorFrame(ApiStatus(code, "X", "transient"))))

    @precondition(lambda self: self.mode == "watching" and self.fresh_stream)
    @rule(code=st.sampled_from([410, 500, 504]))
    def resume_answered_with_an_error(self, code: int) -> None:
        """The answer to a resume is an ERROR frame at once — 504 "Too large resource version" from a
        server behind our version, or the 410 of one whose cache moved on."""
        self.fresh_stream = False
        reason = "Expired" if code == 410 else "Timeout"
        message = EXPIRED.status.message if code == 410 else f"Too large resource version: {self.rv}"
        self.feed(FrameReceived(self.stream, ErrorFrame(ApiStatus(code, reason, message))))

    @precondition(lambda self: self.mode == "listing")
    @rule(count=st.integers(min_value=1, max_value=MAX_FAILURES + 2))
    def lists_fail_in_a_row(self, count: int) -> None:
        """A control plane upgrade: lists fail in a row, up to past the failure bound."""
        for _ in range(count):
            if self.mode != "listing":
                self.time_passes()
            if self.mode == "listing":
                self.list_fails()

    @rule()
    def time_passes(self) -> None:
        deadline = self.core.deadline
        if deadline is not None:
            self.now = max(self.now, deadline)
            self.feed(StreamTick())

    # -- properties ------------------------------------------------------------------------------------

    @invariant()
    def no_delivery_repeats_the_one_before(self) -> None:
        for told in self.delivered.values():
            for before, after in itertools.pairwise(told):
                assert _same(before, after) is False, (before, after)

    @invariant()
    def never_resumes_from_an_expired_version(self) -> None:
        assert EXPIRED_VERSION not in self.watched_from

    @invariant()
    def never_resumes_after_an_error_frame_or_while_degraded(self) -> None:
        assert self.resumed_without_relist == []

    @invariant()
    def a_fresh_waiter_is_never_handed_a_gone(self) -> None:
        assert self.gone_on_registration == []

    @invariant()
    def blindness_is_told_once(self) -> None:
        assert self.told_twice == []

    def teardown(self) -> None:
        # Quiesce: answer lists, send every pending frame, a bookmark; then compare with the cluster.
        for _ in range(200):
            if self.mode == "listing":
                self.list_answers()
            elif self.mode == "watching" and self.cursor < len(self.history):
                self.deliver()
            elif self.mode in ("waiting", "closed"):
                self.time_passes()
            else:
                break
        assert self.mode == "watching" and self.cursor == len(self.history)
        assert self.core.up
        for run in RUNS:
            key = SandboxKey(run, "F-1")
            seen = self.delivered.get(key)
            last = seen[-1] if seen else None
            obj = self.cluster.get(run)
            answered = any(isinstance(d, SandboxSeen | SandboxGone) for d in seen or [])
            if obj is None and answered:
                assert isinstance(last, SandboxGone), (run, last)
            elif obj is None:
                assert last is None or isinstance(last, WatchFailed), (run, last)  # never saw it: still waiting
            else:
                assert isinstance(last, SandboxSeen), (run, last)
                assert last.sandbox.uid == obj["metadata"]["uid"]
                assert last.sandbox.resource_version == obj["metadata"]["resourceVersion"]


def _same(a: Delivery, b: Delivery) -> bool:
    """Two object deliveries that say the same thing (a blind watch's word is `blindness_is_told_once`'s)."""
    if isinstance(a, SandboxSeen) and isinstance(b, SandboxSeen):
        return a.sandbox.uid == b.sandbox.uid and a.sandbox.signature == b.sandbox.signature
    return a == b and not isinstance(a, WatchFailed)


WatchModel.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestWatchModel = WatchModel.TestCase
