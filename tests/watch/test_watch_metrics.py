"""The watch's metrics: events by type, re-lists by cause, reconnects, its state and ages, and the delivery
latency from the fake server's stamped write to the WorkspaceActor's receipt."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.frames import Bookmark, ErrorFrame, FrameError, WatchEvent, decode_line
from jr2_actors.shell import Timers
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.backoff import Backoff
from jr2_actors.values.constants import WATCH_WRITTEN_AT_FIELD
from jr2_actors.values.errors import ApiStatus
from jr2_actors.values.workflow import WorkspaceDef
from jr2_actors.watch import stream as core
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.deliveries import SandboxSeen
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.watch.messages import Register
from jr2_actors.watch.metrics import frame_type, relist_cause
from jr2_actors.workspace.actor import WorkspaceActor
from jr2_actors.workspace.manifest import WorkspaceSpec
from tests.support.metrics_text import samples, value
from tests.support.probes import Inbox
from tests.support.sandboxes import create
from tests.support.waiting import wait_until

FAST = Backoff(initial=0.01, cap=0.05, immediate_first=True)


def text(telemetry: Telemetry) -> str:
    return telemetry.exposition().decode()


def test_relist_causes_are_named_from_what_ended_the_stream() -> None:
    def terminated(termination: core.Termination, action: str = "relist") -> core.Terminated:
        return core.Terminated(termination, action, None, "")  # type: ignore[arg-type]

    error_frame = core.FrameReceived(1, ErrorFrame(ApiStatus(504, "Timeout", "Too large resource version")))
    unusable = core.FrameReceived(1, FrameError("malformed", "not JSON", 3))
    failure = core.Failure("transport", "refused")
    transient = core.Termination.TRANSIENT
    assert relist_cause(core.StreamTick(), terminated(core.Termination.SILENCE), False) == "silence"
    assert relist_cause(error_frame, terminated(core.Termination.EXPIRED), False) == "expired"
    assert relist_cause(error_frame, terminated(transient), False) == "error_frame"
    assert relist_cause(unusable, terminated(core.Termination.TRANSPORT), False) == "unusable_frame"
    assert relist_cause(core.ListFailed(failure), terminated(transient), False) == "list_failed"
    assert relist_cause(core.StreamTick(), terminated(core.Termination.TRANSPORT), False) == "list_failed"
    assert relist_cause(core.StreamEnded(1, failure), terminated(core.Termination.TRANSPORT), False) == "other"
    assert relist_cause(error_frame, terminated(transient, "degraded"), True) == "degraded"
    assert relist_cause(core.StreamTick(), terminated(core.Termination.SILENCE), True) == "degraded"


def test_frame_types_and_the_servers_write_stamp_are_read_from_the_wire() -> None:
    obj = {"metadata": {"name": "a", "resourceVersion": "7"}}
    stamped = decode_line(json.dumps({"type": "ADDED", "object": obj, WATCH_WRITTEN_AT_FIELD: 1790000000.25}).encode())
    assert isinstance(stamped, WatchEvent) and stamped.written_at == 1790000000.25
    for junk in ("soon", True, None, [1.5]):  # NaN is no JSON at all: the frame is malformed (kube/test_decode.py)
        line = json.dumps({"type": "MODIFIED", "object": obj, WATCH_WRITTEN_AT_FIELD: junk}).encode()
        event = decode_line(line)
        assert isinstance(event, WatchEvent) and event.written_at is None and event.type == "MODIFIED"
    assert frame_type(stamped) == "ADDED"
    assert frame_type(Bookmark("9")) == "BOOKMARK"
    assert frame_type(ErrorFrame(ApiStatus(410, "Expired", ""))) == "ERROR"
    assert frame_type(FrameError("oversized", "", 9)) == "unusable"


@pytest.fixture
def quiet_cluster() -> Iterator[FakeCluster]:
    """No bookmarks: a frame comes only with a write, so the ages below move only with the clock."""
    with FakeCluster(namespace="jr2", bookmark_interval=None, operator=False, harness=False) as cluster:
        yield cluster


def test_events_state_and_ages_of_the_watch(quiet_cluster: FakeCluster) -> None:
    clock = VirtualClock()
    telemetry = Telemetry(clock=clock)
    inbox = Inbox()
    ref = WatchActor.start(quiet_cluster.client(), stall_bound=60.0, telemetry=telemetry, seed=1)
    ref.tell(Register(SandboxKey("run-0", "F-1"), inbox))
    wait_until(lambda: quiet_cluster.watch_stats()["open"] == 1)
    before = quiet_cluster.clock.wall()
    create(quiet_cluster, ["run-0", "run-1"])
    after = quiet_cluster.clock.wall()
    inbox.wait_for(lambda ms: any(isinstance(m, SandboxSeen) for m in ms))
    (seen,) = [m for m in inbox.snapshot() if isinstance(m, SandboxSeen)]
    assert seen.written_at is not None and before <= seen.written_at <= after  # the server's write time
    wait_until(lambda: value(text(telemetry), "jr2_watch_events_total", type="ADDED") == 2)
    clock.advance(7.0)
    now = samples(text(telemetry))
    assert value(now, "jr2_watch_phase", phase="watching") == 1
    assert value(now, "jr2_watch_phase", phase="listing") == 0
    assert value(now, "jr2_watch_up") == 1 and value(now, "jr2_watch_degraded") == 0
    assert value(now, "jr2_watch_waiters") == 1 and value(now, "jr2_watch_tracked_objects") == 2
    assert value(now, "jr2_watch_last_frame_age_seconds") == 7.0
    assert value(now, "jr2_watch_resource_version_age_seconds") == 7.0
    assert value(now, "jr2_watch_events_total", type="BOOKMARK") == 0
    assert value(now, "jr2_watch_reconnects_total") == 0
    ref.stop(block=True, timeout=10)


def test_relists_and_reconnects_are_counted_by_cause(cluster: FakeCluster) -> None:
    telemetry = Telemetry()
    ref = WatchActor.start(cluster.client(), stall_bound=1.0, seed=3, backoff=FAST, telemetry=telemetry)
    wait_until(lambda: cluster.watch_stats()["open"] == 1)
    wait_until(lambda: (value(text(telemetry), "jr2_watch_events_total", type="BOOKMARK") or 0) >= 1)

    cluster.stall_watches()  # the write below never reaches the watch: its version stays behind
    create(cluster, ["run-0"])
    cluster.compact()
    cluster.end_watches()  # the resume from behind meets a 410 in the stream: an expired re-list
    wait_until(lambda: value(text(telemetry), "jr2_watch_relists_total", cause="expired") == 1, what="expired")
    wait_until(lambda: cluster.watch_stats()["open"] == 1)

    cluster.stall_watches()  # nothing for the stall bound: a re-list for silence
    wait_until(lambda: (value(text(telemetry), "jr2_watch_relists_total", cause="silence") or 0) >= 1,
               what="silence")
    cluster.stall_watches(False)
    wait_until(lambda: value(text(telemetry), "jr2_watch_phase", phase="watching") == 1)
    final = samples(text(telemetry))
    assert value(final, "jr2_watch_events_total", type="ERROR") == 1  # the 410 frame
    assert (value(final, "jr2_watch_reconnects_total") or 0) >= 2
    assert value(final, "jr2_watch_relists_total", cause="error_frame") == 0
    ref.stop(block=True, timeout=10)


def test_delivery_latency_runs_from_the_servers_write_to_the_workspaces_receipt() -> None:
    server_clock = VirtualClock(wall=1_790_000_000.0)
    ours = VirtualClock(wall=1_790_000_000.3)  # the orchestrator reads its clock 0.3 s after the server wrote
    telemetry = Telemetry(clock=ours)
    with FakeCluster(namespace="jr2", clock=server_clock, bookmark_interval=None, operator=False,
                     harness=False) as cluster:
        client = cluster.client()
        watch = WatchActor.start(client, stall_bound=60.0, telemetry=telemetry)
        wait_until(lambda: cluster.watch_stats()["open"] == 1)  # the write below comes as a live, stamped event
        pools = [ThreadPoolExecutor(2), ThreadPoolExecutor(1)]
        timers = Timers(ours)
        try:
            spec = WorkspaceSpec(run_id="run-l", workflow="wf", definition=WorkspaceDef("F-1", cpu="1", memory="1Gi"),
                                 image="jr2-sandbox:dev")
            ref = WorkspaceActor.start(spec, client=client, watch=watch, parent=Inbox(),
                                       signing_key=cluster.signing_key, kube_pool=pools[0], attach_pool=pools[1],
                                       clock=ours, timers=timers, telemetry=telemetry)
            wait_until(lambda: (value(text(telemetry), "jr2_watch_delivery_latency_seconds_count") or 0) >= 1)
            got = samples(text(telemetry))
            count = value(got, "jr2_watch_delivery_latency_seconds_count")
            assert count is not None
            assert value(got, "jr2_watch_delivery_latency_seconds_sum") == pytest.approx(0.3 * count)
            assert value(got, "jr2_watch_delivery_latency_seconds_bucket", le="0.25") == 0
            assert value(got, "jr2_watch_delivery_latency_seconds_bucket", le="0.5") == count
            ref.stop(block=True, timeout=10)
        finally:
            watch.stop(block=True, timeout=10)
            for pool in pools:
                pool.shutdown(wait=True)
            timers.stop()
