"""AgentActor: one Agent seat, a thin shell over `TurnCore` (DESIGN.md, ADR-0062).

Before each admission into a Workspace it reads the Harness's `/memory-kills` (5 s, its only limit) and
tells the run what it read — or that the read could not tell (`KillsRead(None, …)`), which is never an
empty list. Then it admits, reads the updates stream on a reader thread of its own (a long-poll blocks,
so it never runs on the actor's thread), and tells the run every report: picks, guard kills, words, the
Turn's end or fault. The run answers a pick with `AnswerPick`; `AbortTurn` ends the Turn.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from jr2_actors.actorkit import Recipient, Shell, tell_quietly
from jr2_actors.agent import core as turn
from jr2_actors.harness.client import (
    Admission,
    HarnessClient,
    HarnessError,
    HarnessProtocolError,
    HarnessUnreachable,
)
from jr2_actors.harness.memory_kills import MemoryKillListError, MemoryKillRead

log = logging.getLogger(__name__)
HARNESS_ERRORS = (HarnessError, HarnessUnreachable, HarnessProtocolError)
READ_RETRIES = 3


@dataclass(frozen=True)
class StartTurn:
    conversation_id: str
    body: Mapping[str, Any] = field(repr=False)  # {definition, message, allowed, notices?, kept?, cwd?}
    endpoint: str
    token: str = field(repr=False)
    in_workspace: bool = True  # a Menu-only agent on the Instance Harness reads no kill list


@dataclass(frozen=True)
class AnswerPick:
    call_id: str
    over: bool
    answer: Any


@dataclass(frozen=True)
class AbortTurn:
    pass


@dataclass(frozen=True)
class KillsRead:
    """What the read before an admission found; `read` is None when it could not tell."""

    agent: str
    read: MemoryKillRead | None
    problem: str = ""


@dataclass(frozen=True)
class _Result:
    event: turn.Input | None
    turn_id: int
    stream_url: str = ""


@dataclass(frozen=True)
class _KillsDone:
    read: MemoryKillRead | None
    problem: str
    source: str


HarnessFactory = Callable[[str, str], HarnessClient]


class AgentActor(Shell):
    def __init__(self, agent: str, *, parent: Recipient, pool: Executor,
                 harness_factory: HarnessFactory | None = None) -> None:
        super().__init__()
        self.agent = agent
        self.parent = parent
        self.name = agent
        self.pool = pool
        self._factory = harness_factory or (lambda url, token: HarnessClient(url, token))
        self._core: turn.TurnCore | None = None
        self._harness: HarnessClient | None = None
        self._conversation = ""
        self._stream_url = ""
        self._turn_id = 0
        self._reads: queue.Queue[tuple[int, HarnessClient, str, str] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read_loop, name=f"jr2-agent-{agent}", daemon=True)
        self._kills_failing = False

    def started(self) -> None:
        self._reader.start()

    def cleanup(self) -> None:
        self._reads.put(None)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, StartTurn):
            self._start(message)
        elif isinstance(message, _Result):
            if message.turn_id == self._turn_id and message.event is not None:
                self._stream_url = message.stream_url or self._stream_url
                self._step(message.event)
        elif isinstance(message, _KillsDone):
            self._kills_done(message)
        elif isinstance(message, AnswerPick):
            self._answer(message)
        elif isinstance(message, AbortTurn):
            harness, conversation, agent = self._harness, self._conversation, self.agent
            if harness is not None:
                self.pool.submit(lambda: _quietly(lambda: harness.abort(agent, conversation)))
        return None

    def _start(self, message: StartTurn) -> None:
        self._turn_id += 1
        turn_id = self._turn_id
        allowed = message.body.get("allowed", [])
        self._core = turn.TurnCore(allowed if isinstance(allowed, list) else [])
        self._harness = harness = self._factory(message.endpoint, message.token)
        self._conversation = message.conversation_id
        ref = self.actor_ref
        agent = self.agent

        def admit() -> None:  # on the pool: it touches no attribute of the actor, it only tells
            if message.in_workspace:
                try:
                    read: MemoryKillRead | None = harness.memory_kills()
                    tell_quietly(ref, _KillsDone(read, "", harness.base_url))
                except (*HARNESS_ERRORS, MemoryKillListError) as e:
                    tell_quietly(ref, _KillsDone(None, str(e), harness.base_url))
            try:
                admission: Admission = harness.admit(agent, message.conversation_id, message.body)
            except HARNESS_ERRORS as e:
                tell_quietly(ref, _Result(turn.AdmitRefused(str(e)), turn_id))
                return
            tell_quietly(ref, _Result(turn.Admitted(admission.submission_id, admission.offset), turn_id,
                               admission.stream_url))

        self.pool.submit(admit)

    def _kills_done(self, done: _KillsDone) -> None:
        if done.read is None:
            if not self._kills_failing:  # one line when reads start to fail, none while they keep failing
                log.warning("memory-kill reads from %s fail: %s", done.source, done.problem)
            self._kills_failing = True
        else:
            self._kills_failing = False
            for problem in done.read.problems:
                log.warning("memory-kill list from %s: %s", done.source, problem)
        tell_quietly(self.parent, KillsRead(self.agent, done.read, done.problem))

    def _step(self, event: turn.Input) -> None:
        assert self._core is not None
        step = self._core.step(event)
        for report in step.reports:
            tell_quietly(self.parent, report)
        for action in step.actions:
            if isinstance(action, turn.ReadUpdates) and self._harness is not None:
                self._reads.put((self._turn_id, self._harness, self._stream_url, action.offset))
            elif isinstance(action, turn.AnswerPick):
                self._answer(AnswerPick(action.call_id, action.over, action.answer), notify_core=False)

    def _answer(self, message: AnswerPick, notify_core: bool = True) -> None:
        harness, conversation, turn_id, ref = self._harness, self._conversation, self._turn_id, self.actor_ref
        agent = self.agent
        if harness is None:
            return

        def post() -> None:
            try:
                harness.answer(agent, conversation, message.call_id, message.over, message.answer)
            except HARNESS_ERRORS as e:
                log.warning("answering pick %s failed: %s", message.call_id, e)
                return
            if notify_core:
                tell_quietly(ref, _Result(turn.Answered(message.call_id, message.over), turn_id))

        self.pool.submit(post)

    def _read_loop(self) -> None:
        """The long-poll reader: one read at a time, each result told to the actor. A read is a GET, so
        one cut short is asked again (three times at most, a second apart) before the Turn is lost."""
        pause = threading.Event()
        failures = 0
        while True:
            item = self._reads.get()
            if item is None:
                return
            turn_id, harness, url, offset = item  # a stale Turn's result is dropped by the actor
            try:
                updates = harness.updates(url, offset)
            except HarnessError as e:
                event: turn.Input = turn.StreamLost(f"{e.status}: {e.error}")
            except (HarnessUnreachable, HarnessProtocolError) as e:
                failures += 1
                if failures < READ_RETRIES:
                    pause.wait(1.0)
                    self._reads.put(item)
                    continue
                event = turn.StreamLost(str(e))
            else:
                event = turn.Events(updates.events, updates.next_offset)
            failures = 0
            tell_quietly(self.actor_ref, _Result(event, turn_id))



def _quietly(call: Callable[[], object]) -> None:
    try:
        call()
    except HARNESS_ERRORS as e:
        log.warning("%s", e)
