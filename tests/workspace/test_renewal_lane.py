"""The renewal lane owns every Lease's due times (`workspace/renewals.py`): a renewal falls due and is written
with no message to its Workspace, those due within one tick go back to back, the schedule is taken back
before the delete (ADR-0064: a delete never overtakes the renewal before it), and the lane tells the Workspace
only what it must act on (a refusal for good). A Workspace's own renewal is not delivered back by the watch."""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pykka
import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SANDBOX, SECRET, Kind
from jr2_actors.shell import Timers
from jr2_actors.shell.pools import CountedPool
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.errors import KubeError
from jr2_actors.values.workflow import WorkspaceDef
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.deliveries import SandboxSeen
from jr2_actors.watch.identity import KEEPALIVE_ANNOTATION, SandboxKey
from jr2_actors.workspace.actor import WorkspaceActor
from jr2_actors.workspace.manifest import WorkspaceSpec
from jr2_actors.workspace.messages import LeaseRefused, Lost, Release, Released
from jr2_actors.workspace.renewals import RenewalLane
from tests.support.probes import Inbox
from tests.support.waiting import wait_until

LANE = "jr2-test-renewals"
WALL0 = 1_790_000_000.0
KEY = SandboxKey("run-l", "F-1")


# -- the lane alone, on a virtual clock --------------------------------------------------------------------

class Noted:
    """Renewals as a lane runs them: (which, the clock's monotonic time, the thread)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.runs: list[tuple[str, float, str]] = []

    def renew(self, which: str) -> Any:
        def renew(wall: float, stamp: str) -> str:
            with self.lock:
                self.runs.append((which, self.clock.monotonic(), threading.current_thread().name))
            return "7"
        return renew

    def of(self, which: str) -> list[float]:
        with self.lock:
            return [at for w, at, _ in self.runs if w == which]


def stop_world(ref: Any, watch: Any, pool: ThreadPoolExecutor, lane: RenewalLane, timers: Timers,
               client: Any) -> None:
    """A test's Workspace, watch, pools and client stopped, in the order each needs the next still up."""
    ref.stop(block=True, timeout=10)
    watch.stop(block=True, timeout=10)
    pool.shutdown(wait=True)
    lane.shutdown()
    timers.stop()
    client.close()


@pytest.fixture
def driven() -> Iterator[tuple[VirtualClock, RenewalLane, Noted]]:
    clock = VirtualClock(settle=True)  # `advance` fires each timer at its time and waits for the lane to settle
    lane = RenewalLane(clock=clock, name=LANE, threads=1, seed=2)
    yield clock, lane, Noted(clock)
    lane.shutdown()


def test_renewals_due_within_one_tick_go_back_to_back_on_one_wake(
        driven: tuple[VirtualClock, RenewalLane, Noted]) -> None:
    clock, lane, noted = driven
    for which, due in (("a", 10.0), ("b", 10.4), ("c", 10.9), ("d", 12.0)):
        lane.hold(SandboxKey("run", which), noted.renew(which), due, 300.0)
    clock.advance(10.0)
    assert [w for w, _, _ in noted.runs] == ["a", "b", "c"]  # b and c due within the tick: sent with a
    assert {at for _, at, _ in noted.runs} == {10.0}  # on the one wake, the clock still at a's due time
    clock.advance(2.0)
    assert noted.of("d") == [12.0]


def test_the_lane_renews_every_interval_within_a_fifth_and_notes_each_stamp_before_it(
        driven: tuple[VirtualClock, RenewalLane, Noted]) -> None:
    clock, lane, noted = driven
    stamps: list[str | None] = []

    def renew(wall: float, stamp: str) -> str:
        stamps.append(lane.stamps.get(KEY))  # noted for the watch before the write leaves
        assert stamp.endswith("Z") and stamp == stamps[-1]
        return str(noted.renew("a")(wall, stamp))

    lease = lane.hold(KEY, renew, 30.0, 300.0)
    clock.advance(3 * 3600)
    times = noted.of("a")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert times[0] == 30.0 and len(gaps) >= 29 and all(240 <= g <= 360 for g in gaps), gaps
    assert len(set(stamps)) == len(times) and lease.resource_version == "7"
    lane.take_back(lease)
    assert lane.stamps.get(KEY) is None  # taken back: the watch holds nothing back for it any more
    clock.advance(3600)
    assert len(noted.of("a")) == len(times)


