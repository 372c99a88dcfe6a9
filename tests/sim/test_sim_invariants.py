"""The simulation's invariants, each shown to catch what it names (pure: facts in, violations out)."""

from __future__ import annotations

from typing import Any

from jr2_actors.harness import briefing
from jr2_actors.sim.invariants import check, feeds, heard_once, notices, outcomes, sandboxes
from jr2_actors.watch.identity import sandbox_name
from tests.support.sim_facts import NAME, RUN, admission, facts


def kill(number: int, peak: str, sandbox: str = NAME) -> dict[str, Any]:
    return {"sandbox": sandbox, "id": f"k-{number}", "peak": peak, "limit": "2Gi", "agent": "a0"}


def read(seq: int, sandbox: str = NAME) -> dict[str, Any]:
    return {"sandbox": sandbox, "seq": seq}


def test_a_clean_seed_has_no_violation() -> None:
    assert check(facts(admissions=[admission(1), admission(4, "1.5Gi")], kills=[kill(2, "1.5Gi")],
                       reads=[read(3)])) == []


def test_a_run_that_never_ended_or_ended_otherwise_is_named() -> None:
    assert outcomes(facts(statuses={RUN: "running"})) == [f"{RUN}: never ended (status running)"]
    assert outcomes(facts(statuses={RUN: "failed"})) == [f"{RUN}: ended failed, where its events dictate done"]
    assert outcomes(facts(statuses={RUN: "cancelled"}, cancelled={RUN})) == []
    assert outcomes(facts(statuses={})) == [f"{RUN}: never ended (status missing)"]


def test_a_notice_told_twice_is_a_violation() -> None:
    (v,) = heard_once(facts(admissions=[admission(3, "1.5Gi"), admission(5, "1.5Gi")], kills=[kill(2, "1.5Gi")]))
    assert "told 2 times" in v and "s-3 " in v and "s-5 " in v


def test_a_notice_an_admission_answered_200_carried_is_heard_even_across_an_orchestrator_restart() -> None:
    # CONTRACTS.md §3: an admission answered 200 has been read; a restored Turn asks the Harness what it holds
    # before it tells anything again, so a retelling after a restart is no longer allowed.
    again = admission(5, "1.5Gi", message=briefing.readmit("Work."))
    for marks in ([], [1]):
        (v,) = heard_once(facts(admissions=[admission(3, "1.5Gi"), again], kills=[kill(2, "1.5Gi")],
                                restart_marks=marks, readmit_text=briefing.READMIT))
        assert "told 2 times" in v and ("orchestrator restart fell between" in v) == bool(marks)


def test_a_notice_of_an_admission_refused_or_never_answered_may_be_told_again() -> None:
    refused = {**admission(3, "1.5Gi"), "status": 409}
    del refused["submissionId"]
    assert heard_once(facts(admissions=[refused, admission(5, "1.5Gi")], kills=[kill(2, "1.5Gi")])) == []


def test_a_notice_retold_after_the_harness_lost_the_conversation_that_heard_it_is_adr_0062s_not_kept() -> None:
    first, again = admission(3, "1.5Gi"), admission(5, "1.5Gi")
    again["body"]["notices"].append({"kind": "conversation-new", "reason": "the Harness no longer holds it"})
    for a in (first, again):
        a.update(conversationId="c-1", conversationSeq=1)
    lost = [{"sandbox": NAME, "agent": "a0", "conversationId": "c-1", "conversationSeq": 1, "seq": 4}]
    assert heard_once(facts(admissions=[first, again], kills=[kill(2, "1.5Gi")], lost=lost)) == []
    (v,) = heard_once(facts(admissions=[first, again], kills=[kill(2, "1.5Gi")]))  # not lost: told twice
    assert "told 2 times" in v
    lost[0]["seq"] = 6  # lost only after the second telling
    assert heard_once(facts(admissions=[first, again], kills=[kill(2, "1.5Gi")], lost=lost)) != []


def test_a_notice_retold_to_a_new_incarnation_of_a_lost_conversation_is_not_told_twice() -> None:
    first, again = admission(3, "1.5Gi"), admission(5, "1.5Gi")
    for a, seq in ((first, 1), (again, 4)):
        a.update(conversationId="c-1", conversationSeq=seq)
    assert heard_once(facts(admissions=[first, again], kills=[kill(2, "1.5Gi")])) == []
    again["conversationSeq"] = 1  # the same incarnation heard it twice
    (v,) = heard_once(facts(admissions=[first, again], kills=[kill(2, "1.5Gi")]))
    assert "told 2 times" in v
    again.update(conversationSeq=4, agent="b0")  # another Agent's conversation: the Workspace was told twice
    (v,) = heard_once(facts(admissions=[first, again], kills=[kill(2, "1.5Gi")]))
    assert "told 2 times" in v


