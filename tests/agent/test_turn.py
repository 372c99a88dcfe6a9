"""TurnCore on plain data: picks, guard kills as notices, faults by cause, admissions of one Turn, stops."""

from __future__ import annotations

from typing import Any

import pytest

from jr2_actors.agent import core as turn
from jr2_actors.agent import messages as seat
from jr2_actors.harness import briefing


def ev(type_: str, batch: int = 1, index: int = 0, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "conversationId": "c-1", "position": {"batch": batch, "index": index}, **fields}


def reading(allowed: tuple[str, ...] = ("finish",), submission: str = "s-1", offset: str = "0") -> turn.TurnCore:
    core = turn.TurnCore("coder", 1, "c-1")
    core.step(seat.Admitting(allowed))
    step = core.step(seat.Admitted(submission, offset))
    assert step.actions == (seat.ReadUpdates(offset),)
    return core


def settled(outcome: str = "completed", submission: str = "s-1", **extra: Any) -> dict[str, Any]:
    return ev("submission-settled", submissionId=submission, outcome=outcome, **extra)


def test_a_disallowed_pick_is_answered_at_once_in_the_briefings_words_and_changes_nothing() -> None:
    core = reading(("finish", "dispute"))
    step = core.step(seat.Events([ev("pick", callId="k1", pick="explode", args={})], "1"))
    answer = briefing.not_allowed("explode", ("finish", "dispute"))
    assert step.actions == (seat.PostAnswer("k1", False, answer), seat.ReadUpdates("1"))
    assert step.reports == () and core.phase == "following" and core.outstanding == {}


def test_a_guard_kill_is_a_notice_and_a_later_failure_keeps_its_own_words() -> None:
    core = reading()
    step = core.step(seat.Events([
        ev("memory-limit", index=0, id="k-1", peak="1.9Gi", limit="2Gi"),
        settled("failed", error={"type": "provider_limit", "message": "429 after 2 retries"}),
    ], "2"))
    kill, fault = step.reports
    assert kill == seat.GuardKill("coder", 1, "c-1", "k-1", "batch 1 index 0", "1.9Gi", "2Gi")
    assert fault == seat.TurnFault("coder", 1, "settled", "provider limit: 429 after 2 retries")


def test_a_guard_kill_then_a_completed_settle_is_no_fault() -> None:
    core = reading()
    step = core.step(seat.Events([ev("memory-limit", id="k-1", peak="1.9Gi", limit="2Gi"), settled()], "2"))
    assert [type(r) for r in step.reports] == [seat.GuardKill, seat.Settled]
    assert not any(isinstance(r, seat.TurnFault) for r in step.reports)


@pytest.mark.parametrize(("error", "reason"), [
    ({"type": "memory_limit", "message": "peak 1.9Gi"}, "memory_limit: peak 1.9Gi"),  # no invented fault type
    ({"type": "tool_crash"}, "tool_crash"),
    ({"message": "x" * 10_000}, "x" * turn.MAX_TEXT),
    ("not an object", "the Submission failed"),
    ({"type": 7, "message": ["no"]}, "the Submission failed"),
])
def test_a_failed_settle_is_the_harness_words(error: object, reason: str) -> None:
    core = reading()
    step = core.step(seat.Events([settled("failed", error=error)], "1"))
    assert step.reports == (seat.TurnFault("coder", 1, "settled", reason),)
    assert core.ended


def test_a_settle_of_an_unknown_outcome_faults_naming_it() -> None:
    core = reading()
    (fault,) = core.step(seat.Events([settled("exploded" * 100)], "1")).reports
    assert isinstance(fault, seat.TurnFault) and fault.cause == "settled"
    assert fault.reason.startswith("the Submission settled 'explodedexploded") and len(fault.reason) < 120


def test_a_stream_kill_with_no_id_is_kept_and_its_place_is_its_source() -> None:
    core = reading(offset="7")
    step = core.step(seat.Events([
        ev("memory-limit", batch=3, index=4, peak="512Mi", limit="2Gi"),
        {"type": "memory-limit", "position": "garbage", "id": "x" * 65, "peak": "1Gi", "limit": "2Gi"},
        {"type": "memory-limit", "position": {"batch": True, "index": -1}, "id": 42},
    ], "10"))
    older, hostile, odd = step.reports
    assert isinstance(older, seat.GuardKill) and isinstance(hostile, seat.GuardKill) and isinstance(odd, seat.GuardKill)
    assert (older.kill_id, older.place, older.peak, older.limit, older.problems) == (
        None, "batch 3 index 4", "512Mi", "2Gi", ())
    assert (hostile.kill_id, hostile.place, hostile.peak) == (None, "offset 7 event 1", "1Gi")
    assert "not an id" in hostile.problems[0]
    assert (odd.kill_id, odd.place) == (None, "offset 7 event 2")