def test_a_lease_taken_back_is_never_renewed_again_and_wait_returns_once_its_renewal_is_back() -> None:
    lane = RenewalLane(name=LANE, threads=1)  # the real clock: a renewal held open on a gate
    gate, started, ran = threading.Event(), threading.Event(), []

    def renew(wall: float, stamp: str) -> str:
        ran.append(stamp)
        started.set()
        assert gate.wait(10)
        return "9"

    try:
        lease = lane.hold(KEY, renew, 0.0, 0.05)
        assert started.wait(10)
        lane.take_back(lease)
        assert not lane.wait(lease, timeout=0.05)  # still out: the delete would wait for it
        gate.set()
        assert lane.wait(lease, timeout=10) and lease.resource_version == "9"
        assert lane.stamps.get(KEY) is None  # the stamp of the renewal back after the take-back is forgotten
        count = len(ran)
        other = threading.Event()

        def renew_other(wall: float, stamp: str) -> None:
            other.set()

        lane.hold(SandboxKey("run-2", "F-1"), renew_other, 0.0, 60.0)
        assert other.wait(10)  # the lane went on: a later Lease's renewal ran, the one taken back did not
        assert len(ran) == count == 1
    finally:
        gate.set()
        lane.shutdown()


def test_a_renewal_that_raises_is_logged_and_its_lease_stays_on_schedule(
        driven: tuple[VirtualClock, RenewalLane, Noted], caplog: pytest.LogCaptureFixture) -> None:
    clock, lane, _ = driven
    calls: list[float] = []

    def renew(wall: float, stamp: str) -> str:
        calls.append(clock.monotonic())
        raise RuntimeError("our bug")

    lane.hold(KEY, renew, 1.0, 300.0)
    clock.advance(1000)
    assert len(calls) >= 3 and "failed unexpectedly" in caplog.text


def test_the_lanes_threads_take_the_renewals_due_together() -> None:
    """A slow renewal does not hold the ones behind it for the whole lane: three run at once on three threads."""
    lane = RenewalLane(name=LANE, threads=3)
    three = threading.Barrier(3, timeout=10)  # each waits for the other two: it passes only if all three run
    passed: list[str] = []

    def renew(wall: float, stamp: str) -> None:
        three.wait()
        passed.append(threading.current_thread().name)

    try:
        for i in range(3):
            lane.hold(SandboxKey("run", str(i)), renew, 0.0, 3600.0)
        wait_until(lambda: len(passed) == 3, what="three renewals running at once")
    finally:
        lane.shutdown()
    assert len(set(passed)) == 3 and not three.broken


def test_a_shut_down_lane_refuses_a_lease() -> None:
    lane = RenewalLane(name=LANE, threads=1)
    lane.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        lane.hold(KEY, lambda wall, stamp: None, 0.0, 300.0)


# -- a Workspace and the process's lane, on a driven virtual clock ----------------------------------------

class Counting(WorkspaceActor):
    """A WorkspaceActor noting every message it takes (its own ticks and calls' answers included)."""

    last: Counting | None = None  # the one started last: what this file counts

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.taken: list[Any] = []
        self.taken_lock = threading.Lock()
        Counting.last = self

    def on_receive(self, message: Any) -> Any:
        with self.taken_lock:
            self.taken.append(message)
        return super().on_receive(message)

    def took(self) -> list[Any]:
        with self.taken_lock:
            return list(self.taken)


@dataclass
class LaneWorld:
    clock: VirtualClock
    cluster: FakeCluster
    client: KubeClient
    lane: RenewalLane
    spec: WorkspaceSpec
    ref: pykka.ActorRef[Any]
    actor: Counting
    inbox: Inbox

    def verbs(self) -> list[str]:
        return [r["method"] for r in self.cluster.requests() if "/sandboxes" in r["path"]
                and r["method"] in ("PATCH", "DELETE")]

    def stamp(self) -> str | None:
        obj = self.client.get(SANDBOX, self.spec.name)
        return obj["metadata"]["annotations"][KEEPALIVE_ANNOTATION] if obj else None


@contextlib.contextmanager
def lane_world(run: str) -> Iterator[LaneWorld]:
    """One Workspace waiting for a node (one too small for it) on a driven clock, with the process's lane and
    the watch reading the lane's stamps, as `Orchestrator` wires them."""
    clock = VirtualClock(wall=WALL0, settle=True)
    with FakeCluster(clock=clock, nodes=[Node("tiny", 100, 2**30)], harness=False, bookmark_interval=None) as cluster:
        client = cluster.client()
        lane = RenewalLane(clock=clock, name=LANE, seed=1)
        watch = WatchActor.start(client, clock=clock, stall_bound=10**6, own_stamps=lane.stamps)
        timers = Timers(clock, name="jr2-test-timers")
        pool = CountedPool(2, thread_name_prefix="jr2-test-kube", clock=clock)
        inbox = Inbox()
        spec = WorkspaceSpec(run, "wf", WorkspaceDef("F-1", cpu="1", memory="1Gi"), image="i")
        ref = Counting.start(spec, client=client, watch=watch, parent=inbox, signing_key=b"k" * 32,
                             kube_pool=pool, attach_pool=pool, clock=clock, timers=timers, seed=4, renewals=lane)
        actor = Counting.last
        assert actor is not None
        try:
            clock.run_until(lambda: client.get(SECRET, spec.secret_name) is not None)
            clock.advance(1)  # the Secret's answer taken, the placing wait reported
            yield LaneWorld(clock, cluster, client, lane, spec, ref, actor, inbox)
        finally:
            stop_world(ref, watch, pool, lane, timers, client)


