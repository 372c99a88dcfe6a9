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

from jr2_actors.agent import messages as turn
from jr2_actors.agent.messages import (
    AbortDone,
    AbortJob,
    AdmitDone,
    AnswerDone,
    AnswerJob,
    BootDone,
    KillsDone,
    ReadDone,
    TurnId,
)
from jr2_actors.harness.admission import Admission
from jr2_actors.harness.client import HarnessClient
from jr2_actors.harness.errors import (
    HARNESS_ERRORS,
    ConversationNotKept,
    HarnessError,
    HarnessProtocolError,
    HarnessUnreachable,
)
from jr2_actors.harness.memory_kills import MemoryKillListError, MemoryKillRead
from jr2_actors.net.cut import Cut
from jr2_actors.shell import logs, tell_quietly
from jr2_actors.values.constants import ADMISSION_DRAIN_SECONDS

# An admission answered with one of these may have started a Submission before it failed (a Harness's own
# fault, a gateway between): its fate is unknown, found out with an abort, never a fault of the run.
UNSURE_STATUSES = frozenset({500, 502, 504})

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamRead:
    """One long-poll for the reader thread."""

    turn_id: TurnId
    seq: int
    harness: HarnessClient
    url: str
    offset: str
    cut: Cut


def read_loop(reads: queue.Queue[StreamRead | None], ref: pykka.ActorRef[Any], agent: str,
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


def admission(harness: HarnessClient, ref: pykka.ActorRef[Any], agent: str, conversation: str, turn_id: TurnId,
              admission: Admission, not_yet: bool, cut: Cut) -> None:
    """Post an admission; its result is an `AdmitDone` told to the seat (an unwanted one is aborted)."""
    try:
        answer = harness.admit(agent, conversation, admission, retry_busy=not_yet, cut=cut)
    except ConversationNotKept as e:
        tell_quietly(ref, AdmitDone(turn_id, turn.AdmitNotKept(e.error), outcome="not_kept"))
    except HARNESS_ERRORS as e:
        reached = (isinstance(e, HarnessUnreachable) and e.reached) or (
            isinstance(e, HarnessError) and e.status in UNSURE_STATUSES)
        tell_quietly(ref, AdmitDone(turn_id, turn.AdmitRefused(str(e)), outcome=outcome_of(e), reached=reached))
    else:
        if not ref.is_alive():  # the seat stopped meanwhile: nobody wants what it started
            abort_unwanted(harness, agent, conversation, turn_id)
            return
        tell_quietly(ref, AdmitDone(turn_id, turn.Admitted(answer.submission_id, answer.offset), answer.stream_url,
                                    outcome="admitted", boot_id=answer.boot_id))


def read_kills(harness: HarnessClient, ref: pykka.ActorRef[Any], agent: str, conversation: str, turn_id: TurnId,
               abort_first: bool, read: bool) -> None:
    """The read before an admission (`read`), after an abort of what the conversation may still run
    (`abort_first`: a restored Turn, or one after an admission whose fate was unknown)."""
    found: bool | None = None
    if abort_first:
        try:
            found = harness.abort(agent, conversation)
        except HARNESS_ERRORS as e:
            log.info("agent %s: nothing aborted before turn %s resumes: %s", agent, turn_id, e)
    if not read:
        tell_quietly(ref, KillsDone(turn_id, None, "", asked=False, found_running=found))
        return
    try:
        kills: MemoryKillRead | None = harness.memory_kills()
        problem, outcome = "", "read"
    except (*HARNESS_ERRORS, MemoryKillListError) as e:
        kills, problem, outcome = None, str(e), outcome_of(e)
    tell_quietly(ref, KillsDone(turn_id, kills, problem, outcome=outcome, found_running=found))


def abort(harness: HarnessClient, ref: pykka.ActorRef[Any], agent: str, conversation: str, turn_id: TurnId,
          job: AbortJob) -> None:
    try:
        aborted, problem = harness.abort(agent, conversation), ""
    except HARNESS_ERRORS as e:
        aborted, problem = False, str(e)
    tell_quietly(ref, AbortDone(turn_id, aborted, problem, job.asked, job.unsure))


def answer(harness: HarnessClient, ref: pykka.ActorRef[Any], agent: str, conversation: str, turn_id: TurnId,
           action: AnswerJob) -> None:
    try:
        harness.answer(agent, conversation, action.call_id, action.over, action.answer)
    except HARNESS_ERRORS as e:
        tell_quietly(ref, AnswerDone(turn_id, turn.AnswerUndelivered(action.call_id, str(e))))
    else:
        tell_quietly(ref, AnswerDone(turn_id, turn.Answered(action.call_id)))


def boot_probe(harness: HarnessClient, ref: pykka.ActorRef[Any], turn_id: TurnId, *, judge: bool) -> None:
    """Which Harness process answers now. A judgment (`judge`) asks again while the new container does not
    listen yet or drains, for up to `ADMISSION_DRAIN_SECONDS` (ADR-0062's 30 s); the seat's own look asks once."""
    boot = harness.boot(within=ADMISSION_DRAIN_SECONDS if judge else 0.0)
    tell_quietly(ref, BootDone(turn_id, boot, judge))


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
