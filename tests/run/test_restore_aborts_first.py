"""After a restore, every seat's first Turn aborts first (sim seed 28): the restored process does not know
what its conversations hold — a Submission of an earlier Turn whose answer never landed may still run and
would refuse every admission 409 (CONTRACTS.md §3: a seat admits only once the previous Submission, or its
abort, has settled)."""

from __future__ import annotations

from typing import Any

from jr2_actors.agent import messages as seat
from jr2_actors.run import messages as run
from jr2_actors.run.core import RunCore
from tests.support.run_world import WALL0, Drive, World


def starts(step_actions: Any) -> list[seat.StartTurn]:
    return [a.message for a in step_actions if isinstance(a, run.ToAgent) and isinstance(a.message, seat.StartTurn)]


def test_each_seats_first_turn_after_a_restore_aborts_first_and_only_its_first() -> None:
    d = Drive()
    d.run()
    # The row saved once the review's Turn was made (the coder's Turn 1 answered): restore from it.
    blob = next(b for b in d.saved if b.get("state") == "review" and (b.get("turn") or {}).get("agent") == "reviewer")
    core, step = RunCore.restore(blob, 0.0, WALL0, instance_harness="http://instance")
    seen: list[seat.StartTurn] = starts(step.actions)
    world = d.world
    queue = [e for a in step.actions for e in world.answer(a) if not isinstance(a, run.Save)]
    for _ in range(400):
        if not queue:
            break
        out = core.step(queue.pop(0), 0.0, WALL0)
        seen += starts(out.actions)
        queue += [e for a in out.actions if not isinstance(a, run.Save) for e in world.answer(a)]
    assert core.finished
    by_turn = [(s.turn_id, s.abort_first) for s in seen]
    # the restored reviewer Turn aborts first; so does the coder's first Turn in this process (its
    # conversation's earlier Submission is the dead process's); the later Turns of each do not
    assert by_turn[0][1] is True
    first_coder = next(s for s in seen if s.conversation_id.endswith("-coder"))
    assert first_coder.abort_first is True
    later = [s for s in seen if s is not seen[0] and s is not first_coder]
    assert later and all(not s.abort_first for s in later)


class Recording(World):
    """The deterministic world, recording every StartTurn it is told."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[seat.StartTurn] = []

    def seat(self, message: seat.ToSeat) -> list[run.Input]:
        if isinstance(message, seat.StartTurn):
            self.started.append(message)
        return super().seat(message)


def test_a_run_that_was_never_restored_aborts_nothing_first() -> None:
    world = Recording()
    d = Drive(world=world)
    d.run()
    assert d.finished is not None and len(world.started) == 4
    assert not any(s.abort_first for s in world.started)
