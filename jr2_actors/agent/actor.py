"""AgentActor: one Agent seat, a thin shell over `TurnCore` (DESIGN.md, ADR-0062); the protocol with the
run, its parent, is `agent/messages.py`'s.

- **The admission waits for its read, and nobody blocks.** `StartTurn` reads the Harness's `/memory-kills`
  (5 s in all) and tells the run `KillsRead` (None: could not tell, never an empty list; a Menu-only seat
  reads nothing, `asked=False`). The run raises its notices, persists, then tells `Admit(turn_id, body)`;
  the seat posts it (a 503 or a 429 is sent again within 30 s; the answer is awaited while the Harness
  answers `/healthz`) and reads the Submission's updates stream.
- **One Turn, several admissions.** A settled Submission is `Settled`; the Turn stays open. A nudge, a wake
  or a re-admission is another `Admit` of the same Turn, `kept: true`; 404 `kept: false` is `NotKept`.
- **An admission whose fate is unknown** (a reset, a cut probe, a 5xx) is resolved, not fatal: the seat
  aborts (`aborted` says the Harness took it) and reports `AdmissionUnsure`; the run re-admits.
- **A restart is judged against the Turn** (`CheckHarness` → `HarnessJudged`): the Harness's boot id in
  the admission's answer against the one `/healthz` gives now (asked again for 30 s while the new
  container starts). Only a Submission of the process that ended is cut; the Turn is then idle for its
  re-admission. A held Turn's previous Submission of an ended process settles nothing: it waits no more.
- **The run ends a Turn.** `AbortTurn` stops the reader, drops what the Turn says later, posts the abort
  (after an admission in flight) and reports `TurnAborted` once; `EndTurn` ends it with the run's fault.
- A pick's answer (`AnswerPick`) is posted for a pick still waiting; one that fails is `AnswerFailed`, and
  the seat aborts the Submission whose call waits for it. A stopped seat reports nothing.
- **One Submission at a time per conversation** (CONTRACTS.md §3). A `StartTurn` for a conversation whose
  previous Submission runs on is held (its read, then its admission); past `PREVIOUS_SETTLE_SECONDS` the
  seat aborts it, and as long again later the held Turn goes on. A restored Turn (`abort_first`) aborts
  first; its `kept: true` admission takes a 409 as "not yet" (sent again, bounded).
- **No Submission the run no longer wants is left running**: one answered after the seat stopped is aborted
  by its job; the seat's stop cuts an admission in flight.

Every memory-kill read and admission is counted by outcome in the run's `Telemetry`. The long-poll runs on
the seat's own reader thread; every other call is a job on the shared pool (`jobs.py`).
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
    BootDone,
    KillsDone,
    ReadDone,
    ReadDue,
    ReadJob,
    SettleDue,
    log_escaped,
)
from jr2_actors.agent.messages import AdmissionUnsure, CheckHarness, HarnessJudged, KillsRead, TurnAborted, TurnId
from jr2_actors.harness import metrics as harness_metrics
from jr2_actors.harness.client import HarnessClient, HarnessClients
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
    boot: str = ""  # the Harness process that accepted its newest admission ("" when it did not say)
    judge: bool = False  # a restart was reported while its admission was in flight: judged on its answer
    judge_boot: str | None = None  # the process the probe found answering then

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
                self._read_kills(t)
        elif isinstance(message, Admit):
            self._admit(message)
        elif isinstance(message, AnswerPick):
            t = self._current(message.turn_id, message)
            if t is not None:
                self._apply(t, t.core.step(turn.Answering(message.call_id, message.over, message.answer)))
        elif isinstance(message, AbortTurn):
            self._abort(message)
        elif isinstance(message, CheckHarness):
            t = self._current(message.turn_id, message)
            if t is not None:
                self._probe_boot(t, judge=True)
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
            self._probe_boot(new, judge=False)  # a restart since settles the previous Submission at once
            return
        self._begin(new, message)

    def _begin(self, t: _Turn, message: StartTurn) -> None:
        harness, turn_id, conversation = t.harness, t.turn_id, message.conversation_id
        if conversation in self._unsure:
            # An admission of this conversation failed after it may have reached the Harness: what it may have
            # started is aborted before this Turn, as a restored Turn's old Submission is.
            self._unsure.discard(conversation)
            message = replace(message, abort_first=True)
            t.abort_first = True
        if not message.in_workspace and not message.abort_first:
            tell_quietly(self.parent, KillsRead(self.agent, turn_id, None, source=harness.base_url, asked=False))
            return
        self._read_kills(t, abort_first=message.abort_first, read=message.in_workspace)

    def _read_kills(self, t: _Turn, *, abort_first: bool = False, read: bool = True) -> None:
        """The read before an admission (ADR-0062: 5 s in all), on the pool; an abort first, when asked."""
        turn_id, conversation = t.turn_id, t.core.conversation_id
        self._submit("the memory-kill read", lambda: jobs.read_kills(t.harness, self.actor_ref, self.agent,
                                                                     conversation, turn_id, abort_first, read),
                     lambda problem: KillsDone(turn_id, None, problem, asked=read))

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
        turn_id, body = t.turn_id, dict(message.body)
        # CONTRACTS.md §3: a 409 to an admission into a conversation the Harness holds is "not yet".
        not_yet = body.get("kept") is True or t.abort_first
        self._submit("the admission", lambda: jobs.admission(t.harness, self.actor_ref, self.agent,
                                                             t.core.conversation_id, turn_id, body, not_yet, cut),
                     lambda problem: AdmitDone(turn_id, turn.AdmitRefused(problem)))

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

    def _post_abort(self, t: _Turn, *, asked: bool = True, unsure: bool = False) -> None:
        turn_id, conversation = t.turn_id, t.core.conversation_id
        self._submit("the abort", lambda: jobs.abort(t.harness, self.actor_ref, self.agent, conversation, turn_id,
                                                     asked=asked, unsure=unsure),
                     lambda problem: AbortDone(turn_id, False, problem, asked, unsure))

    def _probe_boot(self, t: _Turn, *, judge: bool) -> None:
        """Ask which Harness process answers now (`BootDone`): to judge a reported restart, or to see whether
        the previous Submission's process is gone."""
        turn_id, ref = t.turn_id, self.actor_ref
        self._submit("the Harness's boot probe", lambda: jobs.boot_probe(t.harness, ref, turn_id, judge=judge),
                     lambda problem: BootDone(turn_id, t.harness.base_url, None, judge))

    def _booted(self, message: BootDone) -> None:
        self._previous_gone(message.endpoint, message.boot)
        t = self._turn
        if not message.judge or t is None or t.turn_id != message.turn_id:
            return
        if t.admitting:
            t.judge, t.judge_boot = True, message.boot  # its answer says which process took it
            return
        self._judge(t, message.boot)

    def _judge(self, t: _Turn, boot: str | None) -> None:
        """ADR-0062: a restart cuts the Turn only if the process that ended held its open Submission. A Harness
        that says no boot ids, or none answering within the bound, cannot be told apart: taken as a cut."""
        core = t.core
        cut = (core.open_submission or core.state == "stopping") and (not boot or not t.boot or t.boot != boot)
        if cut:
            self._stop_reading(t)
            self._apply(t, core.step(turn.Restarted()))
        tell_quietly(self.parent, HarnessJudged(self.agent, t.turn_id, cut and core.state == "idle"))

    def _previous_gone(self, endpoint: str, boot: str | None) -> None:
        """CONTRACTS §3: a restart settled the old process's Submissions — the held Turn waits no longer."""
        prev = self._previous
        if prev is None or not prev.boot or not boot or boot == prev.boot or prev.harness.base_url != endpoint:
            return
        self._stop_reading(prev)
        if prev.core.state in ("idle", "reading", "stopping") or prev.core.open_submission:
            prev.core.step(turn.Restarted())
        self._previous = None
        self._release_held()

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
        if isinstance(message, BootDone):
            self._booted(message)
            return
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
                                                    t.harness.base_url, asked=message.asked,
                                                    found_running=message.found_running))
        elif isinstance(message, AdmitDone):
            t.admitting, t.admit_cut = False, None
            if isinstance(message.result, turn.Admitted):
                t.stream_url, t.boot = message.stream_url, message.boot_id
            if t.abort_when_admitted:
                t.abort_when_admitted = False
                self._apply(t, t.core.step(message.result))  # stopping: it takes the Submission's id, or ends
                asked = t is self._turn and not t.settle_aborted  # the run's AbortTurn, not the seat's own
                if isinstance(message.result, turn.Admitted) or message.reached:
                    self._post_abort(t, asked=asked)
                elif asked:
                    tell_quietly(self.parent, TurnAborted(self.agent, t.turn_id, False))
                return
            if isinstance(message.result, turn.AdmitRefused) and message.reached:
                # It may have reached the Harness and started a Submission: an abort finds out (`aborted`: it
                # ran, so the Harness took it), and the run admits the Turn again. Its conversation's next Turn
                # aborts first too (a Harness slow to seat it may start it after this abort).
                self._apply(t, t.core.step(turn.AdmitUnsure(message.result.message)))
                self._post_abort(t, asked=False, unsure=True)
                self._unsure.add(t.core.conversation_id)
            else:
                self._apply(t, t.core.step(message.result))
            if t.judge:
                t.judge = False
                self._judge(t, t.judge_boot)
        elif isinstance(message, ReadDone):
            if message.seq == t.read_seq:
                self._apply(t, t.core.step(message.result))
        elif isinstance(message, ReadDue):
            if message.seq == t.read_seq and t.core.state in ("reading", "stopping"):
                self._read(t, message.offset)
        elif isinstance(message, AnswerDone):
            self._apply(t, t.core.step(message.result))
        elif isinstance(message, AbortDone):
            if message.unsure and t is self._turn and not t.core.ended:
                tell_quietly(self.parent, AdmissionUnsure(self.agent, t.turn_id, message.aborted, message.problem))
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
        turn_id, conversation = t.turn_id, t.core.conversation_id
        self._submit(f"the answer to pick {action.call_id}",
                     lambda: jobs.answer(t.harness, self.actor_ref, self.agent, conversation, turn_id, action),
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
