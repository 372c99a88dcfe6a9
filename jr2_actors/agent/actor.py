"""AgentActor: one Agent seat, a thin shell over `TurnCore` (DESIGN.md, ADR-0062).

The protocol with the run, its parent, is `agent/messages.py`'s (its table is there).

- **The admission waits for its read, and nobody blocks.** `StartTurn` makes the seat read the
  Harness's `/memory-kills` (5 s in total, ADR-0062) and tell the run what it read: `KillsRead.read`
  is the list, or None when the read could not tell — failed or out of time, never an empty list —
  with `problem` saying why and `source` naming the Harness (the run logs one line per Harness when its
  reads start to fail; the seat logs none). A Menu-only seat (`in_workspace=False`) reads nothing:
  `asked=False`. The run raises its notices, persists if its ledger changed, and only then tells
  `Admit(turn_id, body)`; the seat posts that body (a draining Harness's 503 is sent again within
  30 s; its answer is awaited as long as the Harness answers `/healthz`) and reads the Submission's
  updates stream.
- **One Turn, several admissions.** A Submission that settles `completed`/`aborted` is `Settled`; the
  Turn stays open. A nudge, a wake or the re-admission after a cut is another `Admit` of the same Turn,
  its body saying `kept: true`; a Harness that holds no such conversation answers 404 `kept: false`,
  reported as `NotKept` — its own outcome, not a fault — and the run admits the Turn again.
- **The run ends a Turn.** `AbortTurn` stops the stream reader (an in-flight long-poll is cut) and
  drops everything the Turn says later, then posts the abort (after the admission, if one is in
  flight) and reports `TurnAborted` once. `EndTurn` ends it with the run's own fault — the Workspace's
  `memory limit (OOMKilled, limit …)` when a kernel kill ended the Harness, which a seat cannot see —
  and posts nothing. `TurnFault.cause` tells a lost conversation (`lost`) from a failed Submission
  (`settled`), a failed admission (`refused`), an unreadable stream (`stream`) and the run's end (`ended`).
- A pick's answer from the run (`AnswerPick`) is posted only for a pick of that Turn still waiting;
  one that fails is `AnswerFailed` — reported even once a new Turn replaced its own — and the seat aborts
  the Submission whose call waits for it. A stopped seat reports nothing.
- **One Submission at a time per conversation** (CONTRACTS.md §3, issue 16). After an `over: true` answer
  the Submission runs on until the model stops, and an aborted one until its abort settles; a
  `StartTurn` for that conversation is held meanwhile — its read of the list, then its admission — while
  the previous Turn is read on (its reports still go to the run, which drops a left Turn's). Past
  `PREVIOUS_SETTLE_SECONDS` the seat aborts it, and as long again later the held Turn goes on. A
  restored Turn (`abort_first`) cannot read its old stream: its admission, like every `kept: true` one,
  takes a 409 as "not yet" (the client sends it again, bounded).
- **No Submission the run no longer wants is left running.** An admission that failed after it may
  have reached the Harness is followed by an abort, and the conversation's next Turn aborts first; one
  answered after the seat stopped is aborted by its job; the seat's stop cuts an admission in flight
  (which waits as long as the Harness is alive).

Metrics (issue 11): every memory-kill read and every admission is counted by outcome in the run's
`Telemetry` as its result comes back to the seat (a Turn the seat has left included).

The long-poll blocks, so it runs on a reader thread of the seat's own; every other call runs on the
shared pool, and a job that fails unexpectedly is reported like a failed call, never left in an unread
future. Harness clients come from `HarnessClients` (one `requests.Session` per Harness) and use the
seat's clock and timers.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Any

import requests

from jr2_actors.agent import core as turn
from jr2_actors.agent import jobs
from jr2_actors.agent.core import AbortTurn, Admit, AnswerPick, EndTurn, ReadKills, StartTurn
from jr2_actors.agent.jobs import (
    AbortDone,
    AdmitDone,
    AnswerDone,
    KillsDone,
    ReadDone,
    ReadDue,
    ReadJob,
    SettleDue,
    abort_unwanted,
    log_escaped,
    outcome_of,
)
from jr2_actors.agent.messages import KillsRead, TurnAborted, TurnId
from jr2_actors.harness import metrics as harness_metrics
from jr2_actors.harness.client import HarnessClient, HarnessClients
from jr2_actors.harness.errors import (
    HARNESS_ERRORS,
    ConversationNotKept,
    HarnessUnreachable,
)
from jr2_actors.harness.memory_kills import MemoryKillListError, MemoryKillRead
from jr2_actors.harness.metrics import HarnessTelemetry
from jr2_actors.net.cut import Cut
from jr2_actors.shell import Recipient, Shell, Timers, logs, tell_quietly
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.values.constants import AGENT_STOP_SECONDS, PREVIOUS_SETTLE_SECONDS

log = logging.getLogger(__name__)
MAX_ALLOWED = 256


@dataclass
class _Turn:
    core: turn.TurnCore
    harness: HarnessClient
    stream_url: str = ""
    read_seq: int = 0  # the read (or timed read) the Turn waits for; anything older is dropped
    cut: Cut | None = None
    admitting: bool = False
    admit_cut: Cut | None = None  # ends the admission in flight when the seat stops
    abort_when_admitted: bool = False
    abort_first: bool = False  # restored: its old Submission was aborted first; a 409 is "not yet"
    held: StartTurn | None = None  # its start waits for the previous Submission of its conversation to settle
    settle_aborted: bool = False  # as the previous Turn, the seat aborted its Submission for taking too long

    @property
    def turn_id(self) -> TurnId:
        return self.core.turn_id


class AgentActor(Shell):
    log_key = "agent"

    def __init__(self, agent: str, *, parent: Recipient, pool: Executor, harnesses: HarnessClients | None = None,
                 clock: Clock | None = None, timers: Timers | None = None,
                 telemetry: HarnessTelemetry | None = None, harness_session: requests.Session | None = None) -> None:
        """`harness_session`: the process's one (`harness.client.shared_session`); the seat leaves it open."""
        super().__init__(telemetry=telemetry)
        self.metrics = harness_metrics.OFF if telemetry is None else telemetry.harness
        self._harness_session = harness_session
        self.agent = agent
        self.parent = parent
        self.name = agent
        self.pool = pool
        self.clock = clock or SystemClock()
        self._given_timers = timers
        self._given_harnesses = harnesses
        self._timers: Timers | None = None
        self._harnesses: HarnessClients | None = None
        self._turn: _Turn | None = None
        # The seat's previous Turn of the same conversation while its Submission may still run: the current
        # Turn's start is held until it settled (CONTRACTS.md §3: one Submission at a time).
        self._previous: _Turn | None = None
        self._unsure: set[str] = set()  # conversations whose last admission failed after it may have arrived
        self._reads: queue.Queue[ReadJob | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read_loop, name=f"jr2-agent-{agent}", daemon=True)

    def started(self) -> None:
        self._timers = self._given_timers or Timers(self.clock, name=f"jr2-agent-{self.agent}-timers")
        self._harnesses = self._given_harnesses or HarnessClients(clock=self.clock, timers=self._timers,
                                                                  session=self._harness_session)
        self._reader.start()

    def cleanup(self) -> None:
        for t in (self._turn, self._previous):
            if t is not None:
                self._stop_reading(t)
                if t.admit_cut is not None:
                    t.admit_cut.fire()  # an admission waiting on a live Harness ends with the seat
        self._reads.put(None)
        if self._reader.is_alive() and threading.current_thread() is not self._reader:
            self._reader.join(AGENT_STOP_SECONDS)
        if self._given_harnesses is None and self._harnesses is not None:
            self._harnesses.close()
        if self._given_timers is None and self._timers is not None:
            self._timers.stop()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, StartTurn):
            self._start(message)
        elif isinstance(message, ReadKills):
            t = self._current(message.turn_id, message)
            if t is not None and t.held is None:
                self._read_kills(t.turn_id, t.harness)
        elif isinstance(message, Admit):
            self._admit(message)
        elif isinstance(message, AnswerPick):
            t = self._current(message.turn_id, message)
            if t is not None:
                self._apply(t, t.core.step(turn.Answering(message.call_id, message.over, message.answer)))
        elif isinstance(message, AbortTurn):
            self._abort(message)
        elif isinstance(message, EndTurn):
            t = self._current(message.turn_id, message)
            if t is not None:
                self._stop_reading(t)
                self._apply(t, t.core.step(turn.Stop(message.fault)))
        else:
            self._internal(message)
        return None

    # -- the run's messages --------------------------------------------------------------------------

    def _start(self, message: StartTurn) -> None:
        assert self._harnesses is not None
        harness = self._harnesses.get(message.endpoint, message.token)
        new = _Turn(turn.TurnCore(self.agent, message.turn_id, message.conversation_id), harness,
                    abort_first=message.abort_first)
        old, conversation = self._turn, message.conversation_id
        if old is not None and old.core.busy and old.core.conversation_id == conversation \
                and old is not self._previous:
            if old.core.state != "stopping" and not old.core.closing:
                log.warning("agent %s: turn %s starts while turn %s is open; the open one is aborted first",
                            self.agent, message.turn_id, old.turn_id)
                self._abort_quietly(old)
            self._previous = old
            self._arm_settle_bound(old)
        elif old is not None and old.core.busy and old is not self._previous:
            log.warning("agent %s: turn %s starts while turn %s is open; the open one is left unread",
                        self.agent, message.turn_id, old.turn_id)
            self._stop_reading(old)
        self._turn = new
        previous = self._previous
        if previous is not None and previous.core.busy and previous.core.conversation_id == conversation:
            # CONTRACTS.md §3: the next admission waits for the previous Submission's settle — its read of
            # the kill list too, so that read sees what the Submission's last moments left.
            new.held = message
            return
        self._begin(new, message)

    def _begin(self, t: _Turn, message: StartTurn) -> None:
        harness, turn_id = t.harness, t.turn_id
        ref, agent, conversation = self.actor_ref, self.agent, message.conversation_id
        if conversation in self._unsure:
            # An admission of this conversation failed after it may have reached the Harness: what it may have
            # started is aborted before this Turn, as a restored Turn's old Submission is.
            self._unsure.discard(conversation)
            message = replace(message, abort_first=True)
            t.abort_first = True

        def abort_first() -> None:
            try:
                harness.abort(agent, conversation)
            except HARNESS_ERRORS as e:
                log.info("agent %s: nothing aborted before turn %s resumes: %s", agent, turn_id, e)

        if not message.in_workspace:
            if message.abort_first:
                def aborted_then_tell() -> None:
                    abort_first()
                    tell_quietly(ref, KillsDone(turn_id, None, "", asked=False))

                self._submit("the abort before a resumed Turn", aborted_then_tell,
                             lambda problem: KillsDone(turn_id, None, problem, asked=False))
                return
            tell_quietly(self.parent, KillsRead(self.agent, turn_id, None, source=harness.base_url, asked=False))
            return

        self._read_kills(turn_id, harness, before=abort_first if message.abort_first else None)

    def _read_kills(self, turn_id: TurnId, harness: HarnessClient, before: Callable[[], None] | None = None) -> None:
        """The read before an admission (ADR-0062: 5 s in all), on the pool; `before` runs first."""
        ref = self.actor_ref

        def read() -> None:
            if before is not None:
                before()
            try:
                kills: MemoryKillRead | None = harness.memory_kills()
                problem, outcome = "", "read"
            except (*HARNESS_ERRORS, MemoryKillListError) as e:
                kills, problem, outcome = None, str(e), outcome_of(e)
            tell_quietly(ref, KillsDone(turn_id, kills, problem, outcome=outcome))

        self._submit("the memory-kill read", read, lambda problem: KillsDone(turn_id, None, problem))

    def _admit(self, message: Admit) -> None:
        t = self._current(message.turn_id, message)
        if t is None:
            return
        if t.held is not None:
            log.warning("agent %s: an admission of turn %s before its start: dropped", self.agent, t.turn_id)
            return
        step = t.core.step(turn.Admitting(_allowed(message.body)))
        self._apply(t, step)
        if step.note:
            return
        t.admitting = True
        t.admit_cut = cut = Cut()
        harness, core, ref, agent, turn_id = t.harness, t.core, self.actor_ref, self.agent, t.turn_id
        body = dict(message.body)
        # CONTRACTS.md §3: a 409 to an admission into a conversation the Harness holds is "not yet".
        not_yet = body.get("kept") is True or t.abort_first

        def post() -> None:
            try:
                admission = harness.admit(agent, core.conversation_id, body, retry_busy=not_yet, cut=cut)
            except ConversationNotKept as e:
                tell_quietly(ref, AdmitDone(turn_id, turn.AdmitNotKept(e.error), outcome="not_kept"))
            except HARNESS_ERRORS as e:
                reached = isinstance(e, HarnessUnreachable) and e.reached
                tell_quietly(ref, AdmitDone(turn_id, turn.AdmitRefused(str(e)), outcome=outcome_of(e),
                                             reached=reached))
            else:
                if not ref.is_alive():  # the seat stopped meanwhile: nobody wants what it started
                    abort_unwanted(harness, agent, core.conversation_id, turn_id)
                    return
                tell_quietly(ref, AdmitDone(turn_id, turn.Admitted(admission.submission_id, admission.offset),
                                             admission.stream_url, outcome="admitted"))

        self._submit("the admission", post, lambda problem: AdmitDone(turn_id, turn.AdmitRefused(problem)))

    def _abort(self, message: AbortTurn) -> None:
        t = self._current(message.turn_id, message)
        if t is None:
            return
        self._stop_reading(t)  # before the abort leaves: nothing the stream says later is reported
        t.core.step(turn.Stop())
        if t.admitting:
            t.abort_when_admitted = True  # posted once the admission's answer is in
        elif t.core.state == "stopping":
            self._post_abort(t)
        else:
            tell_quietly(self.parent, TurnAborted(self.agent, t.turn_id, False))

    def _abort_quietly(self, t: _Turn) -> None:
        """The seat's own abort of a Turn's Submission (the run did not ask: it hears no TurnAborted)."""
        self._stop_reading(t)
        t.core.step(turn.Stop())
        if t.admitting:
            t.abort_when_admitted = True
        elif t.core.state == "stopping":
            self._post_abort(t, asked=False)

    def _post_abort(self, t: _Turn, *, asked: bool = True) -> None:
        harness, conversation, ref, agent, turn_id = t.harness, t.core.conversation_id, self.actor_ref, self.agent, \
            t.turn_id

        def post() -> None:
            try:
                aborted, problem = harness.abort(agent, conversation), ""
            except HARNESS_ERRORS as e:
                aborted, problem = False, str(e)
            tell_quietly(ref, AbortDone(turn_id, aborted, problem, asked))

        self._submit("the abort", post, lambda problem: AbortDone(turn_id, False, problem, asked))

    def _arm_settle_bound(self, t: _Turn) -> None:
        assert self._timers is not None
        due, ref = SettleDue(t.turn_id), self.actor_ref
        self._timers.schedule(self.clock.monotonic() + PREVIOUS_SETTLE_SECONDS, lambda: tell_quietly(ref, due))

    def _settle_overdue(self, t: _Turn) -> None:
        """The previous Submission did not settle in time: it is aborted, and given as long again for the
        abort's settle; past that the held Turn goes on (its admission's 409 is "not yet", bounded)."""
        if not t.settle_aborted:
            t.settle_aborted = True
            log.warning("agent %s: turn %s's Submission has not settled in %gs; it is aborted before turn %s",
                        self.agent, t.turn_id, PREVIOUS_SETTLE_SECONDS, self._turn.turn_id if self._turn else "-")
            if t.core.state != "stopping":
                self._abort_quietly(t)
            self._arm_settle_bound(t)
            return
        log.warning("agent %s: turn %s's Submission did not settle after its abort; the next turn goes on",
                    self.agent, t.turn_id)
        self._stop_reading(t)
        if t.admit_cut is not None:
            t.admit_cut.fire()  # an admission still unanswered holds a pool thread no longer
        self._previous = None
        self._release_held()

    def _release_held(self) -> None:
        """The previous Submission settled: the held Turn starts (its read of the list, then its admission)."""
        t = self._turn
        if t is None or t.held is None:
            return
        message, t.held = t.held, None
        if not t.core.ended:
            self._begin(t, message)

    # -- results from the pool and the reader --------------------------------------------------------

    def _internal(self, message: Any) -> None:
        if isinstance(message, KillsDone) and message.asked:  # a seat with no kill list read none
            self.metrics.memory_kill_read(message.outcome)
        elif isinstance(message, AdmitDone):
            self.metrics.admission(message.outcome)
        turn_id = getattr(message, "turn_id", None)
        t = next((x for x in (self._turn, self._previous) if x is not None and x.turn_id == turn_id), None)
        if t is None:
            if isinstance(message, AdmitDone) and message.reached:
                log.info("agent %s: turn %s's admission failed after it may have reached the Harness", self.agent,
                         turn_id)
            return  # a result of a Turn the seat has left
        if isinstance(message, KillsDone):
            if not t.core.ended and t is self._turn:
                tell_quietly(self.parent, KillsRead(self.agent, t.turn_id, message.read, message.problem,
                                                    t.harness.base_url, asked=message.asked))
        elif isinstance(message, AdmitDone):
            t.admitting, t.admit_cut = False, None
            if isinstance(message.result, turn.Admitted):
                t.stream_url = message.stream_url
            if t.abort_when_admitted:
                t.abort_when_admitted = False
                self._apply(t, t.core.step(message.result))  # stopping: it takes the Submission's id, or ends
                asked = t is self._turn and not t.settle_aborted  # the run's AbortTurn, not the seat's own
                if isinstance(message.result, turn.Admitted) or message.reached:
                    self._post_abort(t, asked=asked)
                elif asked:
                    tell_quietly(self.parent, TurnAborted(self.agent, t.turn_id, False))
                return
            self._apply(t, t.core.step(message.result))
            if isinstance(message.result, turn.AdmitRefused) and message.reached:
                # Issue 16: it may have reached the Harness and started a Submission the run, having heard the
                # refusal, no longer wants. Abort it now, and again before the conversation's next Turn (a
                # Harness slow to seat it may start it after this abort).
                self._post_abort(t, asked=False)
                self._unsure.add(t.core.conversation_id)
        elif isinstance(message, ReadDone):
            if message.seq == t.read_seq:
                self._apply(t, t.core.step(message.result))
        elif isinstance(message, ReadDue):
            if message.seq == t.read_seq and t.core.state in ("reading", "stopping"):
                self._read(t, message.offset)
        elif isinstance(message, AnswerDone):
            self._apply(t, t.core.step(message.result))
        elif isinstance(message, AbortDone):
            if message.asked:
                tell_quietly(self.parent, TurnAborted(self.agent, t.turn_id, message.aborted, message.problem))
            if t.core.state == "stopping":
                self._apply(t, t.core.step(turn.AbortAnswered(message.aborted)))
        elif isinstance(message, SettleDue) and t is self._previous and t.core.busy:
            self._settle_overdue(t)

    def _apply(self, t: _Turn, step: turn.TurnStep) -> None:
        if step.note:
            log.warning("agent %s turn %s: %s", self.agent, t.turn_id, step.note)
        for report in step.reports:
            tell_quietly(self.parent, report)
        for action in step.actions:
            if isinstance(action, turn.ReadUpdates):
                if action.after > 0:
                    self._read_later(t, action)
                else:
                    self._read(t, action.offset)
            elif isinstance(action, turn.PostAnswer):
                self._post_answer(t, action)
            elif isinstance(action, turn.AbortSubmission):
                self._post_abort(t, asked=False)
        if t.core.state == "ended":
            self._stop_reading(t)  # nothing the stream says after the Turn's end is read
        if t is self._previous and not t.core.busy:
            self._previous = None  # its Submission settled: the held Turn may start
            self._release_held()

    def _read_later(self, t: _Turn, action: turn.ReadUpdates) -> None:
        assert self._timers is not None
        t.read_seq += 1
        due, ref = ReadDue(t.turn_id, t.read_seq, action.offset), self.actor_ref
        self._timers.schedule(self.clock.monotonic() + action.after, lambda: tell_quietly(ref, due))

    def _read(self, t: _Turn, offset: str) -> None:
        t.read_seq += 1
        t.cut = Cut()
        self._reads.put(ReadJob(t.turn_id, t.read_seq, t.harness, t.stream_url, offset, t.cut))

    def _stop_reading(self, t: _Turn) -> None:
        t.read_seq += 1  # whatever is in flight, or due on a timer, is dropped when it comes back
        if t.cut is not None:
            t.cut.fire()

    def _post_answer(self, t: _Turn, action: turn.PostAnswer) -> None:
        harness, conversation, ref, agent, turn_id = t.harness, t.core.conversation_id, self.actor_ref, self.agent, \
            t.turn_id

        def post() -> None:
            try:
                harness.answer(agent, conversation, action.call_id, action.over, action.answer)
            except HARNESS_ERRORS as e:
                tell_quietly(ref, AnswerDone(turn_id, turn.AnswerUndelivered(action.call_id, str(e))))
            else:
                tell_quietly(ref, AnswerDone(turn_id, turn.Answered(action.call_id)))

        self._submit(f"the answer to pick {action.call_id}", post,
                     lambda problem: AnswerDone(turn_id, turn.AnswerUndelivered(action.call_id, problem)))

    def _current(self, turn_id: TurnId, message: object) -> _Turn | None:
        t = self._turn
        if t is None or t.turn_id != turn_id:
            log.info("agent %s: %s for turn %s, which is not the seat's turn: dropped", self.agent,
                     type(message).__name__, turn_id)
            return None
        return t

    def _read_loop(self) -> None:
        jobs.read_loop(self._reads, self.actor_ref, self.agent, self.log_context)

    def _submit(self, what: str, job: Callable[[], None], on_crash: Callable[[str], object]) -> None:
        """Run `job` on the pool; an exception it did not expect becomes the result `on_crash` makes."""
        ref, agent = self.actor_ref, self.agent

        def run() -> None:
            try:
                job()
            except Exception as e:
                log.exception("agent %s: %s failed unexpectedly", agent, what)
                tell_quietly(ref, on_crash(f"{what} failed unexpectedly: {type(e).__name__}: {e}"))

        self.pool.submit(logs.carry(run)).add_done_callback(log_escaped)


def _allowed(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The Allowed picks the admission tells the model (CONTRACTS.md §3: `allowed: [pick…]`)."""
    allowed = body.get("allowed")
    if not isinstance(allowed, list):
        return ()
    return tuple(p for p in allowed[:MAX_ALLOWED] if isinstance(p, str))
