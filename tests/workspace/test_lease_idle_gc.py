"""ADR-0064: the Lease covers the Sandbox's whole life, so the operator's idle GC reaps only what the
Orchestrator abandoned — here a Workspace waits in `placing` for two hours on a virtual clock and is
never reaped, then its Orchestrator goes away and the Sandbox is gone one idle timeout later."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.timefmt import parse_rfc3339
from jr2_actors.values.workflow import WorkspaceDef
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.identity import KEEPALIVE_ANNOTATION
from jr2_actors.workspace.actor import WorkspaceActor
from jr2_actors.workspace.manifest import WorkspaceSpec
from jr2_actors.workspace.messages import PlacedLine, PlacingLine
from tests.support.probes import Inbox
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow
T0 = 1_790_000_000.0


def test_a_waiting_workspace_is_never_reaped_and_an_abandoned_one_is() -> None:
    clock = VirtualClock(wall=T0)
    with FakeCluster(clock=clock, nodes=[Node("tiny", 100, 2**30)], harness=False) as cluster:
        client = cluster.client()
        watch = WatchActor.start(client, clock=clock, stall_bound=10**6)
        pool = ThreadPoolExecutor(2)
        inbox = Inbox()
        spec = WorkspaceSpec("run-gc", "wf", WorkspaceDef("F-1", cpu="1", memory="1Gi"), image="i",
                             idle_timeout="30m")
        ref = WorkspaceActor.start(spec, client=client, watch=watch, parent=inbox, signing_key=b"k" * 32,
                                   kube_pool=pool, attach_pool=pool, clock=clock, seed=2)
        inbox.wait_for(lambda ms: any(isinstance(m, PlacingLine) for m in ms), what="placing")

        def keepalive() -> float:
            obj = client.get(SANDBOX, spec.name)
            assert obj is not None, "the idle GC reaped a Sandbox whose Lease was live"
            stamp = parse_rfc3339(obj["metadata"]["annotations"][KEEPALIVE_ANNOTATION])
            assert stamp is not None
            return stamp

        for _ in range(48):  # two hours, 150 s at a time
            clock.advance(150)
            cluster.reconcile()
            # The Lease is never older than one renewal interval (5 min + 20 %) plus this step.
            wait_until(lambda: clock.wall() - keepalive() <= 360 + 150, what="the Lease renewed")
        assert client.get(SANDBOX, spec.name) is not None
        assert not [m for m in inbox.snapshot() if isinstance(m, PlacedLine)]

        ref.stop(block=True, timeout=10)  # the Orchestrator goes away: nobody renews the Lease
        last = keepalive()
        clock.advance(last + 29 * 60 - clock.wall())
        cluster.reconcile()
        assert client.get(SANDBOX, spec.name) is not None
        clock.advance(61)
        cluster.reconcile()
        wait_until(lambda: client.get(SANDBOX, spec.name) is None, what="reaped")
        watch.stop(block=True, timeout=10)
        pool.shutdown(wait=True)
