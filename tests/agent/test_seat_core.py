"""SeatCore, the seat's decisions, without threads: each rule of `agent/seat_core.py` driven by hand."""

from __future__ import annotations

from typing import Any

import pytest

from jr2_actors.agent import messages as turn
from jr2_actors.agent.messages import (
    AbortDone,
    AbortJob,
    AbortTurn,
    AdmissionUnsure,
    Admit,
    AdmitDone,
    AdmitJob,
    AnswerPick,
    ArmSettle,
    BootDone,
    CheckHarness,
    HarnessJudged,
    KillsDone,
    KillsRead,
    ProbeJob,
    ReadDone,
    ReadJob,
    ReadKillsJob,
    SettleDue,
    StartTurn,
    TurnAborted,
)
from jr2_actors.agent.seat_core import SeatCore, SeatStep
from jr2_actors.values.step import OffTable
from tests.support.admissions import admission

H = "http://h"


def phase(seat: SeatCore) -> str:
    return seat.phase  # read afresh each time (a property the type checker would narrow)


def jobs(step: SeatStep, kind: type) -> list[Any]:
    return [j for j in step.actions if isinstance(j, kind)]


def reports(step: SeatStep, kind: type) -> list[Any]:
    return [r for r in step.reports if isinstance(r, kind)]


def admitted(seat: SeatCore, turn_id: int, conv: str = "c-1", boot: str = "b-1", **start: Any) -> SeatStep:
    """Start, read, admit and accept a Turn: its Submission runs, its stream is read."""
    seat.step(StartTurn(turn_id, conv, H, **start))
    seat.step(KillsDone(turn_id, None, "could not tell"))
    seat.step(Admit(turn_id, admission()))
    return seat.step(AdmitDone(turn_id, turn.Admitted(f"s-{turn_id}", "0"), f"{H}/s", "admitted", boot_id=boot))


def admitting() -> SeatCore:
    """A seat whose Turn 1's admission is out."""
    seat = SeatCore("coder")
    seat.step(StartTurn(1, "c-1", H))
    seat.step(KillsDone(1, None, ""))
    seat.step(Admit(1, admission()))
    return seat


def picked_and_answered(seat: SeatCore, turn_id: int) -> None:
    seat.step(ReadDone(turn_id, seat.turn.read_seq if seat.turn else 0, turn.Events(
        [{"type": "pick", "callId": "c", "pick": "finish", "args": {}}], "1")))
    seat.step(AnswerPick(turn_id, "c", True, {"reply": "moved"}))  # over: the Submission runs on


def test_a_turn_in_a_workspace_reads_the_list_before_its_admission() -> None:
    seat = SeatCore("coder")
    step = seat.step(StartTurn(1, "c-1", H))
    assert jobs(step, ReadKillsJob) == [ReadKillsJob(1, abort_first=False, read=True)] and not step.reports
    step = seat.step(KillsDone(1, None, "timed out", outcome="unreachable"))
    assert reports(step, KillsRead) == [KillsRead("coder", 1, None, "timed out", H)]
    step = seat.step(Admit(1, admission()))
    assert jobs(step, AdmitJob)[0].not_yet is False


def test_a_menu_only_turn_reads_nothing_and_is_told_at_once() -> None:
    step = SeatCore("lead").step(StartTurn(1, "c-1", H, in_workspace=False))
    assert not step.actions and step.reports == (KillsRead("lead", 1, None, source=H, asked=False),)


def test_a_kept_admission_takes_a_409_as_not_yet() -> None:
    seat = SeatCore("coder")
    seat.step(StartTurn(1, "c-1", H))
    seat.step(KillsDone(1, None, ""))
    assert jobs(seat.step(Admit(1, admission(kept=True))), AdmitJob)[0].not_yet is True


def test_the_next_turn_of_a_conversation_is_held_until_the_previous_submission_settles() -> None:
    seat = SeatCore("coder")
    admitted(seat, 1)
    picked_and_answered(seat, 1)
    step = seat.step(StartTurn(2, "c-1", H))
    assert phase(seat) == "held" and jobs(step, ProbeJob) == [ProbeJob(2, judge=False)]
    assert not jobs(step, ReadKillsJob)
    step = seat.step(BootDone(2, "b-1", judge=False))  # the same process: the Submission may still run
    assert phase(seat) == "held" and not step.actions
    previous = seat.previous
    assert previous is not None
    step = seat.step(ReadDone(1, previous.read_seq, turn.Events(
        [{"type": "submission-settled", "submissionId": "s-1", "outcome": "completed"}], "2")))
    assert phase(seat) == "open" and jobs(step, ReadKillsJob) == [ReadKillsJob(2, abort_first=False, read=True)]


def test_a_held_turn_goes_on_at_once_when_another_process_answers() -> None:
    """CONTRACTS §3: a restart took the old process's Submissions with it; none will settle."""
    seat = SeatCore("coder")
    admitted(seat, 1, boot="b-1")
    picked_and_answered(seat, 1)
    seat.step(StartTurn(2, "c-1", H))
    step = seat.step(BootDone(2, "b-2", judge=False))
    assert phase(seat) == "open" and seat.previous is None
    assert jobs(step, ReadKillsJob) == [ReadKillsJob(2, abort_first=False, read=True)]


