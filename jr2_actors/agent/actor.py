"""AgentActor: one Agent seat, a thin shell over `SeatCore` (DESIGN.md, ADR-0062).

The seat's decisions are `seat_core.py`'s, each Turn's `core.py`'s; the protocol with the run, its parent,
is `messages.py`'s. This shell runs the jobs the core asks for — the Harness's calls on the shared pool,
the stream's long-polls on the seat's own reader thread (they block), the settle bound and a read's pause
on the seat's timers — and feeds their results back to the core, on the actor's thread. It keeps a Harness
client (`HarnessClients`, on the process's one session) and the cuts of the calls in flight for each Turn
the core keeps; a stopped seat cuts them all and reports nothing more.

Every memory-kill read and admission is counted by outcome in the run's `Telemetry` as its result comes back
(a Turn the seat has left included). A job that fails unexpectedly is reported like a failed call, never
left in an unread future.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import requests

from jr2_actors.agent import jobs
from jr2_actors.agent import messages as turn
from jr2_actors.agent import metrics as harness_metrics
from jr2_actors.agent.messages import (
    AbortDone,
    AbortJob,
    AdmitDone,
    AdmitJob,
    AnswerDone,
    AnswerJob,
    ArmSettle,
    BootDone,
    CutAdmission,
    CutRead,
    KillsDone,
    ProbeJob,
    ReadDue,
    ReadJob,
    ReadKillsJob,
    SeatJob,
    SettleDue,
    StartTurn,
    TurnId,
)
from jr2_actors.agent.metrics import HarnessTelemetry
from jr2_actors.agent.seat_core import SEAT_INPUTS, SeatCore
from jr2_actors.harness.client import HarnessClient, HarnessClients
from jr2_actors.net.cut import Cut
from jr2_actors.shell import Recipient, Shell, Timers, logs, tell_quietly
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.values.constants import AGENT_STOP_SECONDS, PREVIOUS_SETTLE_SECONDS

log = logging.getLogger(__name__)


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
        self.core = SeatCore(agent)
        self._given_timers = timers
        self._given_harnesses = harnesses
        self._timers: Timers | None = None
        self._harnesses: HarnessClients | None = None
        self._clients: dict[TurnId, tuple[HarnessClient, str]] = {}  # each kept Turn's Harness and conversation
        self._read_cuts: dict[TurnId, Cut] = {}
        self._admit_cuts: dict[TurnId, Cut] = {}  # an admission in flight ends with the seat
        self._reads: queue.Queue[jobs.StreamRead | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read_loop, name=f"jr2-agent-{agent}", daemon=True)

    def started(self) -> None:
        self._timers = self._given_timers or Timers(self.clock, name=f"jr2-agent-{self.agent}-timers")
        self._harnesses = self._given_harnesses or HarnessClients(clock=self.clock, timers=self._timers,
                                                                  session=self._harness_session)
        self._reader.start()

    def cleanup(self) -> None:
        for cut in (*self._read_cuts.values(), *self._admit_cuts.values()):
            cut.fire()  # a long-poll, and an admission waiting on a live Harness, end with the seat
        self._reads.put(None)
        if self._reader.is_alive() and threading.current_thread() is not self._reader:
            self._reader.join(AGENT_STOP_SECONDS)
        if self._given_harnesses is None and self._harnesses is not None:
            self._harnesses.close()
        if self._given_timers is None and self._timers is not None:
            self._timers.stop()

    def on_receive(self, message: Any) -> Any:
        if not isinstance(message, SEAT_INPUTS):
            return None  # not the seat's vocabulary (an `ask` used as a barrier)
        if isinstance(message, StartTurn):
            assert self._harnesses is not None
            self._clients[message.turn_id] = (self._harnesses.get(message.endpoint, message.token),
                                              message.conversation_id)
        elif isinstance(message, KillsDone) and message.asked:  # a seat with no kill list read none
            self.metrics.memory_kill_read(message.outcome)
        elif isinstance(message, AdmitDone):
            self.metrics.admission(message.outcome)
            self._admit_cuts.pop(message.turn_id, None)
        step = self.core.step(message)
        if step.note:
            log.warning("agent %s: %s", self.agent, step.note)
        for report in step.reports:
            tell_quietly(self.parent, report)
        for job in step.actions:
            self._run(job)
        kept = {t.turn_id for t in self.core.turns()}
        for gone in set(self._clients) - kept:  # a Turn the seat left: its calls already carry their client
            self._clients.pop(gone)
            self._read_cuts.pop(gone, None)
        return None

    # -- the core's jobs -----------------------------------------------------------------------------

    def _run(self, job: SeatJob) -> None:
        turn_id, ref, agent = job.turn_id, self.actor_ref, self.agent
        if isinstance(job, CutRead | CutAdmission):
            cut = (self._read_cuts if isinstance(job, CutRead) else self._admit_cuts).pop(turn_id, None)
            if cut is not None:
                cut.fire()
            return
        if isinstance(job, ArmSettle):
            self._after(PREVIOUS_SETTLE_SECONDS, SettleDue(turn_id))
            return
        harness, conversation = self._clients[turn_id]
        if isinstance(job, ReadJob):
            if job.after > 0:
                self._after(job.after, ReadDue(turn_id, job.seq, job.offset))
                return
            self._read_cuts[turn_id] = cut = Cut()
            self._reads.put(jobs.StreamRead(turn_id, job.seq, harness, job.url, job.offset, cut))
        elif isinstance(job, ReadKillsJob):
            self._submit("the memory-kill read",
                         lambda: jobs.read_kills(harness, ref, agent, conversation, turn_id, job.abort_first, job.read),
                         lambda problem: KillsDone(turn_id, None, problem, asked=job.read))
        elif isinstance(job, AdmitJob):
            self._admit_cuts[turn_id] = cut = Cut()
            self._submit("the admission",
                         lambda: jobs.admission(harness, ref, agent, conversation, turn_id, job.admission,
                                                job.not_yet, cut),
                         lambda problem: AdmitDone(turn_id, turn.AdmitRefused(problem)))
        elif isinstance(job, AnswerJob):
            self._submit(f"the answer to pick {job.call_id}",
                         lambda: jobs.answer(harness, ref, agent, conversation, turn_id, job),
                         lambda problem: AnswerDone(turn_id, turn.AnswerUndelivered(job.call_id, problem)))
        elif isinstance(job, AbortJob):
            self._submit("the abort", lambda: jobs.abort(harness, ref, agent, conversation, turn_id, job),
                         lambda problem: AbortDone(turn_id, False, problem, job.asked, job.unsure))
        elif isinstance(job, ProbeJob):
            self._submit("the Harness's boot probe", lambda: jobs.boot_probe(harness, ref, turn_id, judge=job.judge),
                         lambda problem: BootDone(turn_id, None, job.judge))

    def _after(self, seconds: float, message: object) -> None:
        assert self._timers is not None
        ref = self.actor_ref
        self._timers.schedule(self.clock.monotonic() + seconds, lambda: tell_quietly(ref, message))

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

        try:
            future = self.pool.submit(logs.carry(run))
        except RuntimeError:  # the pool is shut: the process is stopping, a seat left past its budget with it
            log.debug("agent %s: %s not run: the stop closed the pool", agent, what)
            return
        future.add_done_callback(jobs.log_escaped)
