"""RunCore, the workflow engine, on a virtual clock against a scripted world: every §5 rule, and a run
stopped after any transition and restored from its blob ends as one that never stopped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jr2_actors.agent import messages as seat
from jr2_actors.harness import briefing
from jr2_actors.run import messages as run
from jr2_actors.run.core import RunCore, events_markdown
from jr2_actors.run.feed.lines import PickLine, StateLine
from jr2_actors.values.step import OffTable
from jr2_actors.values.workflow import load_workflow
from jr2_actors.workspace import messages as ws
from tests.support.paths import DOCS
from tests.support.run_world import (
    EXAMPLE,
    WALL0,
    Behaviour,
    Drive,
    World,
    reviewer_rejects_once,
)
from tests.support.seat_reports import accepted, kills_read, picked, said, turn_fault
from tests.support.workflows import TWO_WORKSPACES


def test_the_example_runs_to_done_with_the_review_sending_the_work_back_once() -> None:
    d = Drive()
    d.run()
    assert d.finished == run.Finished("done", None)
    states = [e.line.state for e in d.feed if isinstance(e.line, StateLine)]
    assert states == ["review", "code", "review", "done"]
    assert [a["message"] for a in d.world.admissions] == ["Fix the failing test.", "Review the change.",
                                                         "Fix the failing test.", "Review the change."]
    assert d.world.placed == ["F-1"]  # kept across the four states that hold it
    assert d.world.released == [("F-1", "teardown")]  # done: deleted
    assert [a[2] for a in d.world.answers] == [{"reply": "moved to review"}, {"reply": "moved to code"},
                                               {"reply": "moved to review"}, {"reply": "moved to done"}]


def test_an_admission_carries_the_definition_the_allowed_picks_and_the_working_directory() -> None:
    d = Drive()
    d.run()
    first, second, third = d.world.admissions[:3]
    assert first["definition"] == {"agent": "coder", "instructions": "You fix bugs.", "access": "write",
                                   "menu": ["finish", "dispute"]}
    assert first["allowed"] == ["finish", "dispute"] and first["cwd"] == "/work/app/F-1"
    assert "kept" not in first and "kept" not in second
    assert third["kept"] is True  # the coder's conversation continues (ADR-0062)


def test_holds_are_placed_on_entry_and_torn_down_when_no_longer_held() -> None:
    calls = {"first": 0}

    def behaviour(state: str, turn: int) -> str | None:
        if state == "first":
            calls["first"] += 1
            return "next"
        return "back" if turn == 2 else "finish"

    d = Drive(TWO_WORKSPACES, World(behaviour))
    d.run()
    assert d.finished == run.Finished("done", None)
    assert d.world.placed == ["A", "B", "A", "B"]
    assert d.world.released == [("A", "teardown"), ("B", "teardown"), ("A", "teardown"), ("B", "teardown")]


def test_after_bounds_a_placing_wait() -> None:
    d = Drive(world=World(placing={"F-1"}))
    d.run()
    assert d.core.status == "running" and d.kinds().count("placing") == 1
    assert [w[0] for w in d.core.waiting()] == ["F-1"]
    assert not d.world.admissions  # the Turn waits for its Workspace
    d.at(3599.0)
    assert d.core.state == "code"
    d.at(3600.0)
    assert d.finished == run.Finished("failed", None)
    assert d.core.state == "failed"
    assert d.world.released == [("F-1", "run-faulted")]  # it never ran: its Workspace deletes it (ADR-0064)


def test_a_pick_loops_back_to_an_earlier_state() -> None:
    d = Drive()
    d.run()
    picks = [(e.line.pick, e.line.to) for e in d.feed if isinstance(e.line, PickLine)]
    assert picks == [("finish", "review"), ("reject", "code"), ("finish", "review"), ("approve", "done")]


def test_an_unhandled_workspace_lost_fails_the_run_with_the_evictions_words() -> None:
    d = Drive(world=World(lose={"F-1": "Evicted: The node was low on resource: memory."}))
    d.run()
    assert d.finished == run.Finished("failed", "Evicted: The node was low on resource: memory.")
    assert d.world.released == [("F-1", "run-faulted")]


def test_a_handled_workspace_lost_moves_the_run() -> None:
    text = EXAMPLE.replace("on: {finish: review, dispute: failed}",
                           "on: {finish: review, dispute: failed, workspace.lost: done}")
    d = Drive(text, World(lose={"F-1": "Evicted: x"}))
    d.run()
    assert d.finished == run.Finished("done", None)


def test_an_unhandled_agent_fault_fails_the_run_with_its_words() -> None:
    d = Drive(world=World(lambda state, turn: "fault:provider limit: retries ran out"))
    d.run()
    assert d.finished == run.Finished("failed", "provider limit: retries ran out")


def test_a_turn_that_ends_without_a_pick_is_nudged_once_then_faults() -> None:
    d = Drive(world=World(lambda state, turn: None))
    d.run()
    assert [a["message"] for a in d.world.admissions] == ["Fix the failing test.", briefing.NUDGE]
    assert d.world.admissions[1]["kept"] is True
    assert d.finished == run.Finished("failed", "coder ended its Turn without a pick")


def test_cancel_stops_the_turn_and_keeps_what_ran() -> None:
    d = Drive(world=World(lambda state, turn: None if False else "finish" if state == "code" else "never"))
    d.queue.append(run.Start())
    while d.queue and not any(isinstance(e, run.FromSeat) and isinstance(e.report, seat.Accepted) for e in d.queue):
        d.step(d.queue.popleft())
    d.queue.clear()
    d.step(run.Cancel())
    d.run(None)
    assert d.finished == run.Finished("cancelled", "cancelled")
    assert d.world.released == [("F-1", "run-stopped")]
    assert d.world.aborted == [1]


def test_a_faulted_workspace_ends_the_run_in_error() -> None:
    d = Drive()
    d.step(run.Start())
    d.step(run.FromWorkspace(ws.Faulted("F-1", "CrashLoopBackOff: boom")))
    d.run(None)
    assert d.finished is not None and d.finished.status == "error" and "CrashLoopBackOff" in (d.finished.fault or "")


def test_a_held_again_workspace_waits_for_its_predecessor() -> None:
    core = RunCore("r", load_workflow(TWO_WORKSPACES), {}, instance_harness="")
    out: list[Any] = []

    def step(e: run.Input) -> None:
        out.extend(core.step(e, 0.0, WALL0).actions)

    step(run.Start())
    step(run.FromWorkspace(ws.Running("A", {}, "http://h")))
    step(accepted(1))
    step(picked(1, "c1", "next"))
    assert run.ReleaseWorkspace("A", "teardown") in out
    step(run.FromWorkspace(ws.Running("B", {}, "http://h")))
    step(accepted(2))
    out.clear()
    step(picked(2, "c2", "back"))
    assert run.PlaceWorkspace("A", None) not in out  # A's teardown is not over: not yet
    step(run.FromWorkspace(ws.Released("A", deleted=True)))
    assert run.PlaceWorkspace("A", None) in out


def test_reports_of_a_turn_that_is_over_are_ignored() -> None:
    d = Drive()
    d.run()
    status = d.core.status
    d.step(picked(1, "late", "dispute"))
    d.step(turn_fault(1, "late"))
    assert d.core.status == status


def test_started_twice_is_our_bug() -> None:
    d = Drive()
    d.step(run.Start())
    with pytest.raises(OffTable):
        d.step(run.Start())


def _uninterrupted(behaviour: Behaviour, text: str = EXAMPLE) -> tuple[run.Finished | None, int]:
    d = Drive(text, World(behaviour))
    d.run()
    return d.finished, len(d.saved)


def _stopped_at(k: int, behaviour: Behaviour, text: str = EXAMPLE) -> run.Finished | None:
    d = Drive(text, World(behaviour))
    d.queue.append(run.Start())
    while len(d.saved) <= k and d.queue:
        d.step(d.queue.popleft())
    blob = d.saved[k]  # the process dies after the k-th save: whatever it did next is lost
    core, step = RunCore.restore(blob, 0.0, WALL0, instance_harness="http://instance")
    again = Drive(text, World(behaviour))
    again.core = core
    again._take(step)
    again.run(None)
    return again.finished


@pytest.mark.parametrize("behaviour", [reviewer_rejects_once, lambda s, t: "fault:provider limit: x" if t == 3
                                       else reviewer_rejects_once(s, t)], ids=["done", "failed"])
def test_a_run_stopped_after_any_transition_and_restored_ends_the_same_way(behaviour: Behaviour) -> None:
    expected, saves = _uninterrupted(behaviour)
    assert expected is not None and saves >= 5
    for k in range(saves):
        assert _stopped_at(k, behaviour) == expected, f"stopped after save {k}"


def test_the_blob_is_plain_json_and_restores_its_feed_and_ledger() -> None:
    d = Drive()
    d.run()
    blob = d.core.snapshot()  # as the core made it, not as Drive kept it (already through JSON)
    assert json.loads(json.dumps(blob)) == blob  # no tuple, set or object: JSON gives back the same
    core, _ = RunCore.restore(blob, 0.0, WALL0)
    assert [e.id for e in core.feed] == [e.id for e in d.core.feed]
    assert core.status == "done"


def test_the_architecture_doc_carries_the_engines_event_table() -> None:

    doc = (DOCS / "architecture.md").read_text()
    assert events_markdown() in doc


def test_the_row_stays_live_until_every_teardown_is_over_and_a_crash_between_finishes_them() -> None:
    d = Drive(world=World(lose={"F-1": "Evicted: x"}, answer_releases=False))
    d.run()
    assert d.core.status == "failed" and d.finished is None  # ended, its teardown not answered yet
    persisted = [a for a in d.persists if a.status != "running"]
    assert persisted == []  # the row stays live: a restart must finish the deletes
    core, step = RunCore.restore(d.saved[-1], 0.0, WALL0)
    assert run.ReleaseWorkspace("F-1", "run-faulted") in step.actions
    (place,) = [a for a in step.actions if isinstance(a, run.PlaceWorkspace)]
    assert place.restored is not None and place.restored.releasing  # it writes nothing but the delete
    core.step(run.FromWorkspace(ws.Released("F-1", deleted=False)), 0.0, WALL0)
    assert core.finished


def test_a_workspace_whose_actor_died_during_its_teardown_ends_the_teardown() -> None:
    """Issue 16 item 10: nothing will answer the teardown of a Workspace whose actor died; the run finishes.
    Its own fault (a core's, its actor alive, told before it heard the release) is no end of the teardown:
    the actor still deletes or keeps, then says `Released`."""
    d = Drive(world=World(lose={"F-1": "Evicted: x"}, answer_releases=False))
    d.run()
    assert d.core.status == "failed" and not d.core.finished  # ended, its teardown not answered
    d.step(run.FromWorkspace(ws.Faulted("F-1", "CrashLoopBackOff: boom")))
    assert not d.core.finished
    d.step(run.FromWorkspace(ws.Faulted("F-1", "its actor failed: RuntimeError: x", actor=True)))
    assert d.finished is not None and d.finished.status == "failed" and d.finished.fault == "Evicted: x"
    assert d.saved[-1]["endedWorkspaces"] == {"F-1": "kept"}


def test_a_released_workspace_is_saved_at_once() -> None:
    d = Drive(world=World(lose={"F-1": "Evicted: x"}, answer_releases=False))
    d.run()
    before = len(d.persists)
    d.step(run.FromWorkspace(ws.Released("F-1", deleted=True)))
    assert len(d.persists) == before + 1 and "F-1" not in d.saved[-1]["workspaces"]


def test_a_state_that_holds_a_lost_workspace_again_places_it_again() -> None:
    """ADR-0064: re-entering a state that holds a Workspace gives it a new one under the same name — the lost
    one is torn down first, then placed again, and the state's Turn runs in it."""
    text = EXAMPLE.replace("on: {finish: review, dispute: failed}",
                           "on: {finish: review, dispute: failed, workspace.lost: review}")
    core = RunCore("r", load_workflow(text), {}, instance_harness="")
    out: list[Any] = []

    def step(e: run.Input) -> None:
        out.extend(core.step(e, 0.0, WALL0).actions)

    step(run.Start())
    step(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    step(kills_read(1, ()))
    step(accepted(1))
    out.clear()
    step(run.FromWorkspace(ws.Lost("F-1", "Evicted: x")))
    assert core.state == "review" and run.ReleaseWorkspace("F-1", "teardown") in out
    assert not [a for a in out if isinstance(a, run.PlaceWorkspace)]  # not before the lost one is gone
    step(run.FromWorkspace(ws.Released("F-1", deleted=True)))
    assert run.PlaceWorkspace("F-1", None) in out
    step(run.FromWorkspace(ws.Running("F-1", {}, "http://h")))
    assert any(isinstance(a, run.ToAgent) and isinstance(a.message, seat.StartTurn) and a.agent == "reviewer"
               for a in out)


class Talkative(World):
    """A World whose Agents say a few words before they pick: feed lines of steps that save nothing."""

    def seat(self, message: seat.ToSeat) -> list[run.Input]:
        out = super().seat(message)
        if isinstance(message, seat.Admit):
            turn = message.turn_id
            out[1:1] = [said(turn, f"word {i}") for i in range(3)]
        return out


def test_a_run_killed_after_any_step_never_gives_a_readers_id_to_another_line() -> None:
    """Issue 16 item 5: a follower resumes with `Last-Event-ID` (EventSource does by itself); a restore that
    numbered from the last save's `feedNext` gave the ids of the lines since (an Agent's words save
    nothing) to new lines, so the follower silently missed them. Ids stay integers increasing in the run."""
    whole = Drive(world=Talkative())
    whole.run()
    assert whole.finished is not None
    steps = len(whole.feed) + 40  # more steps than lines: every kill point is reached
    for k in range(1, steps):
        d = Drive(world=Talkative())
        d.queue.append(run.Start())
        for _ in range(k):
            if not d.queue:
                break
            d.step(d.queue.popleft())
        held = [e.id for e in d.feed]  # every line a follower may hold when the process dies
        core, step = RunCore.restore(d.saved[-1], 0.0, WALL0, instance_harness="http://instance")
        again = Drive(world=Talkative())
        again.core = core
        again._take(step)
        again.run(None)
        new = [e.id for e in again.feed]
        assert not set(new) & set(held), f"killed after step {k}: ids given twice"
        assert all(a < b for a, b in zip(held + new, (held + new)[1:], strict=False)), f"killed after step {k}"
