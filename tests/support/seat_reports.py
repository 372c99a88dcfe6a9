"""A seat's reports as the run takes them (`run.FromSeat`, wrapped once), for the tests that drive the run's
core by hand. `agent` is the seat's name; the run's core goes by the Turn id (a late report of a Turn it
has left never reaches the Turn), so a test names the agent only where it cares."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jr2_actors.agent import messages as seat
from jr2_actors.harness.memory_kills import MemoryKill, MemoryKillRead
from jr2_actors.run import messages as run

AGENT = "coder"


def kills_read(turn: int, kills: Iterable[MemoryKill] | None, problem: str = "", *,
               agent: str = AGENT, found_running: bool | None = None) -> run.FromSeat:
    """The read before an admission; `kills` None: it could not tell. `found_running`: what the abort before
    it found (a restored Turn's)."""
    read = None if kills is None else MemoryKillRead(tuple(kills), ())
    return run.FromSeat(seat.KillsRead(agent, turn, read, problem, found_running=found_running))


def accepted(turn: int, *, agent: str = AGENT) -> run.FromSeat:
    return run.FromSeat(seat.Accepted(agent, turn, f"s-{turn}"))


def not_kept(turn: int, *, agent: str = AGENT) -> run.FromSeat:
    return run.FromSeat(seat.NotKept(agent, turn, f"conversation-{agent}", "not kept"))


def picked(turn: int, call_id: str, pick: str, args: Mapping[str, Any] | None = None, *,
           agent: str = AGENT) -> run.FromSeat:
    return run.FromSeat(seat.Picked(agent, turn, call_id, pick, dict(args or {})))


def guard_kill(turn: int, kill_id: str | None, peak: str | None, limit: str | None, place: str = "", *,
               agent: str = AGENT) -> run.FromSeat:
    return run.FromSeat(seat.GuardKill(agent, turn, f"conversation-{agent}", kill_id, place, peak, limit))


def said(turn: int, text: str, *, agent: str = AGENT) -> run.FromSeat:
    return run.FromSeat(seat.Said(agent, turn, text))


def settled(turn: int, picked: bool, *, agent: str = AGENT) -> run.FromSeat:
    """The Submission settled `completed` (`picked`: a pick was made in it)."""
    return run.FromSeat(seat.Settled(agent, turn, "completed", picked))


def turn_fault(turn: int, reason: str, cause: seat.FaultCause = "settled", *, agent: str = AGENT) -> run.FromSeat:
    return run.FromSeat(seat.TurnFault(agent, turn, cause, reason))


def answer_failed(turn: int, call_id: str, problem: str, *, agent: str = AGENT) -> run.FromSeat:
    return run.FromSeat(seat.AnswerFailed(agent, turn, call_id, problem))


def judged(turn: int, cut: bool, *, agent: str = AGENT) -> run.FromSeat:
    return run.FromSeat(seat.HarnessJudged(agent, turn, cut))


def unsure(turn: int, accepted: bool, problem: str = "connection reset", *, agent: str = AGENT) -> run.FromSeat:
    return run.FromSeat(seat.AdmissionUnsure(agent, turn, accepted, problem))