@pytest.mark.parametrize(("peak", "limit", "kept", "problems"), [
    ("1.9Gi", "2Gi", ("1.9Gi", "2Gi"), 0),
    ("2147483648", "2Gi", (None, None), 1),  # a bare number is not a size: no sizes are said (ADR-0062)
    ("1.9Gi", None, (None, None), 1),  # a peak comes only with a limit
    ("lots", "2Gi; rm -rf /", (None, None), 2),
    (None, "2Gi", (None, "2Gi"), 0),
    (["1Gi"], {"x": 1}, (None, None), 2),
])
def test_guard_kill_sizes_are_kept_only_in_the_guards_form(peak: object, limit: object,
                                                           kept: tuple[str | None, str | None], problems: int) -> None:
    core = reading()
    (kill,) = core.step(seat.Events([ev("memory-limit", id="k", peak=peak, limit=limit)], "1")).reports
    assert isinstance(kill, seat.GuardKill)
    assert (kill.kill_id, kill.peak, kill.limit) == ("k", *kept)
    assert len(kill.problems) == problems


def test_every_outstanding_pick_of_a_batch_is_kept_until_answered() -> None:
    core = reading(("finish", "note"))
    step = core.step(seat.Events([ev("pick", index=0, callId="a", pick="note", args={"n": 1}),
                                  ev("pick", index=1, callId="b", pick="finish", args="not a dict")], "2"))
    assert [r.call_id for r in step.reports if isinstance(r, seat.Picked)] == ["a", "b"]
    assert step.reports[1] == seat.Picked("coder", 1, "b", "finish", {})
    first = core.step(seat.Answering("a", False, "noted"))
    second = core.step(seat.Answering("b", True, "done"))
    assert first.actions == (seat.PostAnswer("a", False, "noted"),)
    assert second.actions == (seat.PostAnswer("b", True, "done"),)
    again = core.step(seat.Answering("a", False, "twice"))
    assert again.actions == () and "not waiting" in again.note
    core.step(seat.Answered("a"))
    failed = core.step(seat.AnswerUndelivered("b", "Harness answered 409"))
    assert failed.reports == (seat.AnswerFailed("coder", 1, "b", "Harness answered 409"),)
    assert core.outstanding == {}
    assert core.step(seat.Answering("zz", False, "?")).actions == ()


def test_a_nudge_is_another_admission_of_the_same_turn_and_not_kept_is_its_own_outcome() -> None:
    core = reading()
    step = core.step(seat.Events([ev("pick", callId="a", pick="finish", args={}), settled()], "2"))
    assert step.reports[-1] == seat.Settled("coder", 1, "completed", True)
    assert step.actions == () and core.phase == "idle"  # no read after the settle
    core.step(seat.Admitting(("finish",)))
    refused = core.step(seat.AdmitNotKept("conversation c-1 is not held here"))
    assert refused.reports == (seat.NotKept("coder", 1, "c-1", "conversation c-1 is not held here"),)
    assert core.phase == "idle" and not core.ended
    core.step(seat.Admitting(()))
    assert core.step(seat.Admitted("s-2", "2")).actions == (seat.ReadUpdates("2"),)
    done = core.step(seat.Events([settled("completed", "s-1"), settled("aborted", "s-2")], "4"))
    assert done.reports == (seat.Settled("coder", 1, "aborted", False),)


def test_an_admission_while_one_runs_is_dropped_with_a_note() -> None:
    core = reading()
    step = core.step(seat.Admitting(("finish",)))
    assert step == seat.TurnStep(note="an admission while following: dropped")
    assert core.phase == "following"


def test_a_refused_admission_and_a_lost_conversation_fault_by_cause() -> None:
    refused = turn.TurnCore("coder", 1, "c-1")
    refused.step(seat.Admitting(()))
    (fault,) = refused.step(seat.AdmitRefused("Harness answered 400: no")).reports
    assert fault == seat.TurnFault("coder", 1, "refused", "admission refused: Harness answered 400: no")
    lost = reading()
    (fault,) = lost.step(seat.StreamLost("404: conversation lost")).reports
    assert fault == seat.TurnFault("coder", 1, "lost", "the conversation was lost (404: conversation lost)")


def test_a_stream_that_cannot_be_read_is_tried_three_times_a_second_apart() -> None:
    core = reading(offset="5")
    assert core.step(seat.StreamFailed("reset")).actions == (seat.ReadUpdates("5", after=1.0),)
    assert core.step(seat.StreamFailed("reset")).actions == (seat.ReadUpdates("5", after=1.0),)
    (fault,) = core.step(seat.StreamFailed("reset")).reports
    assert fault == seat.TurnFault("coder", 1, "stream", "the updates stream could not be read: reset")


def test_a_read_that_works_starts_the_count_again() -> None:
    core = reading()
    core.step(seat.StreamFailed("reset"))
    core.step(seat.StreamFailed("reset"))
    core.step(seat.Events([], "0"))
    assert core.step(seat.StreamFailed("reset")).actions == (seat.ReadUpdates("0", after=1.0),)


