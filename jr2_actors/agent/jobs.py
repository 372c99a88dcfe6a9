"""The seat's work off its own thread: what it hands the shared pool and its reader thread, and the results
they tell it back (`AgentActor` takes each on its thread, and drops one of a Turn it has left).

The long-poll blocks, so it runs on the seat's reader (`read_loop`); every other call is a pool job, and one
that fails unexpectedly is reported like a failed call, never left in an unread future (`log_escaped`).
"""

from __future__ import annotations

import logging
import queue
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import pykka

from jr2_actors.agent import core as turn
from jr2_actors.agent.messages import TurnId
from jr2_actors.harness.client import HarnessClient
from jr2_actors.harness.errors import HARNESS_ERRORS, HarnessError, HarnessProtocolError, HarnessUnreachable
from jr2_actors.harness.memory_kills import MemoryKillListError, MemoryKillRead
from jr2_actors.net.cut import Cut
from jr2_actors.shell import logs, tell_quietly

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KillsDone:
    turn_id: TurnId
    read: MemoryKillRead | None
    problem: str
    asked: bool = True
    outcome: str = "crashed"  # for the metrics: read | error | unreachable | protocol | malformed | crashed


@dataclass(frozen=True)
class AdmitDone:
    turn_id: TurnId
    result: turn.Admitted | turn.AdmitRefused | turn.AdmitNotKept
    stream_url: str = ""
    outcome: str = "crashed"  # for the metrics: admitted | not_kept | error | unreachable | protocol | crashed
    reached: bool = False  # a failed admission that may have reached the Harness (it may start a Submission)


@dataclass(frozen=True)
class ReadDone:
    turn_id: TurnId
    seq: int
    result: turn.Events | turn.StreamLost | turn.StreamFailed


@dataclass(frozen=True)
class ReadDue:
    turn_id: TurnId
    seq: int
    offset: str


@dataclass(frozen=True)
class AnswerDone:
    turn_id: TurnId
    result: turn.Answered | turn.AnswerUndelivered


@dataclass(frozen=True)
class AbortDone:
    turn_id: TurnId
    aborted: bool
    problem: str
    asked: bool = True  # the run's AbortTurn (it hears TurnAborted), else the seat's own


@dataclass(frozen=True)
class SettleDue:
    """The previous Turn's Submission has had `PREVIOUS_SETTLE_SECONDS` to settle."""

    turn_id: TurnId


@dataclass(frozen=True)
class ReadJob:
    turn_id: TurnId
    seq: int
    harness: HarnessClient
    url: str
    offset: str
    cut: Cut


def read_loop(reads: queue.Queue[ReadJob | None], ref: pykka.ActorRef[Any], agent: str,
              context: dict[str, str]) -> None:
    """The long-poll reader: one read at a time, each result told to the actor."""
    logs.bind(context)  # started by the actor once its context is bound
    while True:
        job = reads.get()
        if job is None:
            return
        result: turn.Events | turn.StreamLost | turn.StreamFailed
        try:
            updates = job.harness.updates(job.url, job.offset, cut=job.cut)
        except HarnessError as e:
            text = f"{e.status}: {e.error}"
            result = turn.StreamLost(text) if e.status == 404 else turn.StreamFailed(text)
        except (HarnessUnreachable, HarnessProtocolError) as e:
            result = turn.StreamFailed(str(e))
        except Exception as e:  # our bug: said as a failed read, so the Turn never waits on it
            log.exception("agent %s: reading the updates stream failed unexpectedly", agent)
            result = turn.StreamFailed(f"{type(e).__name__}: {e}")
        else:
            result = turn.Events(updates.events, updates.next_offset)
        tell_quietly(ref, ReadDone(job.turn_id, job.seq, result))


def abort_unwanted(harness: HarnessClient, agent: str, conversation: str, turn_id: TurnId) -> None:
    """Abort a Submission admitted after its seat stopped (nobody reads it; the idle GC would be its end)."""
    try:
        harness.abort(agent, conversation)
    except HARNESS_ERRORS as e:
        log.info("agent %s: turn %s was admitted after its seat stopped; its abort failed: %s", agent, turn_id, e)


def outcome_of(e: Exception) -> str:
    """A failed Harness call's outcome label: what kind of failure, never its words."""
    if isinstance(e, MemoryKillListError):
        return "malformed"
    if isinstance(e, HarnessUnreachable):
        return "unreachable"
    if isinstance(e, HarnessProtocolError):
        return "protocol"
    return "error"  # the Harness answered with an error


def log_escaped(future: Future[None]) -> None:
    if future.cancelled():  # the stop cancelled it before it ran: nothing went wrong
        return
    error = future.exception()
    if error is not None:
        log.error("an agent job raised past its own handler: %r", error)
