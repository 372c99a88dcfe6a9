"""The run's engine (`RunCore`) driven by hand on numbers for time, against a scripted world that answers its
actions as the Workspace and Agent actors would, deterministically."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from importlib import resources
from typing import Any

from jr2_actors.agent import messages as seat
from jr2_actors.harness.client import admission_body
from jr2_actors.run import messages as run
from jr2_actors.run.core import RunCore
from jr2_actors.run.feed.lines import FeedEvent
from jr2_actors.values.workflow import load_workflow, read_document
from jr2_actors.workspace import messages as ws
from tests.support.seat_reports import accepted, kills_read, picked, settled, turn_fault

EXAMPLE = resources.files("jr2_actors").joinpath("examples/fix-and-review.yaml").read_text()
WALL0 = 1_790_000_000.0
START = run.Start()

# An agent's behaviour: (workflow state, turn id) → the pick it makes (None: it ends without one), or an
# exception-like string "fault:<reason>".
Behaviour = Callable[[str, int], str | None]


def reviewer_rejects_once(state: str, turn: int) -> str | None:
    return {"code": "finish", "review": "reject" if turn == 2 else "approve"}.get(state)


class World:
    """Answers the run's actions as Workspace and Agent actors would, deterministically."""

    def __init__(self, behaviour: Behaviour = reviewer_rejects_once, *, placing: set[str] | None = None,
                 lose: dict[str, str] | None = None, answer_releases: bool = True) -> None:
        self.behaviour = behaviour
        self.placing = placing or set()  # Workspaces that wait for capacity and never place
        self.lose = lose or {}  # Workspace → reason: lost right after it runs
        self.answer_releases = answer_releases  # False: a teardown never answers (the process dies first)
        self.placed: list[str] = []
        self.released: list[tuple[str, str]] = []
        self.admissions: list[dict[str, Any]] = []
        self.answers: list[tuple[int, str, Any]] = []
        self.aborted: list[int] = []
        self.turn_state: dict[int, str] = {}
        self.document = EXAMPLE

    def answer(self, action: run.Action) -> list[run.Input]:
        if isinstance(action, run.PlaceWorkspace):
            self.placed.append(action.path)
            uid = f"uid-{action.path}-{len(self.placed)}"
            out: list[run.Input] = [run.FromWorkspace(ws.Saved(action.path, ws.Restored(False, uid)))]
            if action.path in self.placing:
                out += [run.FromWorkspace(ws.PlacingLine(action.path, "node", "0/1 nodes are available", WALL0)),
                        run.FromWorkspace(ws.Waiting(action.path, ws.WaitEntry("node", "0/1 nodes", WALL0)))]
                return out
            out += [run.FromWorkspace(ws.Saved(action.path, ws.Restored(True, uid))),
                    run.FromWorkspace(ws.Running(action.path, {"app": f"/work/app/{action.path}"}, "http://h"))]
            if action.path in self.lose:
                out.append(run.FromWorkspace(ws.Lost(action.path, self.lose[action.path])))
            return out
        if isinstance(action, run.ReleaseWorkspace):
            self.released.append((action.path, action.why))
            return [run.FromWorkspace(ws.Released(action.path, deleted=True))] if self.answer_releases else []
        if isinstance(action, run.ToAgent):
            return self.seat(action.message)
        return []

    def seat(self, message: seat.ToSeat) -> list[run.Input]:
        turn = message.turn_id
        if isinstance(message, (seat.StartTurn, seat.ReadKills)):
            return [kills_read(turn, ())]
        if isinstance(message, seat.Admit):
            self.admissions.append(admission_body(message.admission))
            if turn not in self.turn_state:  # a nudge repeats no prompt: the Turn's first admission told
                self.turn_state[turn] = next(s for s, d in WORKFLOW_STATES(self).items()
                                                    if message.admission.message.endswith(d))
            state = self.turn_state[turn]
            pick = self.behaviour(state, turn)
            out = [accepted(turn)]
            if pick is None:
                return [*out, settled(turn, False)]
            if pick.startswith("fault:"):
                return [*out, turn_fault(turn, pick.removeprefix("fault:"))]
            return [*out, picked(turn, f"call-{turn}", pick)]
        if isinstance(message, seat.AnswerPick):
            self.answers.append((turn, message.call_id, message.answer))
        if isinstance(message, seat.AbortTurn):
            self.aborted.append(turn)
        return []


def WORKFLOW_STATES(world: World) -> dict[str, str]:
    return {name: s.turn.prompt for name, s in load_workflow(world.document).states.items() if s.turn}


class Drive:
    def __init__(self, text: str = EXAMPLE, world: World | None = None, run_id: str = "run-1") -> None:
        self.world = world or World()
        self.world.document = text
        doc = read_document(text)
        assert isinstance(doc, dict)
        self.core = RunCore(run_id, load_workflow(text), doc, instance_harness="http://instance")
        self.now = 0.0
        self.feed: list[FeedEvent] = []
        self.saved: list[dict[str, Any]] = []  # every blob persisted, in order
        self.persists: list[run.Save] = []
        self.finished: run.Finished | None = None
        self.queue: deque[run.Input] = deque()

    def step(self, event: run.Input) -> run.RunStep:
        step = self.core.step(event, self.now, WALL0 + self.now)
        self._take(step)
        return step

    def _take(self, step: run.RunStep) -> None:
        self.feed.extend(step.reports)
        for action in step.actions:
            if isinstance(action, run.Save):
                self.persists.append(action)
                self.saved.append(json.loads(json.dumps(self.core.snapshot())))
            elif isinstance(action, run.Finished):
                self.finished = action
            else:
                self.queue.extend(self.world.answer(action))

    def run(self, first: run.Input | None = START, *, limit: int = 500) -> None:
        if first is not None:
            self.queue.append(first)
        for _ in range(limit):
            if not self.queue:
                return
            self.step(self.queue.popleft())
        raise AssertionError("the run did not settle")

    def at(self, seconds: float) -> None:
        self.now = seconds
        self.queue.append(run.RunTick())
        self.run(None)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.feed]
