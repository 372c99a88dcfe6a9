"""The simulation's invariants around a Harness restart, each shown to catch what it names on hand-made facts:
a Turn faulted by a restart that never touched it, an admission held back by a Submission of an ended
container, a notice told again after an admission answered 200, an unkept admission into a held conversation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jr2_actors.run.feed.lines import EventLine, FeedEvent, TurnFaultLine, TurnLine
from jr2_actors.run.feed.wire import feed_doc
from jr2_actors.sim.invariants import check, fingerprint, heard_once, kept_held, restart_faults, settle_waits
from jr2_actors.values.constants import PREVIOUS_SETTLE_SECONDS
from tests.support.sim_facts import NAME, RUN, admission, facts

ENDED = "the Harness ended (Error, exit 1): the Harness restarted"
OOM = "memory limit (OOMKilled, limit 1Gi): Killed"
BOOTS: list[dict[str, Any]] = [{"sandbox": NAME, "bootId": "boot-1", "began": None, "ended": 105.0},
                              {"sandbox": NAME, "bootId": "boot-2", "began": 105.5}]


def accepted(seq: int, boot: str, at: float, **extra: Any) -> dict[str, Any]:
    return {**admission(seq), "conversationId": f"{RUN}-a0", "status": 200, "bootId": boot, "at": at, **extra}


def feed(reason: str = ENDED, *, line: str = "event", wire: bool = False) -> dict[str, Any]:
    fault = EventLine("agent.fault", reason, "code") if line == "event" else TurnFaultLine("a0", 2, reason)
    events = [FeedEvent(1, 100.0, TurnLine("a0", 2, "code")), FeedEvent(2, 110.0, fault)]
    text = (lambda e: json.dumps(feed_doc(e), sort_keys=True)) if wire else fingerprint
    return {"stored_feeds": {RUN: {e.id: text(e) for e in events}}, "feed_times": {RUN: {1: 100.0, 2: 110.0}}}


@pytest.mark.parametrize("line", ["event", "turn-fault"])
@pytest.mark.parametrize("wire", [False, True])  # the sim's fingerprints, or the served documents of a crash trial
def test_a_turn_admitted_to_the_process_after_the_restart_is_never_faulted_by_it(line: str, wire: bool) -> None:
    (v,) = restart_faults(facts(admissions=[accepted(3, "boot-2", 106.0)], boots=BOOTS, **feed(line=line, wire=wire)))
    assert f"{RUN}: Turn 2 of a0 was faulted on a Harness restart" in v and "s-3 by boot-2" in v


def test_a_turn_whose_admission_the_ended_process_accepted_may_fault_on_its_end() -> None:
    assert restart_faults(facts(admissions=[accepted(3, "boot-1", 101.0)], boots=BOOTS, **feed(OOM))) == []
    # … but a process that ends only after the fault did not cause it
    later = [{**BOOTS[0], "ended": 111.0}, BOOTS[1]]
    assert restart_faults(facts(admissions=[accepted(3, "boot-1", 101.0)], boots=later, **feed(OOM))) != []


def test_a_turn_faulted_by_a_restart_before_any_process_accepted_its_admission_is_a_violation() -> None:
    (v,) = restart_faults(facts(admissions=[accepted(3, "boot-1", 99.0)], boots=BOOTS, **feed()))  # an earlier Turn's
    assert "accepted: none" in v


def test_a_fault_that_no_restart_words_is_not_this_invariants() -> None:
    assert restart_faults(facts(admissions=[], boots=BOOTS, **feed("the conversation was lost"))) == []


CUT = [{"sandbox": NAME, "agent": "a0", "conversationId": f"{RUN}-a0", "submissionId": "s-2", "bootId": "boot-1",
        "at": 105.0}]


def test_an_admission_held_back_by_a_submission_of_the_container_that_ended_is_a_violation() -> None:
    late = 105.5 + PREVIOUS_SETTLE_SECONDS
    (v,) = settle_waits(facts(cut=CUT, boots=BOOTS, admissions=[accepted(4, "boot-2", late)]))
    assert "after the restart that ended s-2 came 60.0s after the new process answered" in v
    assert settle_waits(facts(cut=CUT, boots=BOOTS, admissions=[accepted(4, "boot-2", 106.0)])) == []


def test_no_admission_after_the_restart_while_the_run_waits_is_a_violation_once_half_the_bound_passed() -> None:
    waited = 105.5 + PREVIOUS_SETTLE_SECONDS / 2
    (v,) = settle_waits(facts(cut=CUT, boots=BOOTS, statuses={RUN: "running"}, ended_at=waited))
    assert "never came" in v and "still running" in v
    assert settle_waits(facts(cut=CUT, boots=BOOTS, statuses={RUN: "running"}, ended_at=waited - 1)) == []
    assert settle_waits(facts(cut=CUT, boots=BOOTS, statuses={RUN: "done"}, ended_at=waited)) == []


def test_the_conversation_new_notice_told_again_to_the_same_incarnation_is_a_violation() -> None:
    new = {"kind": "conversation-new", "reason": "first turn"}
    first, again = accepted(3, "boot-1", 101.0), accepted(5, "boot-2", 107.0, kept=True)
    for a in (first, again):
        a.update(conversationSeq=2)
        a["body"]["notices"] = [new]
    (v,) = heard_once(facts(admissions=[first, again]))
    assert "the conversation-new notice of" in v and "told 2 times" in v
    again["conversationSeq"] = 4  # a new incarnation: the Harness lost the one that heard it
    assert heard_once(facts(admissions=[first, again])) == []


def test_an_admission_not_kept_into_a_conversation_the_harness_holds_is_a_violation() -> None:
    busy = {**accepted(4, "boot-1", 102.0, heldUnkept=True), "status": 409}
    (v,) = kept_held(facts(admissions=[accepted(3, "boot-1", 101.0), busy,
                                       accepted(5, "boot-2", 107.0, heldUnkept=True)]))
    assert f"2 admission(s) not kept went to {RUN}-a0, a conversation the Harness held (answered 409, 200)" in v
    assert kept_held(facts(admissions=[accepted(3, "boot-1", 101.0)])) == []


def test_check_runs_the_restart_invariants() -> None:
    violations = check(facts(admissions=[accepted(3, "boot-2", 106.0, heldUnkept=True)], boots=BOOTS, **feed()))
    assert any("faulted on a Harness restart" in v for v in violations)
    assert any("a conversation the Harness held" in v for v in violations)