@pytest.mark.slow
def test_renewals_fall_due_and_are_written_with_no_message_to_the_workspace() -> None:
    """Half an hour of Lease: every renewal written (a new stamp each, the first within the first fifth), and
    not one message taken by the WorkspaceActor meanwhile — no tick, no answer, no delivery of its own change
    (it took a tick and an answer per renewal, and the watch told it each renewal's change back)."""
    with lane_world("run-n") as w:
        written = [w.stamp()]
        w.cluster.requests(clear=True)
        before = len(w.actor.took())
        for _ in range(30):
            w.clock.advance(60)
            if w.stamp() != written[-1]:
                written.append(w.stamp())
        taken = w.actor.took()[before:]
        assert len(written) >= 6 and w.verbs().count("PATCH") == len(written) - 1
        assert taken == [], taken


@pytest.mark.slow
def test_the_lease_is_taken_back_at_release_and_no_renewal_follows_the_delete() -> None:
    with lane_world("run-d") as w:
        w.clock.advance(600)  # a few renewals
        w.ref.tell(Release("run-stopped"))  # it never ran: deleted at once
        w.clock.run_until(lambda: any(isinstance(m, Released) for m in w.inbox.snapshot()))
        w.clock.advance(3600)
        verbs = w.verbs()
        assert verbs.count("PATCH") >= 1 and verbs[-1] == "DELETE" and verbs.count("DELETE") == 1
        assert not [u for u in w.clock.upcoming() if LANE in u.what]  # no Lease left on the lane
        assert w.lane.stamps.get(w.spec.key) is None


@pytest.mark.slow
def test_the_delete_carries_the_version_the_lanes_last_renewal_wrote() -> None:
    """The renewals' answers never reach the Workspace: the delete reads the last version from the Lease it
    took back, so it is not refused 409 for a version its own renewal moved (and read again)."""
    with lane_world("run-v") as w:
        w.clock.advance(600)
        w.cluster.requests(clear=True)
        w.ref.tell(Release("run-stopped"))
        w.clock.run_until(lambda: any(isinstance(m, Released) for m in w.inbox.snapshot()))
        methods = [r["method"] for r in w.cluster.requests() if "/sandboxes" in r["path"]]
        assert methods == ["DELETE"]  # one delete: no 409 and no read again
        assert w.inbox.snapshot()[-1] == Released("F-1", deleted=True)


