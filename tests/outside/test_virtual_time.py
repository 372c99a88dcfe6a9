"""An outside suite: only what README.md and docs/fake-cluster.md show (the fixtures, their markers, the
fake's levers, the virtual clock). A two-hour placing wait and a day of Lease renewals, on virtual time."""

import itertools
from collections.abc import Callable

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.workflow import read_document

ONE_STATE = """
name: {name}
workspaces:
  W:
    size: {{cpu: "1", memory: "2Gi"}}
    image: jr2-sandbox:dev
    repos: [{{slot: app, url: "https://example.test/app.git", ref: main}}]
    branch: feat/x
agents:
  coder: {{instructions: "You fix bugs.", workspace: W, access: write}}
start: code
states:
  code:
    holds: [W]
    turn: {{agent: coder, prompt: "Fix it."}}
    on: {{finish: done}}
    after: {{seconds: {after}, to: late}}
  done: {{final: done}}
  late: {{final: failed}}
"""


def status(orchestrator: Orchestrator, run_id: str) -> object:
    return (orchestrator.status(run_id) or {}).get("status")


def finished(orchestrator: Orchestrator, run_id: str) -> Callable[[], bool]:
    return lambda: status(orchestrator, run_id) in ("done", "failed", "cancelled")


@pytest.mark.jr2_fake_cluster(time="virtual")
@pytest.mark.jr2_agents(pick_first=True)
def test_a_run_waits_two_hours_for_a_place_then_finishes(
        jr2_orchestrator: Orchestrator, jr2_fake_cluster: FakeCluster) -> None:
    clock = jr2_fake_cluster.clock
    assert isinstance(clock, VirtualClock)
    jr2_fake_cluster.faults.unschedulable(seconds=2 * 3600)  # no node takes a Sandbox for two hours
    began = clock.monotonic()
    run_id = jr2_orchestrator.submit(read_document(ONE_STATE.format(name="placing", after=3 * 3600)))
    clock.advance(3600)
    assert status(jr2_orchestrator, run_id) == "running"  # an hour in: still placing
    clock.run_until(finished(jr2_orchestrator, run_id))
    assert status(jr2_orchestrator, run_id) == "done"
    assert clock.monotonic() - began >= 2 * 3600  # it could only finish once the two hours were over


@pytest.mark.slow  # this repository's marker for a test of a second: a virtual day is ~315 jumps and ~310 leaps
@pytest.mark.jr2_fake_cluster(time="virtual")
@pytest.mark.jr2_agents(coder=[[Hang()]])  # the Turn never ends: only the state's `after` moves the run on
def test_a_day_of_lease_renewals_at_five_minutes_give_or_take_a_fifth(
        jr2_orchestrator: Orchestrator, jr2_fake_cluster: FakeCluster) -> None:
    clock = jr2_fake_cluster.clock
    assert isinstance(clock, VirtualClock)
    day = 24 * 3600
    run_id = jr2_orchestrator.submit(read_document(ONE_STATE.format(name="a-day", after=day)))
    jr2_fake_cluster.requests(clear=True)
    clock.run_until(finished(jr2_orchestrator, run_id), within=2 * day)  # past the default day ahead
    assert status(jr2_orchestrator, run_id) == "failed"  # the day's `after`, not a fault
    renewals = [r["at"] for r in jr2_fake_cluster.requests()
                if r["method"] == "PATCH" and "/sandboxes/" in r["path"] and "merge-patch" in r["contentType"]]
    gaps = [b - a for a, b in itertools.pairwise(renewals)]
    assert day / 360 <= len(renewals) <= day / 240 + 1
    assert gaps and min(gaps) >= 240 - 1 and max(gaps) <= 360 + 1


@pytest.mark.jr2_fake_cluster(time="virtual")
def test_a_wait_for_what_never_comes_fails_at_once_saying_what_each_actor_waits_for(
        jr2_fake_cluster: FakeCluster) -> None:
    clock = jr2_fake_cluster.clock
    assert isinstance(clock, VirtualClock)
    with pytest.raises(AssertionError, match="nothing is under way") as stalled:
        clock.run_until(lambda: False)
    assert "ApiServerActor" in str(stalled.value)