def test_a_previous_submission_past_its_bound_is_aborted_then_given_up() -> None:
    seat = SeatCore("coder")
    admitted(seat, 1)
    picked_and_answered(seat, 1)
    step = seat.step(StartTurn(2, "c-1", H))
    assert jobs(step, ArmSettle) == [ArmSettle(1)]
    step = seat.step(SettleDue(1))
    assert jobs(step, AbortJob) == [AbortJob(1, asked=False, unsure=False)] and jobs(step, ArmSettle)
    assert phase(seat) == "held"
    step = seat.step(SettleDue(1))
    assert phase(seat) == "open" and jobs(step, ReadKillsJob) and "did not settle" in step.note


@pytest.mark.parametrize(("now", "cut"), [("b-1", False), ("b-2", True), (None, True), ("", True)])
def test_a_restart_is_judged_against_the_process_that_took_the_submission(now: str | None, cut: bool) -> None:
    seat = SeatCore("coder")
    admitted(seat, 1, boot="b-1")
    assert jobs(seat.step(CheckHarness(1)), ProbeJob) == [ProbeJob(1, judge=True)]
    step = seat.step(BootDone(1, now, judge=True))
    assert reports(step, HarnessJudged) == [HarnessJudged("coder", 1, cut)]
    assert seat.turn is not None
    assert seat.turn.core.phase == ("idle" if cut else "following")


def test_a_restart_reported_while_the_admission_is_out_is_judged_on_its_answer() -> None:
    seat = admitting()
    seat.step(CheckHarness(1))
    assert not seat.step(BootDone(1, "b-2", judge=True)).reports  # the admission's answer decides
    step = seat.step(AdmitDone(1, turn.Admitted("s-1", "0"), f"{H}/s", "admitted", boot_id="b-2"))
    assert reports(step, HarnessJudged) == [HarnessJudged("coder", 1, False)]  # the new process took it
    assert reports(step, turn.Accepted) and jobs(step, ReadJob)


def test_an_admission_whose_fate_is_unknown_is_found_out_by_an_abort() -> None:
    seat = admitting()
    step = seat.step(AdmitDone(1, turn.AdmitRefused("connection reset"), outcome="unreachable", reached=True))
    assert jobs(step, AbortJob) == [AbortJob(1, asked=False, unsure=True)] and not step.reports
    step = seat.step(AbortDone(1, True, "", asked=False, unsure=True))
    assert step.reports == (AdmissionUnsure("coder", 1, True, ""),)
    step = seat.step(StartTurn(2, "c-1", H))  # the conversation's next Turn aborts first
    assert jobs(step, ReadKillsJob) == [ReadKillsJob(2, abort_first=True, read=True)]


def test_an_abort_while_admitting_is_posted_once_the_answer_is_in_and_the_take_is_reported() -> None:
    seat = admitting()
    assert not seat.step(AbortTurn(1)).reports
    step = seat.step(AdmitDone(1, turn.Admitted("s-1", "0"), f"{H}/s", "admitted"))
    assert jobs(step, AbortJob) == [AbortJob(1, asked=True, unsure=False)]
    assert reports(step, turn.Accepted)  # kept means accepted, though the run left the Turn
    assert reports(seat.step(AbortDone(1, True, "")), TurnAborted) == [TurnAborted("coder", 1, True)]


def test_a_result_of_a_turn_the_seat_left_is_dropped() -> None:
    seat = SeatCore("coder")
    seat.step(StartTurn(1, "c-1", H))
    seat.step(StartTurn(2, "c-2", H))
    step = seat.step(KillsDone(1, None, ""))
    assert not step.reports and not step.actions


def test_the_runs_message_for_another_turn_is_dropped_with_a_note_and_an_unknown_input_is_our_bug() -> None:
    seat = SeatCore("coder")
    assert "dropped" in seat.step(Admit(3, admission())).note
    seat.step(StartTurn(1, "c-1", H))
    assert "not the seat's turn" in seat.step(Admit(3, admission())).note
    with pytest.raises(OffTable):
        seat.step(object())


def test_an_abort_while_an_admission_of_unknown_fate_was_out_says_the_conversation_may_be_held() -> None:
    """No `Accepted` comes for it, so the abort's report is what makes the run's next admission say `kept`."""
    seat = admitting()
    assert not seat.step(AbortTurn(1)).reports
    step = seat.step(AdmitDone(1, turn.AdmitRefused("connection reset"), outcome="unreachable", reached=True))
    assert jobs(step, AbortJob) == [AbortJob(1, asked=True, unsure=False)] and not step.reports
    assert reports(seat.step(AbortDone(1, False, "")), TurnAborted) == [
        TurnAborted("coder", 1, False, conversation_held=True)]


def test_an_abort_while_an_admission_that_never_left_was_out_holds_nothing() -> None:
    seat = admitting()
    seat.step(AbortTurn(1))
    step = seat.step(AdmitDone(1, turn.AdmitRefused("connection refused"), outcome="unreachable", reached=False))
    assert reports(step, TurnAborted) == [TurnAborted("coder", 1, False)] and not jobs(step, AbortJob)
