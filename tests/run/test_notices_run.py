"""ADR-0062's notices in the run's engine: an admission takes what its read raised, a nudge takes only what
its mark allows, and what the Harness never read is raised again."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from jr2_actors.agent import messages as seat
from jr2_actors.harness import briefing
from jr2_actors.harness.client import admission_body
from jr2_actors.harness.memory_kills import MemoryKill
from jr2_actors.run import messages as run
from jr2_actors.run.core import RunCore
from jr2_actors.run.notices import NOT_HELD, nudge_eligible
from jr2_actors.run.turn_record import UNSURE_LIMIT
from jr2_actors.values.constants import LOST_GRACE_SECONDS
from jr2_actors.values.workflow import load_workflow, read_document
from jr2_actors.workspace import messages as ws
from tests.support.kills import WALL0, at, kill
from tests.support.seat_reports import (
    accepted,
    answer_failed,
    guard_kill,
    judged,
    kills_read,
    not_kept,
    picked,
    said,
    settled,
    turn_fault,
    unsure,
)
from tests.support.workflows import FIX_WAIT_REVIEW


class Engine:
    """The run's core, driven by hand: each step's actions are kept for the test to read."""

    def __init__(self, text: str = FIX_WAIT_REVIEW) -> None:
        doc = read_document(text)
        assert isinstance(doc, dict)
        self.core = RunCore("run-n", load_workflow(text), doc)
        self.now = 0.0
        self.actions: list[run.Action] = []
        self.saves = 0

    def __call__(self, event: run.Input) -> run.RunStep:
        step = self.core.step(event, self.now, WALL0 + self.now)
        self.actions.extend(step.actions)
        self.saves += sum(isinstance(a, run.Save) for a in step.actions)
        return step

    def status(self) -> str:
        return str(self.core.status)

    def admissions(self) -> list[Mapping[str, Any]]:
        return [admission_body(a.message.admission) for a in self.actions
                if isinstance(a, run.ToAgent) and isinstance(a.message, seat.Admit)]

    def running(self) -> None:
        self(run.Start())
        self(run.FromWorkspace(ws.Running("F-1", {"app": "/work/app/x"}, "http://h")))


def test_a_kill_listed_while_the_workflow_waited_with_no_turn_reaches_the_very_next_admission() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    e(picked(1, "c1", "finish"))  # the run waits 60 s in `wait`: no Turn runs
    e.now = 60.0
    e(run.RunTick())  # → review: the reviewer's Turn reads the list, where a dev server's kill now is
    last = e.actions[-1]
    assert isinstance(last, run.ToAgent) and isinstance(last.message, seat.StartTurn) and last.agent == "reviewer"
    saves = e.saves
    e(kills_read(2, (kill("k-dev", peak="1.1Gi", limit="2Gi", agent="coder"),)))
    (first, second) = e.admissions()
    assert "notices" not in first
    assert second["notices"] == [{"kind": "memory-limit", "scope": "workspace", "peak": "1.1Gi", "limit": "2Gi"}]
    assert e.saves == saves + 1  # ledgered (saved) before the admission leaves


def test_a_read_that_raises_nothing_new_saves_nothing() -> None:
    e = Engine()
    e.running()
    saves = e.saves
    e(kills_read(1, ()))
    assert e.saves == saves + 1  # the Turn's mark ("none") is ledgered once …
    e(accepted(1))
    e(settled(1, False))  # … a nudge reads again
    saves = e.saves
    e(kills_read(1, ()))
    assert e.saves == saves  # nothing changed: nothing saved


def test_a_nudge_takes_only_guard_kills_after_the_mark_and_no_kernel_kill() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, (kill("k-before", at(1)),)))  # the first read: mark k-before (raised for this Turn)
    first = e.admissions()[0]
    assert len(first["notices"]) == 1
    e(accepted(1))
    e(run.FromWorkspace(ws.LastEndSeen("F-1", "OOMKilled", 137, "2026-11-29T10:05:00Z", 1, "memory limit …")))
    e(settled(1, False))
    e(kills_read(1, (kill("k-before", at(1)), kill("k-during", at(6)))))
    nudge = e.admissions()[1]
    assert nudge["message"] == briefing.NUDGE and nudge["kept"] is True
    assert nudge["notices"] == [{"kind": "memory-limit", "scope": "workspace", "peak": "1.9Gi", "limit": "2Gi"}]
    kernel = [p for p in e.core.ledger.pending if "|kernel|" in p.source]
    assert len(kernel) == 1  # the kernel kill waits for the next Turn (it names the coder: its Turn ran)


def test_a_nudge_whose_read_could_not_tell_takes_no_guard_kill() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    e(guard_kill(1, "k-stream", "1.9Gi", "2Gi"))  # heard, and raised for the next admission in scope
    e(settled(1, False))
    e(kills_read(1, None))
    assert "notices" not in e.admissions()[1]
    assert [p.source for p in e.core.ledger.pending] == ["F-1|k-stream"]


def test_notices_of_an_admission_never_answered_are_raised_again() -> None:
    e = Engine(FIX_WAIT_REVIEW.replace("on: {finish: wait}", "on: {finish: wait}\n    after: {seconds: 5, to: wait}"))
    e.running()
    e(kills_read(1, (kill("k-1"),)))
    assert e.admissions()[0]["notices"]
    e.now = 5.0
    e(run.RunTick())  # `after` leaves `code` while the admission is still unanswered
    assert [p.source for p in e.core.ledger.pending] == ["F-1|k-1"]


def test_notices_of_an_admission_answered_200_count_as_heard_before_the_submission_speaks() -> None:
    # CONTRACTS §3: the Harness rendered the Briefing, notices included, when it accepted the admission.
    e = Engine(FIX_WAIT_REVIEW.replace("on: {finish: wait}", "on: {finish: wait}\n    after: {seconds: 5, to: wait}"))
    e.running()
    e(kills_read(1, (kill("k-1"),)))
    e(accepted(1))  # nothing said yet
    e.now = 5.0
    e(run.RunTick())  # `after` leaves `code` before the Submission spoke
    assert e.core.ledger.pending == []


def test_kept_on_every_admission_to_a_held_conversation_and_a_404_kept_false_admits_the_task_alone() -> None:
    e = Engine(FIX_WAIT_REVIEW.replace("on: {approve: done}", "on: {approve: done, redo: code}"))
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    e(picked(1, "c1", "finish"))
    e.now = 60.0
    e(run.RunTick())
    e(kills_read(2, ()))
    e(accepted(2))
    e(picked(2, "c2", "redo"))  # back to the coder: its conversation continues
    e(kills_read(3, (kill("k-9"),)))
    third = e.admissions()[2]
    assert third["kept"] is True and third["message"] == "Fix it."
    e(not_kept(3))  # the Harness lost it (a new container)
    e(kills_read(3, (kill("k-9"),)))  # read again before the admission
    fourth = e.admissions()[3]
    assert "kept" not in fourth
    assert fourth["message"] == "Fix it."  # a continued Turn: nothing was cut, so no re-admit text
    assert {"kind": "conversation-new", "reason": NOT_HELD} in fourth["notices"]
    assert {"kind": "memory-limit", "scope": "workspace", "peak": "1.9Gi", "limit": "2Gi"} in fourth["notices"]


def test_a_kernel_kill_while_no_turn_ran_raises_the_limit_and_no_peak_and_names_no_one() -> None:
    e = Engine()
    e(run.Start())
    e(run.FromWorkspace(ws.LastEndSeen("F-1", "OOMKilled", 137, "2026-11-29T09:00:00Z", 1, "memory limit …")))
    e(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    e(kills_read(1, ()))
    assert e.admissions()[0]["notices"] == [{"kind": "memory-limit", "scope": "workspace", "limit": "2Gi"}]


def test_a_turn_a_kernel_kill_ended_faults_on_it_even_when_the_stream_said_lost_first() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    e(turn_fault(1, "the conversation was lost (404)", "lost"))  # the stream's 404 comes first …
    assert e.status() == "running"
    e(run.FromWorkspace(ws.LastEndSeen("F-1", "OOMKilled", 137, "2026-11-29T10:00:00Z", 1,
                                       "memory limit (OOMKilled, limit 2Gi): Killed")))
    e(run.FromWorkspace(ws.HarnessEnded("F-1", "OOMKilled", 137, "Killed", "memory limit (OOMKilled, limit 2Gi): "
                                        "Killed", "2026-11-29T10:00:00Z")))  # … then the watch
    e.now = LOST_GRACE_SECONDS + 1  # the seat's judgment may take longer than the lost stream's grace
    e(run.RunTick())
    assert e.status() == "running"
    e(judged(1, True))  # the process that ended held the Turn's Submission
    assert e.status() == "failed" and e.core.fault == "memory limit (OOMKilled, limit 2Gi): Killed"
    kernel = [p for p in e.core.ledger.pending if "|kernel|" in p.source]
    assert kernel[0].notice.fields["agent"] == "coder"  # the fault's notice names the Turn's Agent


def test_a_lost_conversation_nothing_explains_stands_after_the_grace() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    e(turn_fault(1, "the conversation was lost (404)", "lost"))
    e.now = LOST_GRACE_SECONDS
    e(run.RunTick())
    assert e.core.status == "failed" and e.core.fault == "the conversation was lost (404)"


def test_a_restored_turn_whose_admission_the_harness_never_read_carries_its_notices_again() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, (kill("k-1"),)))  # raised, ledgered, admitted — and the process dies before a word
    notices = e.admissions()[0]["notices"]
    again = restored_engine(e)
    assert again.core.turn is not None and [x.source for x in again.core.turn.carried] == ["F-1|k-1"]
    again(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    again(kills_read(1, (kill("k-1"),)))  # the mark (k-1) would leave this guard kill out of a resume
    resumed = again.admissions()[-1]
    assert resumed["message"] == briefing.readmit("Fix it.") and resumed["notices"] == notices
    again(said(1, "looking"))
    assert again.core.ledger.pending == [] and restored_engine(again).core.turn.carried == []  # type: ignore[union-attr]


def test_a_restored_turn_whose_admission_was_heard_is_told_nothing_twice() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, (kill("k-1"),)))
    saves = e.saves
    e(accepted(1))  # answered 200, so the Harness read the surface: the blob says so before anything else
    assert e.saves == saves + 1
    again = restored_engine(e)
    again(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    again(kills_read(1, (kill("k-1"),)))
    resumed = again.admissions()[-1]
    assert resumed["message"] == briefing.readmit("Fix it.") and "notices" not in resumed


def test_a_restored_turn_stopped_before_its_readmission_leaves_the_unread_notices_pending() -> None:
    e = Engine(FIX_WAIT_REVIEW.replace("on: {finish: wait}", "on: {finish: wait}\n    after: {seconds: 5, to: wait}"))
    e.running()
    e(kills_read(1, (kill("k-1"),)))
    again = restored_engine(e)
    again.now = 5.0
    again(run.RunTick())  # `after` leaves `code` while the restored Turn waits for its Workspace
    assert [p.source for p in again.core.ledger.pending] == ["F-1|k-1"]


def test_a_refused_nudge_is_admitted_again_as_a_turn_with_the_task_alone() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    e(settled(1, False))  # settled without a pick: nudged
    e(kills_read(1, ()))
    assert e.admissions()[1]["message"] == briefing.NUDGE
    e(not_kept(1))  # the Instance Harness restarted: the nudge's refusal is how it learns
    e(kills_read(1, ()))
    again = e.admissions()[2]
    assert again["message"] == "Fix it." and "kept" not in again
    assert {"kind": "conversation-new", "reason": NOT_HELD} in again["notices"]


@pytest.mark.parametrize("found_running", [True, False, None])
def test_a_restored_turns_unanswered_admission_is_judged_by_what_the_harness_runs(found_running: bool | None) -> None:
    """CONTRACTS §3: after a restore, an admission whose answer was not recorded is judged by what the Harness
    holds — a Submission running is the admission taken (heard); none, or no answer, is not."""
    e = Engine()
    e.running()
    e(kills_read(1, (kill("k-1"),)))  # ledgered and sent; the process dies before the 200 is saved
    notices = e.admissions()[0]["notices"]
    again = restored_engine(e)
    again(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    starts = [a.message for a in again.actions if isinstance(a, run.ToAgent) and isinstance(a.message,
                                                                                           seat.StartTurn)]
    assert starts and starts[-1].abort_first  # the seat aborts first, and says what it found
    again(kills_read(1, (kill("k-1"),), found_running=found_running))
    resumed = again.admissions()[-1]
    if found_running:
        assert "notices" not in resumed and resumed["kept"] is True  # heard once, and the conversation is held
    else:
        assert resumed["notices"] == notices and "kept" not in resumed


def restored_engine(e: Engine) -> Engine:
    blob = json.loads(json.dumps(e.core.snapshot()))
    core, step = RunCore.restore(blob, e.now, WALL0 + e.now)
    again = Engine()
    again.core = core
    again.actions.extend(step.actions)
    return again


def test_a_refused_readmission_keeps_the_readmit_text_before_the_task() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    again = restored_engine(e)  # the Orchestrator restarted mid-Turn: the Turn was cut
    again(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    again(kills_read(1, ()))
    assert again.admissions()[-1]["message"] == briefing.readmit("Fix it.")
    again(not_kept(1))
    again(kills_read(1, ()))
    assert len(again.admissions()) == 2
    assert again.admissions()[-1]["message"] == briefing.readmit("Fix it.")


def test_a_restore_just_after_an_admission_still_says_kept() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    saves = e.saves
    e(accepted(1))
    assert e.saves == saves + 1  # the accepted admission is saved: `kept` is computed from it
    again = restored_engine(e)
    again(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    again(kills_read(1, ()))
    assert again.admissions()[-1]["kept"] is True


def test_a_second_kernel_kill_without_a_time_is_a_second_notice() -> None:
    e = Engine()
    e.running()
    for restarts in (1, 2):
        e(run.FromWorkspace(ws.LastEndSeen("F-1", "OOMKilled", 137, "", restarts, "memory limit …")))
    kernel = [p.source for p in e.core.ledger.pending if "|kernel|" in p.source]
    assert kernel == ["F-1|kernel|restart-1", "F-1|kernel|restart-2"]


def test_a_kernel_kill_while_the_turn_still_reads_the_list_names_no_agent() -> None:
    e = Engine()
    e.running()  # the coder's Turn is reading the list: nothing of it ran in the Harness yet
    e(run.FromWorkspace(ws.LastEndSeen("F-1", "OOMKilled", 137, "2026-11-29T10:00:00Z", 1, "memory limit …")))
    kernel = [p for p in e.core.ledger.pending if "|kernel|" in p.source]
    assert kernel[0].notice.fields.get("agent") is None
    e(kills_read(1, ()))
    e(accepted(1))
    e(run.FromWorkspace(ws.LastEndSeen("F-1", "OOMKilled", 137, "2026-11-29T10:01:00Z", 2, "memory limit …")))
    e(run.FromWorkspace(ws.HarnessEnded("F-1", "OOMKilled", 137, "Killed", OOM, "2026-11-29T10:01:00Z")))
    named = [p for p in e.core.ledger.pending if p.source == "F-1|kernel|2026-11-29T10:01:00Z"]
    assert named[0].notice.fields.get("agent") is None  # not until the seat judged the restart against the Turn
    e(judged(1, True))
    named = [p for p in e.core.ledger.pending if p.source == "F-1|kernel|2026-11-29T10:01:00Z"]
    assert named[0].notice.fields["agent"] == "coder"  # the kill ended the coder's Submission


def test_a_picks_answer_that_never_reached_its_call_is_told_to_the_next_turn_of_that_conversation() -> None:
    e = Engine(FIX_WAIT_REVIEW.replace("on: {approve: done}", "on: {approve: done, redo: code}"))
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    e(picked(1, "call-7", "finish"))  # answered `over: true`; the run moved to `wait` …
    e(answer_failed(1, "call-7", "connection reset"))  # … but the answer never reached the call
    e.now = 60.0
    e(run.RunTick())
    e(kills_read(2, ()))  # the reviewer's Turn: another conversation, it hears nothing of it
    assert "notices" not in e.admissions()[1]
    e(accepted(2))
    e(picked(2, "call-8", "redo"))
    e(kills_read(3, ()))  # the coder's next Turn continues the conversation that picked
    assert e.admissions()[2]["notices"] == [{"kind": "pick-answer", "pick": "finish", "cut": True,
                                             "answer": {"reply": "moved to wait"}}]


# -- issue 16 item 3: the mark's kind is kept apart from its value ---------------------------------------

@pytest.mark.parametrize("kill_id", ["at:x", "at:9999999999.000", "at:", "at:nan"])
def test_a_kill_id_that_reads_like_a_time_is_only_a_kill_id(kill_id: str) -> None:
    """The Agent's uid can write the list: an id `at:x` once made the mark a time and the nudge's read
    raise, so the RunActor died on every revival and the run ended `error` with no admission."""
    e = Engine()
    e.running()
    e(kills_read(1, (kill(kill_id, at(1)),)))  # the first read's newest kill is the Turn's mark
    e(accepted(1))
    e(settled(1, False))
    e(kills_read(1, (kill(kill_id, at(1)), kill("k-2", at(2)))))  # the nudge's read
    nudge = e.admissions()[1]
    assert nudge["message"] == briefing.NUDGE
    assert nudge["notices"] == [{"kind": "memory-limit", "scope": "workspace", "peak": "1.9Gi", "limit": "2Gi"}]
    again = restored_engine(e)  # a restore reads the mark back as the kill id it is
    assert again.core.turn is not None and again.core.turn.mark == e.core.turn.mark  # type: ignore[union-attr]
    again(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    again(kills_read(1, (kill(kill_id, at(1)), kill("k-2", at(2)), kill("k-3", at(3)))))
    assert again.admissions()[-1]["message"] == briefing.readmit("Fix it.")
    assert again.core.status == "running"


@pytest.mark.parametrize(("old", "listed", "eligible"), [
    ("k-1", [kill("k-1", at(1)), kill("k-2", at(2))], {"k-2"}),
    ("none", [kill("k-1", at(1))], {"k-1"}),
    ("at:1795946399.000", [kill("k-early", "2026-11-29T09:59:00.000Z"), kill("k-late", "2026-11-29T10:00:30.000Z")],
     {"k-late"}),
])
def test_an_old_blobs_string_mark_still_restores(old: str, listed: list[MemoryKill], eligible: set[str]) -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    blob = json.loads(json.dumps(e.core.snapshot()))
    blob["turn"]["mark"] = old  # the blob as the code before issue 16 wrote it
    core, _ = RunCore.restore(blob, 0.0, WALL0)
    assert core.turn is not None and core.turn.mark is not None
    assert nudge_eligible(listed, core.turn.mark, "conv") == eligible


@pytest.mark.parametrize("bad", [{"kind": "at", "wall": "soon"}, {"kind": "at", "wall": float("inf")}, {"kind": "kill"},
                                 {"kind": "moon"}, 42, ["k-1"], ""])
def test_a_mark_that_cannot_be_read_is_could_not_tell(bad: object) -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    blob = json.loads(json.dumps(e.core.snapshot()))
    blob["turn"]["mark"] = bad
    core, _ = RunCore.restore(blob, 0.0, WALL0)
    again = Engine()
    again.core = core
    again(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    again(kills_read(1, (kill("k-1", at(1)),)))  # the re-admission: no guard kill, as a read that could not tell
    assert "notices" not in again.admissions()[-1]
    assert [p.source for p in again.core.ledger.pending] == ["F-1|k-1"]  # it stays for the next Turn


# -- issue 16 item 4: a refused nudge keeps every notice the Turn's admissions carried -----------------------

def test_a_nudge_refused_not_kept_puts_back_every_notice_the_turns_admissions_carried() -> None:
    """ADR-0062: "Every notice that the Turn's admissions carried is pending again first" — the first
    admission's too, though the Harness had read its surface: the Harness that refuses no longer holds any
    of it. The re-admission reads the list again first, as every admission into a Workspace does."""
    e = Engine()
    e.running()
    e(kills_read(1, (kill("k-1", at(1), peak="1.1Gi"),)))  # the Turn's admission carries k-1
    assert e.admissions()[0]["notices"][0]["peak"] == "1.1Gi"
    e(accepted(1))
    e(said(1, "working"))  # heard
    e(settled(1, False))
    e(kills_read(1, (kill("k-1", at(1), peak="1.1Gi"), kill("k-2", at(2), peak="1.5Gi"))))
    assert [n["peak"] for n in e.admissions()[1]["notices"]] == ["1.5Gi"]  # the nudge carries k-2
    e(not_kept(1))  # the Harness holds no such conversation any more
    last = e.actions[-1]
    assert isinstance(last, run.ToAgent) and isinstance(last.message, seat.ReadKills)  # read first, then admit
    assert len(e.admissions()) == 2
    e(kills_read(1, (kill("k-1", at(1), peak="1.1Gi"), kill("k-2", at(2), peak="1.5Gi"),
                        kill("k-3", at(3), peak="1.7Gi"))))
    again = e.admissions()[2]
    assert again["message"] == "Fix it." and "kept" not in again
    assert again["notices"] == [  # what the Turn's admissions carried comes first, each once
        {"kind": "memory-limit", "scope": "workspace", "peak": "1.1Gi", "limit": "2Gi"},
        {"kind": "memory-limit", "scope": "workspace", "peak": "1.5Gi", "limit": "2Gi"},
        {"kind": "memory-limit", "scope": "workspace", "peak": "1.7Gi", "limit": "2Gi"},
        {"kind": "conversation-new", "reason": NOT_HELD}]
    assert e.core.ledger.pending == []


def test_a_turn_that_ends_unheard_after_a_refused_nudge_puts_back_what_its_readmission_carried() -> None:
    e = Engine(FIX_WAIT_REVIEW.replace("on: {finish: wait}", "on: {finish: wait}\n    after: {seconds: 5, to: wait}"))
    e.running()
    e(kills_read(1, (kill("k-1", at(1)),)))
    e(accepted(1))
    e(said(1, "working"))
    e(settled(1, False))
    e(kills_read(1, (kill("k-1", at(1)),)))
    e(not_kept(1))
    e(kills_read(1, (kill("k-1", at(1)),)))  # the re-admission carries k-1 again and a fresh conversation
    e.now = 5.0
    e(run.RunTick())  # the state is left before the Harness read it: what it carried is pending, once each
    assert sorted(p.source for p in e.core.ledger.pending) == ["", "F-1|k-1"]


# -- issue 16 item 10: a kernel kill while the Turn only reads the list faults nothing ------------------------

OOM = "memory limit (OOMKilled, limit 2Gi): Killed"


def _only_reading(e: Engine, how: str) -> None:
    e.running()  # the coder's Turn reads the list: nothing of it is in the Harness yet
    if how == "nudge":  # or its Submission settled without a pick and the nudge reads the list again
        e(kills_read(1, ()))
        e(accepted(1))
        e(said(1, "done, I think"))
        e(settled(1, False))


@pytest.mark.parametrize("how", ["first read", "nudge"])
def test_a_kernel_kill_while_the_turn_only_reads_the_list_faults_nothing(how: str) -> None:
    """ADR-0062: "A kill while no Turn runs faults nothing" — no Submission of the Turn runs while it reads
    `/memory-kills`; the kill is a notice, for the admission that follows when that admission takes it."""
    e = Engine()
    _only_reading(e, how)
    aborts = sum(isinstance(a, run.ToAgent) and isinstance(a.message, seat.AbortTurn) for a in e.actions)
    e(run.FromWorkspace(ws.LastEndSeen("F-1", "OOMKilled", 137, "2026-11-29T10:00:00Z", 1, OOM)))
    e(run.FromWorkspace(ws.HarnessEnded("F-1", "OOMKilled", 137, "Killed", OOM)))
    assert e.status() == "running" and e.core.turn is not None and e.core.turn.phase != "ended"
    assert sum(isinstance(a, run.ToAgent) and isinstance(a.message, seat.AbortTurn) for a in e.actions) == aborts
    assert not any(ev.kind in ("turn-fault", "event") for ev in e.core.feed)
    e(kills_read(1, ()))  # the read answers and the Turn is admitted
    if how == "first read":  # the Turn's admission takes the kernel kill …
        assert e.admissions()[-1]["notices"] == [{"kind": "memory-limit", "scope": "workspace", "limit": "2Gi"}]
    else:  # … a nudge takes none: it stays for the next Turn
        assert e.admissions()[-1]["message"] == briefing.NUDGE and "notices" not in e.admissions()[-1]
        assert [p.source for p in e.core.ledger.pending] == ["F-1|kernel|2026-11-29T10:00:00Z"]


def test_a_kernel_kill_that_cut_the_turns_submission_faults_it() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, ()))  # admitting: the Turn is the Harness's now
    e(run.FromWorkspace(ws.HarnessEnded("F-1", "OOMKilled", 137, "Killed", OOM)))
    checks = [a.message for a in e.actions if isinstance(a, run.ToAgent) and isinstance(a.message, seat.CheckHarness)]
    assert checks == [seat.CheckHarness(1)] and e.status() == "running"  # judged by the seat first
    e(judged(1, True))
    assert e.status() == "failed" and e.core.fault == OOM


def test_a_kernel_kill_of_a_process_that_never_held_the_turn_faults_nothing_and_names_no_one() -> None:
    """The next Turn's admission reached the restarted Harness before the watch's report: the restart
    touched nothing of it (ADR-0062: a kill while no Turn runs faults nothing)."""
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))  # accepted by the new process
    e(run.FromWorkspace(ws.LastEndSeen("F-1", "OOMKilled", 137, "2026-11-29T10:00:00Z", 1, OOM)))
    e(run.FromWorkspace(ws.HarnessEnded("F-1", "OOMKilled", 137, "Killed", OOM, "2026-11-29T10:00:00Z")))
    e(judged(1, False))
    assert e.status() == "running" and e.core.turn is not None and e.core.turn.phase == "running"
    kernel = [p for p in e.core.ledger.pending if "|kernel|" in p.source]
    assert kernel[0].notice.fields.get("agent") is None
    assert not any(isinstance(a, run.ToAgent) and isinstance(a.message, seat.AbortTurn) for a in e.actions)


def test_a_restart_that_cut_the_turn_re_admits_it_kept_with_the_readmit_text() -> None:
    """ADR-0062: the re-admission after a Harness restart cut the Turn continues the same Turn."""
    e = Engine()
    e.running()
    e(kills_read(1, ()))
    e(accepted(1))
    e(run.FromWorkspace(ws.HarnessEnded("F-1", "Error", 1, "the Harness restarted", None, "2026-11-29T10:00:00Z")))
    e(judged(1, True))
    e(kills_read(1, (kill("k-7"),)))  # read again before the re-admission
    again = e.admissions()[-1]
    assert again["kept"] is True and again["message"] == briefing.readmit("Fix it.")
    assert again["notices"] == [{"kind": "memory-limit", "scope": "workspace", "peak": "1.9Gi", "limit": "2Gi"}]
    assert e.status() == "running" and e.core.turn is not None and e.core.turn.id == 1


def test_an_admission_whose_fate_was_unknown_is_sent_again_kept_and_its_notices_follow_its_fate() -> None:
    """ADR-0062: an abort that found nothing running does not say the conversation is not held (a Submission
    that ended before it, or a Harness restarted in between, left it held: the simulation's lenient seed 10 sent
    the re-admission without `kept` into a held conversation). The re-admission says `kept: true`."""
    e = Engine()
    e.running()
    e(kills_read(1, (kill("k-1"),)))
    e(unsure(1, accepted=False))  # nothing runs: its notices were never heard, the conversation may be held
    e(kills_read(1, (kill("k-1"),)))
    second = e.admissions()[-1]
    assert second["notices"] and second["kept"] is True and second["message"] == briefing.readmit("Fix it.")
    assert e.status() == "running"
    e(unsure(1, accepted=True))  # this one ran: heard, and the conversation is held
    e(kills_read(1, (kill("k-1"),)))
    third = e.admissions()[-1]
    assert "notices" not in third and third["kept"] is True and third["message"] == briefing.readmit("Fix it.")


def test_a_kept_re_admission_after_an_unknown_fate_that_the_harness_refuses_takes_the_lost_path() -> None:
    e = Engine()
    e.running()
    e(kills_read(1, (kill("k-1"),)))
    e(unsure(1, accepted=False))
    e(kills_read(1, (kill("k-1"),)))
    assert e.admissions()[-1]["kept"] is True
    e(not_kept(1))  # 404, kept: false: the Harness holds no such conversation
    e(kills_read(1, (kill("k-1"),)))
    renewed = e.admissions()[-1]
    assert "kept" not in renewed and renewed["message"] == briefing.readmit("Fix it.")
    kinds = [n["kind"] for n in renewed["notices"]]
    assert "conversation-new" in kinds and "memory-limit" in kinds  # the lost path: told it is new, every notice
    assert e.status() == "running"


def test_a_late_unknown_fate_of_a_turn_the_run_left_still_has_the_next_admission_say_kept() -> None:
    """The same rule for a report that comes after the run left its Turn: the conversation may be held."""
    e = Engine()
    e.running()
    e(unsure(9, accepted=False))  # a Turn of the same agent the run has left (not the current one)
    e(kills_read(1, ()))
    assert e.admissions()[-1]["kept"] is True


@pytest.mark.parametrize("held", [True, False])
def test_an_abort_of_a_turn_whose_admission_may_have_landed_has_the_next_admission_say_kept(held: bool) -> None:
    """A Turn the run stopped while its admission's fate was unknown: only the seat's abort report says the
    conversation may be held (no `Accepted` comes)."""
    e = Engine()
    e.running()
    e(run.FromSeat(seat.TurnAborted("coder", 9, False, conversation_held=held)))
    e(kills_read(1, ()))
    assert e.admissions()[-1].get("kept", False) is held


def test_admissions_whose_fate_stays_unknown_fault_the_turn_past_the_bound() -> None:
    e = Engine()
    e.running()
    for _ in range(UNSURE_LIMIT):
        e(kills_read(1, ()))
        e(unsure(1, accepted=False))
    assert e.status() == "running"
    e(kills_read(1, ()))
    e(unsure(1, accepted=False, problem="connection reset"))
    assert e.status() == "failed" and "connection reset" in (e.core.fault or "")
