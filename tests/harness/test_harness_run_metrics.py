"""The Harness's metrics (admissions and memory-kill reads by outcome, notices told by kind) and the runs'
(live runs by state — capped —, Workspaces by phase, open waits by `on` and the oldest of each)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from jr2_actors.agent import messages as turn
from jr2_actors.agent.actor import AgentActor
from jr2_actors.agent.jobs import outcome_of
from jr2_actors.agent.messages import Admit, KillsRead, StartTurn
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Say
from jr2_actors.harness.admission import Notice
from jr2_actors.harness.errors import ConversationNotKept, HarnessError, HarnessProtocolError, HarnessUnreachable
from jr2_actors.harness.memory_kills import MemoryKillListError
from jr2_actors.run.feed.hub import FeedHub, Published
from jr2_actors.run.feed.lines import AdmittedLine, FeedEvent, SaidLine
from jr2_actors.shell import Timers
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.workspace.messages import WaitEntry
from tests.support.admissions import NAME, admission
from tests.support.metrics_text import FakeRun, Record, samples, series, value
from tests.support.probes import Inbox
from tests.support.sandboxes import ready_sandbox

T0 = 1_790_000_000.0


def text(telemetry: Telemetry) -> str:
    return telemetry.exposition().decode()


def test_failed_harness_calls_are_labelled_by_kind_of_failure() -> None:
    assert outcome_of(MemoryKillListError("not a list")) == "malformed"
    assert outcome_of(HarnessUnreachable("refused", reached=False)) == "unreachable"
    assert outcome_of(HarnessProtocolError("not JSON")) == "protocol"
    assert outcome_of(HarnessError(503, "draining")) == "error"
    assert outcome_of(ConversationNotKept(404, "not kept")) == "error"  # the admission tells it apart first


@pytest.fixture
def seat() -> Iterator[tuple[FakeCluster, Any, Inbox, str, Telemetry]]:
    clock = VirtualClock()
    telemetry = Telemetry(clock=clock)
    with FakeCluster(clock=clock, start_seconds=1, long_poll=0.2) as cluster:
        endpoint = ready_sandbox(cluster, clock, NAME)
        inbox, pool, timers = Inbox(), ThreadPoolExecutor(2), Timers(clock)
        ref = AgentActor.start("coder", parent=inbox, pool=pool, clock=clock, timers=timers, telemetry=telemetry)
        yield cluster, ref, inbox, endpoint, telemetry
        ref.stop(block=True, timeout=10)
        timers.stop()
        pool.shutdown(wait=True)


def test_admissions_and_memory_kill_reads_are_counted_by_outcome(
        seat: tuple[FakeCluster, Any, Inbox, str, Telemetry]) -> None:
    cluster, ref, inbox, endpoint, telemetry = seat
    cluster.script("coder", [Say("ok")])
    ref.tell(StartTurn(1, "c-1", endpoint, cluster.harness_token(NAME)))
    inbox.wait_for(lambda ms: any(isinstance(m, KillsRead) for m in ms))
    ref.tell(Admit(1, admission(kept=True)))  # a conversation the Harness was never asked to keep
    inbox.wait_for(lambda ms: any(isinstance(m, turn.NotKept) for m in ms))
    ref.tell(Admit(1, admission()))
    inbox.wait_for(lambda ms: any(isinstance(m, turn.Settled) for m in ms))
    got = samples(text(telemetry))
    assert value(got, "jr2_harness_memory_kill_reads_total", outcome="read") == 1
    assert value(got, "jr2_harness_memory_kill_reads_total", outcome="unreachable") == 0
    assert value(got, "jr2_harness_admissions_total", outcome="admitted") == 1
    assert value(got, "jr2_harness_admissions_total", outcome="not_kept") == 1
    assert value(got, "jr2_harness_admissions_total", outcome="error") == 0


def test_notices_told_in_admissions_are_counted_by_kind_on_the_way_to_the_hub() -> None:
    telemetry = Telemetry()
    hub = FeedHub()
    tap = telemetry.runs.feed_tap(hub)
    notices = (Notice("memory-limit", {"scope": "workspace"}), Notice("conversation-new"), Notice("x-new"))
    message = Published("r-1", (FeedEvent(1, T0, SaidLine("coder", 1, "hi")),
                                FeedEvent(2, T0, AdmittedLine("coder", 1, False, False, notices)),
                                FeedEvent(3, T0, AdmittedLine("reviewer", 2, False, False))))
    tap.tell(message)
    tap.tell(message)  # a step's lines told twice (its persist timed out, landed late and was saved again)
    assert hub.read("r-1", 0, 0).events == list(message.events)  # handed on, each line once
    got = samples(text(telemetry))
    assert value(got, "jr2_harness_notices_total", kind="memory-limit") == 1
    assert value(got, "jr2_harness_notices_total", kind="conversation-new") == 1
    assert value(got, "jr2_harness_notices_total", kind="other") == 1
    assert value(got, "jr2_harness_notices_total", kind="pick-answer") == 0


def test_live_runs_workspaces_by_phase_and_open_waits() -> None:
    clock = VirtualClock(wall=T0)
    telemetry = Telemetry(clock=clock)
    runs = telemetry.runs
    runs.update(FakeRun("r-1", "code", {"F-1": Record("running")}).view())
    runs.update(FakeRun("r-2", "code", {"F-1": Record("placing"), "F-2": Record("running", releasing=True)},
                        [("F-1", WaitEntry("node", "0/1 nodes are available", T0 - 30))]).view())
    runs.update(FakeRun("r-3", "review", {"F-1": Record("placing")},
                        [("F-1", WaitEntry("node", "0/1 nodes are available", T0 - 5))]).view())
    runs.update(FakeRun("r-4", "review", {"F-1": Record("placing")},
                        [("F-1", WaitEntry("quota", "exceeded quota", T0 - 2))]).view())
    clock.advance(10.0)
    got = samples(text(telemetry))
    assert value(got, "jr2_runs_live") == 4
    assert value(got, "jr2_workspaces", phase="placing") == 3
    assert value(got, "jr2_workspaces", phase="running") == 1
    assert value(got, "jr2_workspaces", phase="releasing") == 1
    assert value(got, "jr2_run_waits_open", on="node", reason="other") == 2 \
        and value(got, "jr2_run_waits_open", on="quota", reason="quota") == 1
    assert value(got, "jr2_run_wait_oldest_seconds", on="node") == 40.0
    assert value(got, "jr2_run_wait_oldest_seconds", on="quota") == 12.0

    runs.update(FakeRun("r-2", "review").view())  # a run moves on: its wait is over
    runs.forget("r-1")  # a run ends
    after = samples(text(telemetry))
    assert value(after, "jr2_runs_live") == 3
    assert value(after, "jr2_run_waits_open", on="node", reason="other") == 1
    assert value(after, "jr2_run_wait_oldest_seconds", on="node") == 15.0


def test_run_labels_stay_bounded_with_a_thousand_runs_and_their_workspaces() -> None:
    def exposition(count: int) -> str:
        telemetry = Telemetry(clock=VirtualClock(wall=T0))
        for i in range(count):  # every run in its own state: the workflows' words, not ours
            telemetry.runs.update(FakeRun(f"r-{i}", f"state-{i}", {f"ws-{i}": Record("placing")},
                                          [(f"ws-{i}", WaitEntry("node", "full", T0 - i))]).view())
        return text(telemetry)

    few, many = exposition(1), exposition(1000)
    assert series(many) == series(few)
    assert value(many, "jr2_runs_live") == 1000
    assert "state-" not in many  # the workflows' state names are no label
    assert value(many, "jr2_workspaces", phase="placing") == 1000
    assert not any(f'"ws-{i}"' in many or f'"r-{i}"' in many for i in range(1000))
