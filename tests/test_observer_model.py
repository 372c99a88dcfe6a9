"""A hypothesis stateful test: random changes, frames and faults against a model of the cluster.

Properties: once quiet, every waiter's last delivery equals the cluster's state; no delivery repeats
the one before it; no watch ever resumes from an Expired message's version.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from jr2_actors.errors import ApiStatus
from jr2_actors.kube.frames import Bookmark, ErrorFrame, WatchEvent
from jr2_actors.watch.core import (
    CloseStream,
    Delivery,
    Failure,
    FrameReceived,
    Input,
    Listed,
    ListFailed,
    ListNow,
    ObserverCore,
    Registered,
    SandboxGone,
    SandboxSeen,
    Started,
    StreamEnded,
    Tick,
    WatchFrom,
    WatchOpened,
)
from jr2_actors.watch.identity import SandboxKey
from tests.sandboxes import sandbox

RUNS = ("run-a", "run-b", "run-c")
EXPIRED_VERSION = "777777"
EXPIRED = ErrorFrame(ApiStatus(410, "Expired", f"too old resource version: 1 ({EXPIRED_VERSION})"))


class WatchModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.core = ObserverCore(rng=random.Random(1), max_failures=10_000, max_failure_seconds=1e12, stall_bound=90)
        self.now = 0.0
        self.rv = 100
        self.uids = 0
        self.cluster: dict[str, dict[str, Any]] = {}  # run id → object
        self.history: list[tuple[int, str, dict[str, Any]]] = []
        self.mode = "idle"  # listing | watching | waiting
        self.stream = 0
        self.cursor = 0  # next history index the open stream will send
        self.last_frame: Any = None
        self.delivered: dict[SandboxKey, list[Delivery]] = {}
        self.watched_from: list[str] = []
        for run in RUNS:
            self.feed(Registered(SandboxKey(run, "F-1")))
        self.feed(Started())

    # -- the simulated shell -------------------------------------------------------------------------

    def feed(self, event: Input) -> None:
        step = self.core.step(event, self.now)
        for d in step.deliveries:
            self.delivered.setdefault(d.key, []).append(d)
        for action in step.actions:
            if isinstance(action, ListNow):
                self.mode = "listing"
            elif isinstance(action, WatchFrom):
                self.watched_from.append(action.resource_version)
                self.mode = "watching"
                self.stream = action.stream
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

    @rule()
    def time_passes(self) -> None:
        deadline = self.core.deadline
        if deadline is not None:
            self.now = max(self.now, deadline)
            self.feed(Tick())

    # -- properties ------------------------------------------------------------------------------------

    @invariant()
    def no_delivery_repeats_the_one_before(self) -> None:
        for deliveries in self.delivered.values():
            for before, after in itertools.pairwise(deliveries):
                assert _same(before, after) is False, (before, after)

    @invariant()
    def never_resumes_from_an_expired_version(self) -> None:
        assert EXPIRED_VERSION not in self.watched_from

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
        for run in RUNS:
            key = SandboxKey(run, "F-1")
            seen = self.delivered.get(key)
            last = seen[-1] if seen else None
            obj = self.cluster.get(run)
            if obj is None:
                assert last is None or isinstance(last, SandboxGone), (run, last)
            else:
                assert isinstance(last, SandboxSeen), (run, last)
                assert last.sandbox.uid == obj["metadata"]["uid"]
                assert last.sandbox.resource_version == obj["metadata"]["resourceVersion"]


def _same(a: Delivery, b: Delivery) -> bool:
    if isinstance(a, SandboxSeen) and isinstance(b, SandboxSeen):
        return a.sandbox.uid == b.sandbox.uid and a.sandbox.signature == b.sandbox.signature
    return a == b


WatchModel.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestWatchModel = WatchModel.TestCase