@pytest.mark.slow
def test_a_renewal_refused_404_reaches_the_workspace_and_ends_its_lease_without_loss() -> None:
    with lane_world("run-4") as w:
        w.clock.advance(60)  # the first renewal is done
        patches: list[str] = []

        def gone(kind: Kind, name: str, patch: Any, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
            patches.append(name)  # the API server's answer for a name it holds no Sandbox under
            raise KubeError(404, "NotFound", f'sandboxes "{name}" not found', method="PATCH")

        w.client.merge_patch = gone  # type: ignore[method-assign]  # the watch only lists and watches
        w.clock.advance(360)  # the next renewal meets the 404
        refused = [m for m in w.actor.took() if isinstance(m, LeaseRefused)]
        assert [m.status for m in refused] == [404] and patches == [w.spec.name]
        assert not [m for m in w.inbox.snapshot() if isinstance(m, Lost)]  # the Lease's 404 is no loss
        w.clock.advance(3600)
        assert patches == [w.spec.name]  # no renewal after the refusal
        # Loss is the watch's word: here the idle GC reaped the Sandbox no one renewed, and the watch said so.
        assert [m.reason for m in w.inbox.snapshot() if isinstance(m, Lost)] == ["the Sandbox was deleted (deleted)"]


@pytest.mark.slow
def test_the_workspaces_own_renewal_is_not_delivered_and_another_holders_stamp_is() -> None:
    with lane_world("run-h") as w:
        before = len(w.actor.took())
        w.clock.advance(900)
        assert w.verbs().count("PATCH") >= 2
        assert not [m for m in w.actor.took()[before:] if isinstance(m, SandboxSeen)]
        other = "2026-12-05T03:00:00.000Z"  # another holder stamps the same Sandbox
        w.client.merge_patch(SANDBOX, w.spec.name, {"metadata": {"annotations": {KEEPALIVE_ANNOTATION: other}}})
        w.clock.advance(1)
        seen = [m for m in w.actor.took()[before:] if isinstance(m, SandboxSeen)]
        assert len(seen) == 1 and seen[0].object["metadata"]["annotations"][KEEPALIVE_ANNOTATION] == other


# -- on the real clock: a Workspace whose actor is blocked is renewed, and its delete waits ------------------

class Recording(KubeClient):
    """The real client, noting each write's verb and thread; a renewal waits on `hold` while it is cleared."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.hold = threading.Event()
        self.hold.set()
        self.holding = threading.Event()

    def _note(self, verb: str) -> None:
        with self.lock:
            self.calls.append((verb, threading.current_thread().name))

    def verbs(self) -> list[str]:
        with self.lock:
            return [verb for verb, _ in self.calls]

    def create(self, kind: Kind, body: Any, namespace: str | None = None) -> dict[str, Any]:
        self._note("create")
        return super().create(kind, body, namespace)

    def apply(self, kind: Kind, name: str, body: Any, namespace: str | None = None) -> dict[str, Any]:
        self._note("apply")
        return super().apply(kind, name, body, namespace)

    def merge_patch(self, kind: Kind, name: str, patch: Any, namespace: str | None = None, *,
                    status: bool = False) -> dict[str, Any]:
        if not self.hold.is_set():
            self.holding.set()
            self.hold.wait(10)
        self._note("renew")
        return super().merge_patch(kind, name, patch, namespace, status=status)

    def delete(self, kind: Kind, name: str, namespace: str | None = None, *, uid: str | None = None,
               resource_version: str | None = None) -> bool:
        self._note("delete")
        return super().delete(kind, name, namespace, uid=uid, resource_version=resource_version)


class Blockable(WorkspaceActor):
    """A WorkspaceActor that a test can hold inside a message (`"block"`) until `unblock` is set."""

    unblock = threading.Event()
    blocked = threading.Event()

    def on_receive(self, message: Any) -> Any:
        if message == "block":
            self.blocked.set()
            assert self.unblock.wait(10)
            return None
        return super().on_receive(message)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(nodes=[Node("n1", 1000, 4 * 2**30)], start_seconds=0.05, long_poll=0.2,
                     bookmark_interval=None) as c:
        yield c


@pytest.mark.slow
def test_renewals_go_on_while_the_workspace_is_blocked_and_a_delete_waits_for_the_one_before_it(
        cluster: FakeCluster) -> None:
    client = Recording(cluster.access())
    watch = WatchActor.start(client, stall_bound=10)
    pool, lane, timers, inbox = ThreadPoolExecutor(4, thread_name_prefix="jr2-test-kube"), RenewalLane(name=LANE), \
        Timers(name="jr2-test-timers"), Inbox()
    spec = WorkspaceSpec("run-lane", "wf", WorkspaceDef("F-1", cpu="100m", memory="256Mi"), image="i")
    Blockable.unblock.clear()
    ref = Blockable.start(spec, client=client, watch=watch, parent=inbox, signing_key=cluster.signing_key,
                          kube_pool=pool, attach_pool=pool, timers=timers, seed=3, renewals=lane, lease_interval=0.3)
    try:
        wait_until(lambda: client.verbs().count("renew") >= 1, what="the first renewal")
        ref.tell("block")
        assert Blockable.blocked.wait(10)
        renewed = client.verbs().count("renew")
        wait_until(lambda: client.verbs().count("renew") >= renewed + 3, what="three renewals, the actor blocked")
        Blockable.unblock.set()
        client.hold.clear()  # the next renewal is held on the lane: the delete after it must wait
        assert client.holding.wait(10)
        ref.tell(Release("teardown"))
        wait_until(lambda: ref.actor_inbox.empty(), what="the release taken")
        assert "delete" not in client.verbs()  # not while the renewal before it is out
        client.hold.set()
        inbox.wait_for(lambda ms: any(isinstance(m, Released) for m in ms), what="Released")
    finally:
        Blockable.unblock.set()
        client.hold.set()
        stop_world(ref, watch, pool, lane, timers, client)
    with client.lock:
        calls = list(client.calls)
    verbs = [verb for verb, _ in calls]
    # The kube pool's writes in order (the Sandbox, its Secret ... the delete); the lane's first renewal is due
    # within a fifth of the interval from the uid on, so it may come before the Secret's apply.
    writes = [verb for verb in verbs if verb != "renew"]
    assert writes[:2] == ["create", "apply"] and verbs[-1] == "delete"
    assert verbs.index("delete") > max(i for i, v in enumerate(verbs) if v == "renew")
    assert all(thread.startswith(LANE) for verb, thread in calls if verb == "renew")
    assert all(thread.startswith("jr2-test-kube") for verb, thread in calls if verb != "renew")
    logging.getLogger(__name__).debug("calls: %s", calls)
