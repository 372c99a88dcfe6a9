"""WorkspaceCore on numbers for time: placing with its reason, provisioning's budget, loss, the Lease, release."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from jr2_actors.watch.sandbox import view
from jr2_actors.workspace.core import (
    TRANSITIONS,
    ApplySandbox,
    Attach,
    Attached,
    AttachFailed,
    Begin,
    DeleteSandbox,
    Faulted,
    FeedLine,
    HarnessEnded,
    Lost,
    Observed,
    Release,
    RenewLease,
    RestoredWait,
    Running,
    Tick,
    Unknown,
    Vanished,
    Waiting,
    WatchUnknown,
    WorkspaceCore,
)
from tests.sandboxes import fixture

WALL0 = 1_790_000_000.0


def status(phase: str = "Pending", scheduled: tuple[str, str, str] | None = None, ready: bool = False,
           waiting: str = "", restarts: int = 0, last: dict[str, Any] | None = None,
           lost: tuple[str, str] | None = None) -> Observed:
    conditions = []
    if scheduled:
        conditions.append({"type": "Scheduled", "status": scheduled[0], "reason": scheduled[1],
                           "message": scheduled[2]})
    conditions.append({"type": "Ready", "status": "True" if ready else "False", "reason": "PodReady" if ready else "x",
                       "message": ""})
    if lost:
        conditions.append({"type": "Lost", "status": "True", "reason": lost[0], "message": lost[1]})
    st: dict[str, Any] = {"phase": phase, "conditions": conditions, "harness": {"restartCount": restarts}}
    if last:
        st["harness"]["lastTerminated"] = last
    if waiting:
        st["waiting"] = [{"container": "harness", "reason": waiting, "message": "back-off"}]
    return Observed(view({"metadata": {"name": "ws"}, "status": st}))


UNSCHEDULABLE = status(scheduled=("False", "Unschedulable", "0/3 nodes are available: 3 Insufficient memory."))
QUOTA = status(scheduled=("False", "QuotaExceeded", 'pods "ws" is forbidden: exceeded quota: jr2'))
SCHEDULED = status(scheduled=("True", "Scheduled", ""))
READY = status("Ready", scheduled=("True", "Scheduled", ""), ready=True)


class Drive:
    def __init__(self, **kw: Any) -> None:
        self.core = WorkspaceCore("F-1", rng=random.Random(5), **kw)
        self.now = 0.0
        self.out: list[Any] = []

    def __call__(self, event: Any, at: float | None = None) -> Any:
        if at is not None:
            self.now = at
        step = self.core.step(event, self.now, WALL0 + self.now)
        self.out.extend(step.actions)
        self.out.extend(step.reports)
        return step

    def of(self, kind: type) -> list[Any]:
        return [x for x in self.out if isinstance(x, kind)]


def test_begin_applies_and_the_first_renewal_falls_in_the_first_fifth() -> None:
    d = Drive()
    step = d(Begin())
    assert step.actions == (ApplySandbox(),)
    assert step.deadline is not None and 0 <= step.deadline <= 60
    d(Tick(), at=step.deadline)
    assert d.of(RenewLease) == [RenewLease()]


def test_the_lease_is_renewed_in_every_state_every_five_minutes_plus_or_minus_a_fifth() -> None:
    d = Drive()
    d(Begin())
    renewals: list[float] = []
    for event_at, event in ((100.0, UNSCHEDULABLE), (900.0, SCHEDULED), (1000.0, READY), (1100.0, Attached({}))):
        while (deadline := d.core.deadline) is not None and deadline < event_at:
            before = len(d.of(RenewLease))
            d(Tick(), at=deadline)
            if len(d.of(RenewLease)) > before:
                renewals.append(deadline)
        d(event, at=event_at)
    gaps = [b - a for a, b in itertools.pairwise(renewals)]
    assert len(renewals) >= 3
    assert all(240 <= g <= 360 for g in gaps), gaps


def test_a_wait_for_a_node_is_visible_with_one_feed_line_and_its_end_another() -> None:
    d = Drive()
    d(Begin())
    d(UNSCHEDULABLE, at=10.0)
    d(UNSCHEDULABLE, at=20.0)  # the same reason again: nothing new
    d(QUOTA, at=30.0)  # a changed reason updates `waiting`, adds no feed line
    d(SCHEDULED, at=202.0)
    lines = d.of(FeedLine)
    assert [line.kind for line in lines] == ["placing", "placed"]
    assert lines[0].fields == {"child": "F-1", "on": "node", "since": WALL0 + 10,
                               "message": "0/3 nodes are available: 3 Insufficient memory."}
    assert lines[1].fields == {"child": "F-1", "since": WALL0 + 10, "after_ms": 192_000}
    entries = [w.entry for w in d.of(Waiting)]
    assert entries[0] is not None and entries[0]["on"] == "node"
    assert entries[1] is not None and entries[1]["on"] == "quota" and entries[1]["since"] == WALL0 + 10
    assert entries[2] is None
    assert d.core.state == "provisioning"


def test_placing_has_no_deadline() -> None:
    d = Drive(lease_interval=10**9)
    d(Begin())
    d(UNSCHEDULABLE, at=5)
    d(Tick(), at=10**7)
    assert d.core.state == "placing"
    assert not d.of(Faulted)


def test_a_wait_from_before_a_restart_is_timed_on_the_wall_clock_clamped_at_zero() -> None:
    d = Drive()
    d(Begin(RestoredWait("node", "0/3 nodes", since_wall=WALL0 - 60)))
    d(SCHEDULED, at=0.0)
    (placed,) = d.of(FeedLine)
    assert placed.fields["after_ms"] == 60_000
    future = Drive()
    future(Begin(RestoredWait("quota", "q", since_wall=WALL0 + 3600)))  # a clock that went back
    future(SCHEDULED, at=0.0)
    assert future.of(FeedLine)[0].fields["after_ms"] == 0


def test_provisioning_budget_runs_from_scheduling_not_from_the_write() -> None:
    d = Drive(lease_interval=10**9)
    d(Begin())
    d(UNSCHEDULABLE, at=1)
    d(SCHEDULED, at=500)
    d(Tick(), at=619)
    assert d.core.state == "provisioning"
    d(Tick(), at=620)
    (fault,) = d.of(Faulted)
    assert "not Ready 120s after it was scheduled" in fault.reason


@pytest.mark.parametrize("name", ["sandbox-crashloop.json", "sandbox-root-image.json"])
def test_a_failing_harness_faults_at_once_with_its_own_last_words(name: str) -> None:
    d = Drive()
    d(Begin())
    d(Observed(view(fixture(name))), at=5)
    (fault,) = d.of(Faulted)
    recorded = view(fixture(name))
    words = recorded.last_terminated.message if recorded.last_terminated else recorded.waiting[0].message
    assert fault.reason == f"{recorded.waiting[0].reason}: {words}"
    assert d.core.state == "faulted"


def test_ready_attaches_then_runs() -> None:
    d = Drive()
    d(Begin())
    d(SCHEDULED, at=1)
    step = d(READY, at=2)
    assert step.actions == (Attach(),)
    d(Attached({"app": "/work/app/feat"}), at=3)
    assert d.of(Running) == [Running("F-1", {"app": "/work/app/feat"})]


def test_attach_refused_faults() -> None:
    d = Drive()
    d(Begin())
    d(READY, at=1)
    d(AttachFailed("403 repo key refused"), at=2)
    assert d.of(Faulted)[0].reason == "attach: 403 repo key refused"


def test_lost_carries_the_operators_reason() -> None:
    d = Drive()
    d(Begin())
    d(READY, at=1)
    d(Attached({}), at=2)
    d(Observed(view(fixture("sandbox-lost-evicted.json"))), at=3)
    assert d.of(Lost) == [Lost("F-1", "Evicted: The node was low on resource: memory.")]


def test_a_gone_sandbox_is_lost_and_a_dropped_watch_is_not() -> None:
    d = Drive()
    d(Begin())
    d(WatchUnknown("the Sandbox watch stopped"), at=1)
    assert d.core.state == "placing" and d.of(Unknown)
    d(Vanished(), at=2)
    assert d.of(Lost) == [Lost("F-1", "the Sandbox was deleted")]


def test_a_kernel_kill_while_running_names_the_memory_limit() -> None:
    d = Drive(memory_limit="1920Mi")
    d(Begin())
    d(READY, at=1)
    d(Attached({}), at=2)
    d(status("Ready", scheduled=("True", "Scheduled", ""), ready=True, restarts=1,
             last={"reason": "OOMKilled", "exitCode": 137, "message": "Killed"}), at=3)
    (ended,) = d.of(HarnessEnded)
    assert ended.memory_fault == "memory limit (OOMKilled, limit 1920Mi): Killed"
    d(status("Ready", scheduled=("True", "Scheduled", ""), ready=True, restarts=1,
             last={"reason": "OOMKilled", "exitCode": 137, "message": "Killed"}), at=4)
    assert len(d.of(HarnessEnded)) == 1  # one restart, one report


@pytest.mark.parametrize(
    ("path", "why", "deleted"),
    [
        ("placing", "run-stopped", True),    # never ran: deleted at once
        ("placing", "run-faulted", True),
        ("placing", "teardown", True),
        ("running", "teardown", True),        # a state no longer holds it
        ("running", "run-stopped", False),    # it ran: kept for inspection, the idle GC ages it out
        ("faulted-after-placement", "teardown", False),
        ("faulted-before-placement", "run-faulted", True),
    ],
)
def test_release_deletes_what_never_ran_and_keeps_what_ran(path: str, why: str, deleted: bool) -> None:
    d = Drive()
    d(Begin())
    if path == "placing":
        d(UNSCHEDULABLE, at=1)
    elif path == "running":
        d(READY, at=1)
        d(Attached({}), at=2)
    elif path == "faulted-after-placement":
        d(SCHEDULED, at=1)
        d(Observed(view(fixture("sandbox-crashloop.json"))), at=2)
    elif path == "faulted-before-placement":
        d.core._fault("apply refused", [])
    d(Release(why), at=10)  # type: ignore[arg-type]
    assert (DeleteSandbox() in d.out) is deleted
    assert d.core.state == "released"
    assert d.core.deadline is None  # the Lease ends with the teardown


def test_the_transition_table_names_every_live_state() -> None:
    states = {s for s, _ in TRANSITIONS}
    assert {"new", "placing", "provisioning", "attaching", "running"} <= states


def test_the_architecture_doc_carries_the_transition_table_as_the_code_has_it() -> None:
    from pathlib import Path

    from jr2_actors.workspace.core import transitions_markdown

    doc = (Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    assert transitions_markdown() in doc


def test_the_attach_branch_is_the_workflows_else_the_runs_own() -> None:
    from jr2_actors.workflow import WorkspaceDef
    from jr2_actors.workspace.manifest import WorkspaceSpec, attach_branch

    named = WorkspaceSpec("run/1", "wf", WorkspaceDef("F-1", cpu="1", memory="1Gi", branch="feat/x"), image="i")
    unnamed = WorkspaceSpec("run/1", "wf", WorkspaceDef("F-1", cpu="1", memory="1Gi"), image="i")
    assert attach_branch(named) == "feat/x"
    assert attach_branch(unnamed) == "jr2/run-1"