def test_a_kill_no_later_turn_heard_is_a_violation_but_a_nudge_or_no_later_turn_is_not() -> None:
    (v,) = notices(facts(admissions=[admission(1), admission(4)], kills=[kill(2, "1.5Gi")], reads=[read(3)]))
    assert "k-2" in v and "did not reach the next Turn admission" in v


def test_a_kill_must_reach_the_next_turn_admission_not_a_later_one() -> None:
    (v,) = notices(facts(admissions=[admission(4), admission(6, "1.5Gi")], kills=[kill(2, "1.5Gi")],
                         reads=[read(3), read(5)]))
    assert "did not reach the next Turn admission" in v and "s-4" in v
    assert notices(facts(admissions=[admission(1)], kills=[kill(2, "1.5Gi")])) == []
    assert notices(facts(admissions=[admission(1), admission(4, message=briefing.NUDGE)],
                         kills=[kill(2, "1.5Gi")], reads=[read(3)])) == []
    other = sandbox_name(RUN, "X")
    assert notices(facts(admissions=[admission(4, sandbox=other)], kills=[kill(2, "1.5Gi")],
                         reads=[read(3, other)])) == []


def test_a_kill_of_a_pod_that_went_is_owed_only_to_the_admissions_into_that_pod() -> None:
    gone = {**kill(2, "1.5Gi"), "goneAt": 5}
    assert notices(facts(admissions=[admission(6)], kills=[gone], reads=[read(3)])) == []
    (v,) = notices(facts(admissions=[admission(4)], kills=[gone], reads=[read(3)]))
    assert "k-2" in v


def test_a_kill_after_the_last_read_before_an_admission_is_for_the_next_read() -> None:
    # The admission's read (seq 1) came before the kill (seq 2): it could not see it; the list keeps it.
    assert notices(facts(admissions=[admission(3)], kills=[kill(2, "1.5Gi")], reads=[read(1)])) == []


def test_a_newer_kill_read_at_once_covers_an_older_one_as_adr_0062_folds_a_burst() -> None:
    assert notices(facts(admissions=[admission(5, "1.6Gi")], kills=[kill(2, "1.5Gi"), kill(3, "1.6Gi")],
                         reads=[read(4)])) == []


def test_a_sandbox_left_after_done_or_never_ran_or_misnamed_is_a_violation() -> None:
    ran = {"name": NAME, "runId": RUN, "workspace": "W", "podUID": "p-1"}
    (left,) = sandboxes(facts(sandboxes=[ran]))
    assert "left after its run ended done" in left
    assert sandboxes(facts(statuses={RUN: "failed"}, sandboxes=[ran])) == []
    (never,) = sandboxes(facts(statuses={RUN: "failed"}, sandboxes=[{**ran, "podUID": None}]))
    assert "never ran" in never
    (misnamed,) = sandboxes(facts(statuses={RUN: "failed"}, sandboxes=[{**ran, "name": "ws-other"}]))
    assert "is not its run's" in misnamed


def test_a_follower_that_skipped_lines_in_the_middle_is_a_violation() -> None:
    (v,) = feeds(facts(follower_lines={RUN: {1: "a", 2: "b", 5: "e"}},
                       stored_feeds={RUN: {1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}}))
    assert "skipped lines [3, 4]" in v


def test_one_feed_id_with_two_lines_or_a_follower_that_missed_lines_is_a_violation() -> None:
    (v,) = feeds(facts(follower_lines={RUN: {1: "a", 2: "b"}}, stored_feeds={RUN: {1: "a", 2: "c"}}))
    assert "feed id 2" in v
    (missed,) = feeds(facts(follower_lines={RUN: {1: "a"}}, stored_feeds={RUN: {1: "a", 2: "b", 3: "c"}}))
    assert "missed lines 2-3" in missed
    assert feeds(facts(follower_problems=["x"])) == ["x"]


def test_a_logged_traceback_is_a_violation() -> None:
    assert check(facts(tracebacks=["jr2_actors.run: boom"])) == ["a traceback was logged: jr2_actors.run: boom"]
