"""The AgentActor against the fake Harness: the read before the admission, Turns, aborts, ends, answers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pykka
import pytest

from jr2_actors.agent import messages as turn
from jr2_actors.agent.actor import AgentActor
from jr2_actors.agent.messages import (
    AbortTurn,
    AdmissionUnsure,
    Admit,
    AnswerPick,
    CheckHarness,
    EndTurn,
    HarnessJudged,
    KillsRead,
    ReadKills,
    StartTurn,
    TurnAborted,
)
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import GuardKill, Hang, KernelKill, Pick, ProviderLimit, Say
from jr2_actors.harness.admission import Admission
from jr2_actors.harness.client import HarnessClient, HarnessClients
from jr2_actors.harness.errors import HarnessError, HarnessUnreachable
from jr2_actors.harness.memory_kills import MemoryKillRead
from jr2_actors.harness.tokens import INSTANCE_HARNESS
from jr2_actors.shell import Timers
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.constants import PREVIOUS_SETTLE_SECONDS
from tests.support.admissions import NAME, admission, body
from tests.support.probes import Inbox
from tests.support.sandboxes import ready_sandbox
from tests.support.waiting import wait_until


@dataclass
class Seat:
    cluster: FakeCluster
    clock: VirtualClock
    timers: Timers
    ref: pykka.ActorRef[Any]
    inbox: Inbox
    endpoint: str

    def start(self, turn_id: int, conv: str, *, in_workspace: bool = True, endpoint: str = "",
              token: str = "") -> None:
        self.ref.tell(StartTurn(turn_id, conv, endpoint or self.endpoint, token or self.cluster.harness_token(NAME),
                                in_workspace))

    def admit(self, turn_id: int, **extra: Any) -> None:
        self.ref.tell(Admit(turn_id, admission(**extra)))

    def first(self, kind: type, turn_id: int) -> Any:
        def mine(m: Any) -> bool:
            return isinstance(m, kind) and getattr(m, "turn_id", None) == turn_id

        self.inbox.wait_for(lambda ms: any(mine(m) for m in ms), what=f"{kind.__name__} of {turn_id}")
        return next(m for m in self.inbox.snapshot() if mine(m))

    def of(self, turn_id: int) -> list[Any]:
        return [m for m in self.inbox.snapshot() if getattr(m, "turn_id", None) == turn_id]

    def advance_until(self, done: Callable[[], bool], what: str, step: float = 0.25) -> None:
        """Move the seat's clock a step at a time until `done`: a wait on the clock ends only once it is
        armed, and the test cannot see when that is."""
        def moved() -> bool:
            if done():
                return True
            self.clock.advance(step)
            self.timers.poke()
            return False

        wait_until(moved, what=what)


@pytest.fixture
def make_seat() -> Iterator[Callable[..., Seat]]:
    pools: list[ThreadPoolExecutor] = []
    refs: list[pykka.ActorRef[Any]] = []
    clusters: list[FakeCluster] = []
    timers: list[Timers] = []
    given: list[HarnessClients] = []  # a seat closes only the registry it made itself

    def make(harnesses: HarnessClients | None = None, harness_mode: str = "lenient") -> Seat:
        if harnesses is not None:
            given.append(harnesses)
        clock = VirtualClock()
        cluster = FakeCluster(clock=clock, start_seconds=1, long_poll=0.2, harness_mode=harness_mode).__enter__()
        clusters.append(cluster)
        endpoint = ready_sandbox(cluster, clock, NAME)
        inbox = Inbox()
        pool = ThreadPoolExecutor(2)
        pools.append(pool)
        timer = Timers(clock)
        timers.append(timer)
        ref = AgentActor.start("coder", parent=inbox, pool=pool, clock=clock, timers=timer, harnesses=harnesses)
        refs.append(ref)
        return Seat(cluster, clock, timer, ref, inbox, endpoint)

    yield make
    for ref in refs:
        ref.stop(block=True, timeout=10)
    for harnesses in given:
        harnesses.close()
    for timer in timers:
        timer.stop()
    for pool in pools:
        pool.shutdown(wait=True)
    for cluster in clusters:
        cluster.__exit__(None, None, None)


@pytest.fixture
def seat(make_seat: Callable[..., Seat]) -> Seat:
    return make_seat()


def test_the_admission_waits_for_its_read_and_carries_what_the_run_made_of_it(seat: Seat) -> None:
    seat.cluster.script("coder", [GuardKill("1.9Gi", "2Gi"), Say("freed")], [Say("ok")])
    seat.start(1, "c-1")
    first = seat.first(KillsRead, 1)
    assert first.read is not None and first.read.kills == () and first.source == seat.endpoint
    assert seat.cluster.admissions() == []  # read; nothing admitted until the run says Admit
    seat.admit(1)
    assert seat.first(turn.Settled, 1) == turn.Settled("coder", 1, "completed", False)
    guard = seat.first(turn.GuardKill, 1)
    assert (guard.conversation_id, guard.peak, guard.limit) == ("c-1", "1.9Gi", "2Gi")
    assert not any(isinstance(m, turn.TurnFault) for m in seat.of(1))  # a guard kill is a notice

    seat.start(2, "c-2")
    second = seat.first(KillsRead, 2)
    assert second.read is not None
    (kill,) = second.read.kills
    assert (kill.id, kill.agent, kill.told) == (guard.kill_id, "coder", ("c-1",))
    assert len(seat.cluster.admissions()) == 1  # the second Turn's read came before its admission
    notice = {"kind": "memory-limit", "scope": "workspace", "agent": kill.agent, "peak": kill.peak,
              "limit": kill.limit}
    seat.admit(2, notices=[notice])
    seat.first(turn.Settled, 2)
    assert seat.cluster.admissions()[1]["body"]["notices"] == [notice]


def test_a_turn_picks_and_the_run_answers(seat: Seat) -> None:
    seat.cluster.script("coder", [Say("Fixed."), Pick("finish", {"summary": "green"})])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    picked = seat.first(turn.Picked, 1)
    assert (picked.pick, dict(picked.args)) == ("finish", {"summary": "green"})
    assert seat.first(turn.Said, 1).text == "Fixed."
    seat.ref.tell(AnswerPick(1, picked.call_id, True, "done"))
    assert seat.first(turn.Settled, 1) == turn.Settled("coder", 1, "completed", True)
    (answer,) = seat.cluster.harness_read(lambda core: list(core.answers))
    assert (answer["callId"], answer["over"], answer["answer"]) == (picked.call_id, True, "done")


@pytest.mark.parametrize(
    ("script", "cause", "reason_starts"),
    [([ProviderLimit("429 after retries")], "settled", "provider limit: 429 after retries"),
     ([GuardKill("1.9Gi", "2Gi"), ProviderLimit("429 again")], "settled", "provider limit: 429 again"),
     ([KernelKill()], "lost", "the conversation was lost")],
)
def test_a_turn_faults_with_its_cause_and_its_own_words(seat: Seat, script: list[Any], cause: str,
                                                         reason_starts: str) -> None:
    seat.cluster.script("coder", script)
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    fault = seat.first(turn.TurnFault, 1)
    assert fault.cause == cause and fault.reason.startswith(reason_starts)


def test_the_run_ends_a_turn_with_its_own_fault(seat: Seat) -> None:
    seat.cluster.script("coder", [Hang()])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    wait_until(lambda: len(seat.cluster.admissions()) == 1, what="the admission")
    seat.ref.tell(EndTurn(1, "memory limit (OOMKilled, limit 2Gi): Killed"))
    fault = seat.first(turn.TurnFault, 1)
    assert (fault.cause, fault.reason) == ("ended", "memory limit (OOMKilled, limit 2Gi): Killed")


def test_an_abort_stops_the_reader_first_and_the_turns_later_words_are_dropped(seat: Seat) -> None:
    seat.cluster.script("coder", [Hang()], [Say("next")])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    wait_until(lambda: len(seat.cluster.admissions()) == 1, what="the admission")
    seat.ref.tell(AbortTurn(1))
    assert seat.first(TurnAborted, 1) == TurnAborted("coder", 1, True)
    # The Harness settled the Submission `aborted` on its stream; the seat stopped reading before that.
    seat.start(2, "c-2")
    seat.first(KillsRead, 2)
    seat.admit(2)
    seat.first(turn.Settled, 2)
    # (whether the admission's acceptance was reported before the abort depends on which came first)
    assert [type(m) for m in seat.of(1) if not isinstance(m, turn.Accepted)] == [KillsRead, TurnAborted]


def test_an_abort_while_the_admission_waits_is_posted_once_it_is_admitted(seat: Seat) -> None:
    seat.cluster.script("coder", [Pick("finish")])
    seat.cluster.harness(lambda core: core.set_draining(NAME, True))
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    wait_until(lambda: len(seat.cluster.admissions()) == 1, what="the first try")
    seat.ref.tell(AbortTurn(1))
    seat.cluster.harness(lambda core: core.set_draining(NAME, False))
    seat.advance_until(lambda: any(isinstance(m, TurnAborted) for m in seat.of(1)), "the admission again")
    assert seat.first(TurnAborted, 1) == TurnAborted("coder", 1, True)
    assert len(seat.cluster.admissions()) == 2
    stream = HarnessClient(seat.endpoint, seat.cluster.harness_token(NAME))
    events = stream.updates(f"{seat.endpoint}/streams/coder/c-1", "0").events
    stream.close()
    assert events[-1]["type"] == "submission-settled" and events[-1]["outcome"] == "aborted"
    # The pick was never reported (the acceptance may have been, before the abort reached the seat).
    assert [type(m) for m in seat.of(1) if not isinstance(m, turn.Accepted)] == [KillsRead, TurnAborted]


def test_a_draining_harness_gets_the_admission_again(seat: Seat) -> None:
    seat.cluster.harness(lambda core: core.set_draining(NAME, True))
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    seat.advance_until(lambda: len(seat.cluster.admissions()) == 2, "the second try")
    seat.cluster.harness(lambda core: core.set_draining(NAME, False))
    seat.advance_until(lambda: any(isinstance(m, turn.Settled) for m in seat.of(1)), "the admission")
    assert seat.first(turn.Settled, 1).outcome == "completed"
    assert len(seat.cluster.admissions()) == 3
    assert seat.clock.monotonic() < 30  # within the admission's 30 s


def test_a_kept_admission_the_harness_does_not_hold_is_not_kept_and_the_turn_goes_on(seat: Seat) -> None:
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1, kept=True)
    refused = seat.first(turn.NotKept, 1)
    assert (refused.conversation_id, "not held" in refused.message) == ("c-1", True)
    assert not any(isinstance(m, turn.TurnFault) for m in seat.of(1))
    seat.admit(1, notices=[{"kind": "conversation-new", "reason": "not-kept"}])
    assert seat.first(turn.Settled, 1).outcome == "completed"


def test_a_late_answer_never_reaches_a_new_turn(seat: Seat) -> None:
    seat.cluster.script("coder", [Pick("finish")], [Pick("finish")])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    old = seat.first(turn.Picked, 1)
    seat.ref.tell(AbortTurn(1))
    seat.first(TurnAborted, 1)
    seat.start(2, "c-2")
    seat.first(KillsRead, 2)
    seat.admit(2)
    new = seat.first(turn.Picked, 2)
    seat.ref.tell(AnswerPick(1, old.call_id, True, "late"))  # a Turn the seat has left
    seat.ref.tell(AnswerPick(2, old.call_id, True, "wrong call"))  # not a pick of this Turn
    seat.ref.tell(AnswerPick(2, new.call_id, True, "done"))
    seat.first(turn.Settled, 2)
    answers = seat.cluster.harness_read(lambda core: list(core.answers))
    assert [(a["conversationId"], a["answer"]) for a in answers] == [("c-2", "done")]


class _Stubbed(HarnessClients):
    """Hands every seat a client built by `make`, as a run's shared registry would hand its own."""

    def __init__(self, make: Callable[[str, str], HarnessClient]) -> None:
        super().__init__()
        self.make = make
        self.made: list[HarnessClient] = []

    def get(self, endpoint: str, token: str) -> HarnessClient:
        client = self.make(endpoint, token)
        self.made.append(client)
        return client

    def close(self) -> None:
        super().close()
        for client in self.made:
            client.close()  # its own timer thread ends with it