def test_the_runs_end_faults_with_its_words_and_an_abort_reports_nothing() -> None:
    ended = reading()
    step = ended.step(seat.Stop("memory limit (OOMKilled, limit 2Gi): Killed"))
    assert step.reports == (seat.TurnFault("coder", 1, "ended", "memory limit (OOMKilled, limit 2Gi): Killed"),)
    assert ended.phase == "ended" and not ended.busy  # the Harness ended: nothing runs to wait for
    aborted = reading()
    assert aborted.step(seat.Stop()) == seat.TurnStep()
    assert aborted.ended and aborted.busy  # stopping: its Submission may run until the abort settles
    late = aborted.step(seat.Events([ev("memory-limit", id="k-9"), settled("aborted")], "2"))
    assert late.reports == () and late.actions == () and aborted.phase == "ended"
    assert "after the Turn ended" in aborted.step(seat.Events([ev("memory-limit", id="k-10")], "3")).note


def test_an_aborted_submission_is_read_for_its_settle_only_once_the_abort_is_posted() -> None:
    core = reading(offset="4")
    assert core.step(seat.Stop()).actions == ()  # the seat stops reading before the abort leaves
    assert core.step(seat.AbortAnswered(True)).actions == (seat.ReadUpdates("4"),)
    step = core.step(seat.Events([ev("pick", callId="k1", pick="finish"), ev("message-appended",
                                                                            message={"content": "x"})], "6"))
    assert step.reports == () and step.actions == (seat.ReadUpdates("6"),) and core.busy
    assert core.step(seat.Events([settled("aborted")], "7")).actions == () and not core.busy


@pytest.mark.parametrize("event", [seat.AbortAnswered(False), seat.StreamLost("404")])
def test_an_abort_that_found_nothing_running_or_a_lost_stream_leaves_nothing_to_wait_for(event: seat.Input) -> None:
    core = reading()
    core.step(seat.Stop())
    core.step(event)
    assert not core.busy and core.phase == "ended"


def test_an_abort_while_admitting_takes_the_submissions_id_when_it_lands() -> None:
    core = turn.TurnCore("coder", 1, "c-1")
    core.step(seat.Admitting(("finish",)))
    core.step(seat.Stop())
    assert core.busy
    # Kept means accepted: the run counts the conversation though it left the Turn; no read: the seat aborts.
    assert core.step(seat.Admitted("s-3", "2")) == seat.TurnStep(reports=(seat.Accepted("coder", 1, "s-3"),))
    assert core.step(seat.AbortAnswered(True)).actions == (seat.ReadUpdates("2"),)
    core.step(seat.Events([settled("aborted", "s-3")], "3"))
    assert not core.busy


def test_a_closing_turn_stays_busy_until_its_submission_settles() -> None:
    core = reading()
    core.step(seat.Events([ev("pick", callId="k1", pick="finish")], "1"))
    core.step(seat.Answering("k1", True, "moved"))
    core.step(seat.Answered("k1"))
    assert core.busy and core.closing == "k1"  # CONTRACTS.md §3: it runs on until the model stops
    core.step(seat.Events([ev("message-appended", message={"content": "bye"}), settled()], "3"))
    assert not core.busy


def test_an_answer_that_did_not_reach_its_call_is_reported_and_its_submission_aborted() -> None:
    core = reading()
    core.step(seat.Events([ev("pick", callId="k1", pick="finish")], "1"))
    core.step(seat.Answering("k1", True, "moved"))
    step = core.step(seat.AnswerUndelivered("k1", "503 draining"))
    assert step.reports == (seat.AnswerFailed("coder", 1, "k1", "503 draining"),)
    assert step.actions == (seat.AbortSubmission(),) and core.busy
    aborted = core.step(seat.Events([settled("aborted")], "2"))
    assert aborted.reports == (seat.Settled("coder", 1, "aborted", True),) and not core.busy


def test_an_answer_that_failed_after_the_turn_was_stopped_still_reaches_the_run() -> None:
    core = reading()
    core.step(seat.Events([ev("pick", callId="k1", pick="finish")], "1"))
    core.step(seat.Answering("k1", True, "moved"))
    core.step(seat.Stop())
    step = core.step(seat.AnswerUndelivered("k1", "connection reset"))
    assert step.reports == (seat.AnswerFailed("coder", 1, "k1", "connection reset"),)


def test_another_submissions_settle_is_not_ours() -> None:
    core = reading(submission="s-2", offset="3")
    step = core.step(seat.Events([settled("completed", "s-1")], "4"))
    assert step.reports == () and step.actions == (seat.ReadUpdates("4"),)


@pytest.mark.parametrize("event", [
    {"type": "pick"}, {"type": "pick", "callId": "", "pick": "finish"}, {"type": "pick", "callId": 1, "pick": 2},
    {"type": "message-appended", "message": "x"}, {"type": "message-appended", "message": {"content": [1]}},
    {"type": "submission-settled"}, {"type": "who-knows", "submissionId": "s-1"}, {"type": None},
])
def test_malformed_events_are_skipped_never_a_crash(event: dict[str, Any]) -> None:
    core = reading()
    step = core.step(seat.Events([event], "1"))
    assert step.reports == () and step.actions == (seat.ReadUpdates("1"),)
