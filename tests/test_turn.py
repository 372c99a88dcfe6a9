"""TurnCore on plain data, and the AgentActor against the fake Harness: picks, limits, kills, loss, abort."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pykka
import pytest

from jr2_actors.agent import core as turn
from jr2_actors.agent.actor import AbortTurn, AgentActor, AnswerPick, KillsRead, StartTurn
from jr2_actors.clock import VirtualClock
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import GuardKill, Hang, KernelKill, Pick, ProviderLimit, Say
from tests.probes import Inbox
from tests.sandboxes import ready_sandbox

NAME = "ws-turn-f-1-abc123"


def ev(type_: str, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "conversationId": "c", "position": {"batch": 1, "index": 0}, **fields}


def test_a_disallowed_pick_is_answered_at_once_and_changes_nothing() -> None:
    core = turn.TurnCore(["finish"])
    core.step(turn.Admitted("s-1", "0"))
    step = core.step(turn.Events([ev("pick", callId="k1", pick="explode", args={})], "1"))
    assert step.actions[0] == turn.AnswerPick("k1", False, "explode is not allowed now. Allowed now: finish.")
    assert step.reports == () and core.state == "reading"


def test_failures_are_named_by_whose_limit() -> None:
    provider = turn.TurnCore([])
    provider.step(turn.Admitted("s-1", "0"))
    step = provider.step(turn.Events([ev("submission-settled", submissionId="s-1", outcome="failed",
                                         error={"type": "provider_limit", "message": "429 after 2 retries"})], "1"))
    assert step.reports == (turn.TurnFault("provider limit: 429 after 2 retries"),)
    guard = turn.TurnCore([])
    guard.step(turn.Admitted("s-1", "0"))
    step = guard.step(turn.Events([ev("memory-limit", id="k-1", peak="lots", limit="2Gi"),
                                   ev("submission-settled", submissionId="s-1", outcome="failed",
                                      error={"type": "memory_limit", "message": ""})], "2"))
    assert step.reports[0] == turn.GuardKill("k-1", None, "2Gi")  # an untrusted size is left out
    assert step.reports[1] == turn.TurnFault("memory limit (guard, over its limit)")


def test_another_submissions_settle_is_not_ours() -> None:
    core = turn.TurnCore([])
    core.step(turn.Admitted("s-2", "3"))
    step = core.step(turn.Events([ev("submission-settled", submissionId="s-1", outcome="completed")], "4"))
    assert step.reports == () and step.actions == (turn.ReadUpdates("4"),)


@pytest.fixture
def seat() -> Iterator[tuple[FakeCluster, pykka.ActorRef[Any], Inbox, str]]:
    clock = VirtualClock()
    with FakeCluster(clock=clock, start_seconds=1, long_poll=0.2) as cluster:
        endpoint = ready_sandbox(cluster, clock, NAME)
        inbox = Inbox()
        pool = ThreadPoolExecutor(2)
        ref = AgentActor.start("coder", parent=inbox, pool=pool)
        yield cluster, ref, inbox, endpoint
        ref.stop(block=True, timeout=10)
        pool.shutdown(wait=True)


def start(cluster: FakeCluster, ref: pykka.ActorRef[Any], endpoint: str, conv: str = "c-1") -> None:
    body = {"definition": {"agent": "coder", "instructions": "You fix bugs.", "access": "write",
                           "menu": ["finish"]}, "message": "Fix it.", "allowed": ["finish"], "notices": []}
    ref.tell(StartTurn(conv, body, endpoint, cluster.harness_token(NAME)))


def last(inbox: Inbox, kind: type) -> Any:
    inbox.wait_for(lambda ms: any(isinstance(m, kind) for m in ms), what=kind.__name__)
    return [m for m in inbox.snapshot() if isinstance(m, kind)][-1]


def test_a_turn_picks_and_the_run_answers(seat: tuple[FakeCluster, pykka.ActorRef[Any], Inbox, str]) -> None:
    cluster, ref, inbox, endpoint = seat
    cluster.script("coder", [Say("Fixed."), Pick("finish", {"summary": "green"})])
    start(cluster, ref, endpoint)
    kills = last(inbox, KillsRead)
    assert kills.read is not None and kills.read.kills == ()  # read before the admission
    picked = last(inbox, turn.Picked)
    assert (picked.pick, dict(picked.args)) == ("finish", {"summary": "green"})
    assert last(inbox, turn.Said).text == "Fixed."
    ref.tell(AnswerPick(picked.call_id, True, "done"))
    assert last(inbox, turn.TurnEnded) == turn.TurnEnded("completed", True)
    (answer,) = cluster.harness(lambda core: list(core.answers))
    assert (answer["callId"], answer["over"]) == (picked.call_id, True)


@pytest.mark.parametrize(
    ("script", "reason_starts"),
    [([ProviderLimit("429 after retries")], "provider limit: 429 after retries"),
     ([GuardKill("1.9Gi", "2Gi")], "memory limit (guard, peak 1.9Gi of 2Gi)"),
     ([KernelKill()], "the conversation was lost")],
)
def test_a_turn_faults_with_its_reason(seat: tuple[FakeCluster, pykka.ActorRef[Any], Inbox, str],
                                       script: list[Any], reason_starts: str) -> None:
    cluster, ref, inbox, endpoint = seat
    cluster.script("coder", script)
    start(cluster, ref, endpoint)
    assert last(inbox, turn.TurnFault).reason.startswith(reason_starts)


def test_a_hung_turn_is_aborted(seat: tuple[FakeCluster, pykka.ActorRef[Any], Inbox, str]) -> None:
    cluster, ref, inbox, endpoint = seat
    cluster.script("coder", [Hang()])
    start(cluster, ref, endpoint)
    last(inbox, KillsRead)
    ref.tell(AbortTurn())
    assert last(inbox, turn.TurnEnded) == turn.TurnEnded("aborted", False)


def test_the_kill_read_before_the_next_admission_sees_the_guard_kill(
        seat: tuple[FakeCluster, pykka.ActorRef[Any], Inbox, str]) -> None:
    cluster, ref, inbox, endpoint = seat
    cluster.script("coder", [GuardKill("1.9Gi", "2Gi")], [Say("ok")])
    start(cluster, ref, endpoint, "c-1")
    last(inbox, turn.TurnFault)
    start(cluster, ref, endpoint, "c-2")
    inbox.wait_for(lambda ms: len([m for m in ms if isinstance(m, KillsRead)]) == 2, what="second read")
    second = [m for m in inbox.snapshot() if isinstance(m, KillsRead)][1]
    assert second.read is not None
    (kill,) = second.read.kills
    assert (kill.peak, kill.limit, kill.told) == ("1.9Gi", "2Gi", ("c-1",))


def test_a_kill_read_that_cannot_tell_is_none_not_empty(
        seat: tuple[FakeCluster, pykka.ActorRef[Any], Inbox, str]) -> None:
    cluster, ref, inbox, endpoint = seat
    cluster.harness(lambda core: core.set_raw_memory_kills(NAME, b"not json"))
    start(cluster, ref, endpoint)
    kills = last(inbox, KillsRead)
    assert kills.read is None and "not JSON" in kills.problem
    last(inbox, turn.TurnEnded)