def test_a_failed_pick_answer_reaches_the_run(make_seat: Callable[..., Seat]) -> None:
    class Unanswering(HarnessClient):
        def answer(self, agent: str, conversation_id: str, call_id: str, over: bool, answer: Any) -> None:
            raise HarnessUnreachable("POST answers: connection reset", reached=True)

    seat = make_seat(_Stubbed(lambda url, token: Unanswering(url, token)))
    seat.cluster.script("coder", [Pick("finish")])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    picked = seat.first(turn.Picked, 1)
    seat.ref.tell(AnswerPick(1, picked.call_id, True, "done"))
    failed = seat.first(turn.AnswerFailed, 1)
    assert (failed.call_id, failed.problem) == (picked.call_id, "POST answers: connection reset")


def test_an_unexpected_error_in_a_job_reaches_the_run(make_seat: Callable[..., Seat]) -> None:
    class Broken(HarnessClient):
        def memory_kills(self) -> MemoryKillRead:
            raise RuntimeError("boom")

        def admit(self, agent: str, conversation_id: str, admission: Admission, **_: Any) -> Any:
            raise KeyError("streamUrl")

    seat = make_seat(_Stubbed(lambda url, token: Broken(url, token)))
    seat.start(1, "c-1")
    kills = seat.first(KillsRead, 1)
    assert kills.read is None and "RuntimeError: boom" in kills.problem
    seat.admit(1)
    fault = seat.first(turn.TurnFault, 1)
    assert fault.cause == "refused" and "KeyError" in fault.reason


def test_a_kill_read_that_cannot_tell_is_none_and_the_seat_logs_nothing(seat: Seat,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    seat.cluster.harness(lambda core: core.set_raw_memory_kills(NAME, b"not json"))
    with caplog.at_level(logging.INFO, logger="jr2_actors.agent"):
        seat.start(1, "c-1")
        kills = seat.first(KillsRead, 1)
    assert kills.read is None and "not JSON" in kills.problem and kills.asked
    assert kills.source == seat.endpoint  # the run logs one line per Harness
    assert [r for r in caplog.records if r.name.startswith("jr2_actors.agent")] == []
    seat.admit(1)
    seat.first(turn.Settled, 1)


def test_a_menu_only_seat_reads_no_list(seat: Seat) -> None:
    seat.start(1, "c-1", in_workspace=False, endpoint=seat.cluster.instance_harness_url,
               token=seat.cluster.harness_token(INSTANCE_HARNESS))
    kills = seat.first(KillsRead, 1)
    assert (kills.read, kills.asked) == (None, False)
    seat.admit(1)
    assert seat.first(turn.Settled, 1).outcome == "completed"


def test_a_stopped_seat_leaves_no_thread_behind(seat: Seat) -> None:
    seat.cluster.script("coder", [Hang()])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    wait_until(lambda: len(seat.cluster.admissions()) == 1, what="the admission")
    assert any(t.name == "jr2-agent-coder" for t in threading.enumerate())
    seat.ref.stop(block=True, timeout=10)
    names = {t.name for t in threading.enumerate() if t.is_alive()}
    assert "jr2-agent-coder" not in names and "jr2-agent-coder-timers" not in names


# -- one Submission at a time per conversation (issue 16, items 1, 2, 13) --------------------------------

RUN_ON = 5.0  # the fake's Submissions run on this long (virtual seconds) after `over: true` or an abort


def stream_of(seat: Seat, conversation: str) -> list[dict[str, Any]]:
    client = HarnessClient(seat.endpoint, seat.cluster.harness_token(NAME))
    try:
        return client.updates(f"{seat.endpoint}/streams/coder/{conversation}", "0").events
    finally:
        client.close()


def settles(seat: Seat, conversation: str) -> list[str]:
    return [e["outcome"] for e in stream_of(seat, conversation) if e["type"] == "submission-settled"]


def answered_over(seat: Seat) -> None:
    """Turn 1 of `c-1` picks, and its answer ends it (`over: true`): the Submission runs on until its model
    stops (as long as the fake's run-on lever says)."""
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    picked = seat.first(turn.Picked, 1)
    seat.ref.tell(AnswerPick(1, picked.call_id, True, "moved"))
    wait_until(lambda: len(seat.cluster.harness_read(lambda core: list(core.answers))) == 1, what="the answer")


def test_the_next_turn_of_a_conversation_starts_only_once_the_previous_submission_settled(seat: Seat) -> None:
    seat.cluster.harness(lambda core: core.set_run_on(RUN_ON))
    seat.cluster.script("coder", [Pick("finish")], [Say("again")])
    answered_over(seat)
    seat.start(2, "c-1")  # the run moved on at once; the Submission runs on until its model stops
    seat.advance_until(lambda: bool(seat.of(2)), "the second Turn's read")
    assert seat.clock.monotonic() >= RUN_ON and settles(seat, "c-1") == ["completed"]
    assert isinstance(seat.of(2)[0], KillsRead)
    seat.admit(2, kept=True)
    assert seat.first(turn.Settled, 2).outcome == "completed"
    assert len(seat.cluster.admissions()) == 2  # none refused 409
    assert not any(isinstance(m, turn.TurnFault) for m in seat.inbox.snapshot())


def test_a_turn_after_an_aborted_one_waits_for_the_aborts_settle(seat: Seat) -> None:
    seat.cluster.harness(lambda core: core.set_run_on(RUN_ON))
    seat.cluster.script("coder", [Hang()], [Say("again")])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    seat.first(turn.Accepted, 1)
    seat.ref.tell(AbortTurn(1))
    seat.start(2, "c-1")  # the state's `after` left it, and re-entered it
    assert seat.first(TurnAborted, 1).aborted
    seat.advance_until(lambda: bool(seat.of(2)), "the second Turn's read")
    assert seat.clock.monotonic() >= RUN_ON and settles(seat, "c-1") == ["aborted"]
    seat.admit(2, kept=True)
    assert seat.first(turn.Settled, 2).outcome == "completed"
    assert len(seat.cluster.admissions()) == 2


def test_a_restored_turns_admission_waits_for_its_aborts_settle(seat: Seat) -> None:
    seat.cluster.harness(lambda core: core.set_run_on(RUN_ON))
    seat.cluster.script("coder", [Hang()], [Say("resumed")])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    seat.first(turn.Accepted, 1)
    seat.ref.stop(block=True, timeout=10)  # the Orchestrator restarts: a new seat takes the restored Turn
    pool = ThreadPoolExecutor(2)
    inbox = Inbox()
    again = AgentActor.start("coder", parent=inbox, pool=pool, clock=seat.clock, timers=seat.timers)
    try:
        again.tell(StartTurn(1, "c-1", seat.endpoint, seat.cluster.harness_token(NAME), abort_first=True))
        inbox.wait_for(lambda ms: any(isinstance(m, KillsRead) for m in ms), what="the read after the abort")
        again.tell(Admit(1, admission(kept=True)))
        seat.advance_until(lambda: any(isinstance(m, (turn.Settled, turn.TurnFault)) for m in inbox.snapshot()),
                           "the re-admission")
        assert [type(m) for m in inbox.snapshot() if isinstance(m, (turn.Settled, turn.TurnFault))] == [turn.Settled]
        assert settles(seat, "c-1") == ["aborted", "completed"]
        assert len(seat.cluster.admissions()) >= 3  # the first, a 409 while the abort settled, the one admitted
    finally:
        again.stop(block=True, timeout=10)
        pool.shutdown(wait=True)


class _Gated(HarnessClient):
    """A client whose answers wait for `gate`, then fail with `failure`."""

    gate = threading.Event()
    failure: Exception = HarnessError(503, "draining")

    def answer(self, agent: str, conversation_id: str, call_id: str, over: bool, answer: Any) -> None:
        self.gate.wait(10)
        raise self.failure


@pytest.mark.parametrize(("failure", "problem"), [
    (HarnessError(503, "draining"), "Harness answered 503: draining"),
    (HarnessUnreachable("POST answers: connection reset", reached=True), "POST answers: connection reset")],
    ids=["503", "reset"])
def test_an_answer_that_never_reached_its_call_is_reported_and_its_submission_aborted_before_the_next_turn(
        make_seat: Callable[..., Seat], failure: Exception, problem: str) -> None:
    _Gated.gate.clear()
    _Gated.failure = failure
    seat = make_seat(_Stubbed(lambda url, token: _Gated(url, token)))
    seat.cluster.script("coder", [Pick("finish")], [Say("again")])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    picked = seat.first(turn.Picked, 1)
    seat.ref.tell(AnswerPick(1, picked.call_id, True, "moved"))
    seat.start(2, "c-1")  # the run moved on: the seat's Turn is replaced while the answer is in flight
    seat.ref.ask(object())  # both handled
    _Gated.gate.set()
    failed = seat.first(turn.AnswerFailed, 1)  # never dropped: the run tells the next Turn of it
    assert (failed.call_id, failed.problem) == (picked.call_id, problem)
    seat.first(KillsRead, 2)
    assert settles(seat, "c-1") == ["aborted"]  # the call waited for a result that would never come
    messages = seat.inbox.snapshot()
    assert messages.index(failed) < messages.index(seat.first(KillsRead, 2))  # the run hears it first
    seat.admit(2, kept=True)
    assert seat.first(turn.Settled, 2).outcome == "completed"
    assert len(seat.cluster.admissions()) == 2


def test_an_admission_whose_fate_is_unknown_is_found_out_by_an_abort_not_faulted(
        make_seat: Callable[..., Seat]) -> None:
    class Reset(HarnessClient):
        def admit(self, agent: str, conversation_id: str, admission: Admission, **kw: Any) -> Any:
            super().admit(agent, conversation_id, admission, **kw)
            raise HarnessUnreachable("POST admission: connection reset", reached=True)

    seat = make_seat(_Stubbed(lambda url, token: Reset(url, token)))
    seat.cluster.script("coder", [Hang()], [Hang()])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    unsure = seat.first(AdmissionUnsure, 1)
    assert unsure.accepted  # the abort found the Submission it started: the Harness had taken it
    assert not [m for m in seat.of(1) if isinstance(m, turn.TurnFault)]  # a hiccup, not a fault: admitted again
    wait_until(lambda: settles(seat, "c-1") == ["aborted"], what="the unwanted Submission aborted")
    # A Harness slow to seat it could start it after that abort: the conversation's next Turn aborts first.
    admit_again = seat.cluster.harness(lambda core: core.admit(NAME, "coder", "c-1", body(), 0.0))
    assert admit_again[0].code == 200  # (started behind the seat's back, as that late Submission would be)
    seat.start(2, "c-1")
    seat.first(KillsRead, 2)
    assert settles(seat, "c-1") == ["aborted", "aborted"]


def test_a_stopped_seat_cuts_an_admission_that_waits_on_a_live_harness(make_seat: Callable[..., Seat]) -> None:
    ended = threading.Event()

    class Unanswered(HarnessClient):
        def admit(self, agent: str, conversation_id: str, admission: Admission, **kw: Any) -> Any:
            cut = kw["cut"]
            while not cut.fired:  # a Harness alive and never answering: only the cut ends the wait
                ended.wait(0.01)
            ended.set()
            raise HarnessUnreachable("POST admission: cut", reached=True)

    seat = make_seat(_Stubbed(lambda url, token: Unanswered(url, token)))
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    seat.ref.ask(object())  # the admission is in flight
    seat.ref.stop(block=True, timeout=10)
    assert ended.wait(10)


def test_a_previous_submission_that_will_not_settle_is_aborted_after_its_bound(seat: Seat) -> None:
    seat.cluster.harness(lambda core: core.set_run_on(10 * PREVIOUS_SETTLE_SECONDS))  # a model that runs on
    seat.cluster.script("coder", [Pick("finish")], [Say("again")])
    answered_over(seat)
    seat.cluster.harness(lambda core: core.set_run_on(0.0))  # … and stops at once when aborted
    started = seat.clock.monotonic()
    seat.start(2, "c-1")
    seat.ref.ask(object())  # held, its bound armed
    seat.clock.advance(PREVIOUS_SETTLE_SECONDS - 1)
    seat.timers.poke()
    seat.ref.ask(object())
    assert not seat.of(2)  # still held within the bound
    seat.clock.advance(1)  # the bound: the seat aborts, the abort settles, the held Turn goes on
    seat.timers.poke()
    seat.first(KillsRead, 2)  # with no more time passing: not the second bound
    assert seat.clock.monotonic() == started + PREVIOUS_SETTLE_SECONDS
    assert settles(seat, "c-1") == ["aborted"]
    seat.admit(2, kept=True)
    assert seat.first(turn.Settled, 2).outcome == "completed"


def _new_process(seat: Seat) -> None:
    """The strict fake Harness restarts as CONTRACTS §3 states it: a new process (a new boot id) keeps the
    conversations, runs none of the old one's Submissions and settles none of them."""
    def restart(core: Any) -> None:
        core.end(NAME)
        core.begin(NAME)

    seat.cluster.harness(restart)


def _booted_seat(make_seat: Callable[..., Seat]) -> Seat:
    return make_seat(harness_mode="strict")


def test_a_restart_of_a_process_that_did_not_hold_the_turn_cuts_nothing(make_seat: Callable[..., Seat]) -> None:
    seat = _booted_seat(make_seat)
    seat.cluster.script("coder", [Hang()])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    seat.first(turn.Accepted, 1)
    seat.ref.tell(CheckHarness(1))  # the watch reports a restart of a process the Turn's admission never saw
    assert not seat.first(HarnessJudged, 1).cut
    assert seat.cluster.harness(lambda core: core.pick_now("coder", "finish"))
    assert seat.first(turn.Picked, 1).pick == "finish"  # still read: nothing was cut


def test_a_restart_that_ended_the_turns_process_cuts_it_and_the_turn_is_admitted_again(
        make_seat: Callable[..., Seat]) -> None:
    seat = _booted_seat(make_seat)
    started = seat.clock.monotonic()
    seat.cluster.script("coder", [Hang()], [Say("resumed")])
    seat.start(1, "c-1")
    seat.first(KillsRead, 1)
    seat.admit(1)
    seat.first(turn.Accepted, 1)
    _new_process(seat)
    seat.ref.tell(CheckHarness(1))
    assert seat.first(HarnessJudged, 1).cut
    seat.ref.tell(ReadKills(1))
    wait_until(lambda: sum(isinstance(m, KillsRead) for m in seat.of(1)) == 2, what="the read before")
    seat.admit(1, kept=True)
    assert seat.first(turn.Settled, 1).outcome == "completed"  # the new process ran the re-admission
    assert [a["body"].get("kept") for a in seat.cluster.admissions()] == [None, True]
    assert seat.clock.monotonic() == started  # no settle bound, no 409 wait: nothing of the old process is awaited


def test_a_held_turn_waits_on_no_submission_of_a_process_that_ended(make_seat: Callable[..., Seat]) -> None:
    seat = _booted_seat(make_seat)
    started = seat.clock.monotonic()
    seat.cluster.harness(lambda core: core.set_run_on(10 * PREVIOUS_SETTLE_SECONDS))  # it would run on
    seat.cluster.script("coder", [Pick("finish")], [Say("again")])
    answered_over(seat)
    _new_process(seat)  # a kernel kill in the run-on: no settle will ever come for it
    seat.start(2, "c-1")
    seat.first(KillsRead, 2)  # at once: the seat saw a new process answering
    assert seat.clock.monotonic() == started
    seat.admit(2, kept=True)
    assert seat.first(turn.Settled, 2).outcome == "completed"
    assert settles(seat, "c-1") == ["completed"]  # only the second Turn's: the first was never settled


def test_a_held_turn_is_released_by_a_restart_reported_after_it_was_held(make_seat: Callable[..., Seat]) -> None:
    seat = _booted_seat(make_seat)
    started = seat.clock.monotonic()
    seat.cluster.harness(lambda core: core.set_run_on(10 * PREVIOUS_SETTLE_SECONDS))
    seat.cluster.script("coder", [Pick("finish")], [Say("again")])
    answered_over(seat)
    seat.start(2, "c-1")  # held: the same process still runs the first Submission on
    seat.ref.ask(object())
    _new_process(seat)
    seat.ref.tell(CheckHarness(2))  # the watch's report of the restart
    assert not seat.first(HarnessJudged, 2).cut  # nothing of the held Turn ran
    seat.first(KillsRead, 2)
    assert seat.clock.monotonic() == started
