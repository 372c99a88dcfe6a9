"""The fake Harness's decisions (CONTRACTS.md §3): conversations, a scripted model, picks, kills. Pure.

Theory of operation: each Harness (one per Sandbox, plus the Instance Harness) holds conversations by
(agent, conversationId). An admission starts a Submission and runs the next scripted Turn of that agent:
a list of actions that append events to the conversation's stream until one blocks (a pick awaiting its
answer, a hang) or the Turn settles. With no script, a Turn says "Done." and settles `completed`.

Actions: `Say` (a message), `Pick` (the Agent picks from its Menu; the answer resumes the Turn, and an
answer with `over: true` ends it), `ProviderLimit` (the provider's retries ran out: settles `failed`
with `error.type: provider_limit`), `GuardKill` (the Harness's memory guard: a `memory-limit` event and
a kill on `/memory-kills` told to this conversation; the Turn goes on, ADR-0062), `KernelKill` (the
kernel OOM-kills the Harness: the operator marks `OOMKilled`, every conversation of that Harness is
lost), `Hang` (never settles).

Two levers make it answer as a real Harness's timing would (CONTRACTS.md §3): `set_run_on(seconds)` — after
an answer with `over: true`, or an abort, the Submission runs on this long before it settles (a real model
stops when it stops; until then an admission into the conversation is refused 409) — and
`set_answer_latency(seconds)`, which the shell waits before each `POST …/answers` reaches the Harness;
`refuse_answers(count, status)` refuses the next answers untaken.

Every admission body is recorded as received, so a test reads exactly what the Orchestrator sent; a
seated one also records its Briefing (`harness/briefing.py`), the words a model would see, and each record
says how it was answered (`status`), which process answered (`bootId`) and when (`at`).

Each Harness process has a boot id, opaque and new at each process start (ours, a contract addition): the
admission's 200 answer and `/healthz` carry it. A restart ends the process (`end`: its Submissions end
with it, unsettled) and starts another (`begin`); until then nothing answers. The `lenient` mode (the
default) loses the conversations too; the `strict` one does only what CONTRACTS.md §3 promises: the records
stay (the pod's emptyDir), the old Submissions never settle, an `/abort` of one is `{aborted: false}` and
settles nothing, and a `kept: true` admission to a held conversation is accepted at once.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jr2_actors.harness import briefing
from jr2_actors.values.timefmt import rfc3339_ms

INSTANCE = "_instance"
MODES = ("lenient", "strict")
RECORD_SIZE = 10_000  # admissions and answers kept for tests to read (bounded: the CLI runs for days)


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Pick:
    pick: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProviderLimit:
    message: str = "provider retries exhausted: 429 Too Many Requests"


@dataclass(frozen=True)
class GuardKill:
    peak: str = "1.9Gi"
    limit: str = "2Gi"


@dataclass(frozen=True)
class KernelKill:
    message: str = "node: heap grew past the container limit\nKilled"
    watch_lag: float = 0.0  # the operator publishes the end this long after the new process (before, if < 0)


@dataclass(frozen=True)
class Hang:
    pass


Action = Say | Pick | ProviderLimit | GuardKill | KernelKill | Hang


@dataclass(frozen=True)
class Answer:
    code: int
    doc: Any
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class KillHarness:
    """An effect for the shell: the operator marks the Harness container OOMKilled, `watch_lag` seconds after
    the new process began; with a lag below 0 it marks it now, and the new process begins -lag seconds later
    (`HarnessCore.begin`)."""

    sandbox: str
    message: str
    watch_lag: float = 0.0


@dataclass(frozen=True)
class SettleLater:
    """An effect for the shell: call `settle_due` with these after `after` seconds (the run-on lever)."""

    sandbox: str
    agent: str
    conversation_id: str
    submission: str
    outcome: str
    after: float


Effect = KillHarness | SettleLater


@dataclass
class Conversation:
    agent: str
    conversation_id: str
    instance_id: str
    events: list[dict[str, Any]] = field(default_factory=list)
    batch: int = 0
    submission: str = ""
    running: bool = False
    awaiting: str | None = None  # the callId of a pick waiting for its answer
    ending: str = ""  # the outcome it settles with once its run-on is over (`set_run_on`)
    script: deque[Action] = field(default_factory=deque)
    seq: int = 0  # which incarnation: a conversation lost (a restart) and begun again under its id is another


@dataclass
class _Harness:
    instance_id: str
    boot_id: str
    conversations: dict[tuple[str, str], Conversation] = field(default_factory=dict)
    kills: list[dict[str, Any]] = field(default_factory=list)
    raw_kills: bytes | None = None
    draining: bool = False
    down: bool = False  # its process ended and the next has not begun: nothing answers


class HarnessCore:
    def __init__(self, mode: str = "lenient") -> None:
        if mode not in MODES:
            raise ValueError(f"the fake Harness's mode is one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self._boots = itertools.count(1)
        self._harnesses: dict[str, _Harness] = {}
        self._scripts: dict[str, deque[list[Action]]] = {}
        self._pick_first = False
        self.run_on = 0.0  # seconds a Submission runs on after an `over: true` answer or an abort
        self.answer_latency = 0.0  # seconds each `POST …/answers` takes to reach the Harness (the shell waits)
        self._refused_answers: list[int] = []  # statuses the next answers are refused with, untaken
        self.reads: dict[str, int] = {}  # GET /memory-kills answered, per Harness
        self.read_log: deque[dict[str, Any]] = deque(maxlen=RECORD_SIZE)
        self._forgotten: deque[dict[str, Any]] = deque(maxlen=RECORD_SIZE)  # kills of Harnesses whose pod went
        self.admissions: deque[dict[str, Any]] = deque(maxlen=RECORD_SIZE)  # every admission body, as received
        self.answers: deque[dict[str, Any]] = deque(maxlen=RECORD_SIZE)
        # Each process {sandbox, bootId, began, ended?}; each Submission an end took {…, submissionId, bootId,
        # at}; each conversation lost {…, conversationSeq, seq} (`seq` on the kills' and Submissions' counter).
        self.boots: deque[dict[str, Any]] = deque(maxlen=RECORD_SIZE)
        self.cut: deque[dict[str, Any]] = deque(maxlen=RECORD_SIZE)
        self.lost: deque[dict[str, Any]] = deque(maxlen=RECORD_SIZE)
        self._ids = itertools.count(1)

    # -- scripting -----------------------------------------------------------------------------------

    def script(self, agent: str, turns: Sequence[Sequence[Action]], *, replace: bool = False) -> None:
        """Queue Turns for an agent; each admission takes the next one (`replace`: drop those queued first)."""
        self._scripts[agent] = deque([*([] if replace else self._scripts.get(agent, ())), *(list(t) for t in turns)])

    def pick_first_allowed(self, on: bool = True) -> None:
        """With no script for an agent, its Turn picks the first Allowed pick (a workflow walks to an end)
        instead of saying "Done." and settling without a pick."""
        self._pick_first = on

    def set_run_on(self, seconds: float) -> None:
        """After an answer with `over: true`, or an abort, the Submission settles only `seconds` later (a real
        Harness's model runs on until it stops); meanwhile it is running, and an admission is refused 409."""
        self.run_on = max(0.0, seconds)

    def set_answer_latency(self, seconds: float) -> None:
        """Each `POST …/answers` reaches the Harness only `seconds` after it was sent."""
        self.answer_latency = max(0.0, seconds)

    def refuse_answers(self, count: int, status: int = 503) -> None:
        """The next `count` `POST …/answers` are refused with `status` (a draining Harness's 503) and not
        taken: the model's call still waits for its result."""
        self._refused_answers.extend([status] * max(0, count))

    def set_draining(self, sandbox: str, draining: bool) -> None:
        self._harness(sandbox).draining = draining

    def set_raw_memory_kills(self, sandbox: str, raw: bytes | None) -> None:
        """Serve these bytes as `/memory-kills` (the file the agent's uid can write: anything at all)."""
        self._harness(sandbox).raw_kills = raw

    def restart(self, sandbox: str, now: float = 0.0) -> None:
        """The Harness process restarted: `end`, then `begin` (its kill list, a file on the pod's emptyDir,
        stays; its conversations too in the strict mode)."""
        self.end(sandbox, now)
        self.begin(sandbox, now)

    def end(self, sandbox: str, now: float = 0.0) -> None:
        """The Harness process ends: every Submission it ran ends with it, unsettled; the lenient mode loses
        every conversation too. Nothing answers until `begin`."""
        harness = self._harness(sandbox)
        if harness.down:
            return
        harness.down = True
        for boot in reversed(self.boots):
            if boot["sandbox"] == sandbox and boot["bootId"] == harness.boot_id:
                boot["ended"] = now
                break
        for conv in harness.conversations.values():
            if conv.running:
                self.cut.append({"sandbox": sandbox, "agent": conv.agent, "conversationId": conv.conversation_id,
                                 "submissionId": conv.submission, "bootId": harness.boot_id, "at": now})
            # CONTRACTS.md §3: the new process runs none of them and sends no `submission-settled` for them.
            conv.running, conv.awaiting, conv.ending = False, None, ""
            conv.script.clear()
        if self.mode == "lenient":
            self.lose(sandbox)

    def begin(self, sandbox: str, now: float = 0.0) -> None:
        """A new Harness process answers, under a new boot id."""
        harness = self._harness(sandbox)
        if harness.down:
            harness.down, harness.boot_id = False, self._boot(sandbox, now)

    def lose(self, sandbox: str) -> None:
        """The Harness forgets every conversation (a `kept: true` admission gets 404 `kept: false`)."""
        harness = self._harness(sandbox)
        for conv in harness.conversations.values():
            self.lost.append({"sandbox": sandbox, "agent": conv.agent, "conversationId": conv.conversation_id,
                              "conversationSeq": conv.seq, "seq": next(self._ids)})
        harness.conversations.clear()

    def boot_id(self, sandbox: str) -> str:
        return self._harness(sandbox).boot_id

    def is_down(self, sandbox: str) -> bool:
        return sandbox in self._harnesses and self._harnesses[sandbox].down

    def forget(self, sandbox: str) -> None:
        """The Sandbox's pod is gone (the Sandbox deleted): its Harness with it — conversations, running
        Submissions and the kill list (ADR-0062: a lost pod takes the file with it). A Sandbox made again
        under the same name gets a Harness of its own, as a new pod does."""
        gone = self._harnesses.pop(sandbox, None)
        if gone is not None:
            at = next(self._ids)  # when, among kills and Submissions, the pod went
            self._forgotten.extend({"sandbox": sandbox, **kill, "goneAt": at} for kill in gone.kills)

    def pick_now(self, agent: str, pick: str, args: Mapping[str, Any] | None = None) -> bool:
        """The model of a hung Turn of `agent` picks now (a test's hand on the model): False when none hangs."""
        for harness in self._harnesses.values():
            for conv in harness.conversations.values():
                if conv.agent == agent and conv.running and conv.awaiting is None and not conv.script \
                        and not conv.ending:
                    conv.awaiting = f"call-{next(self._ids)}"
                    self._emit(conv, "pick", callId=conv.awaiting, pick=pick, args=dict(args or {}))
                    return True
        return False

    def list_kill(self, sandbox: str, now: float, *, agent: str = "", peak: str = "1.1Gi", limit: str = "2Gi",
                  told: Sequence[str] = ()) -> str:
        """A guard kill outside any Submission (a dev server killed while the workflow waits, ADR-0062): on
        the Harness's list alone, on no stream. Its id."""
        harness = self._harness(sandbox)
        kill_id = f"k-{next(self._ids)}"
        harness.kills.append({"id": kill_id, "at": rfc3339_ms(now), "agent": agent, "instanceId": harness.instance_id,
                              "peak": peak, "limit": limit, "told": list(told)})
        return kill_id

    # -- routes --------------------------------------------------------------------------------------

    def attach(self, sandbox: str, body: object) -> Answer:
        if not isinstance(body, dict) or not isinstance(body.get("slots"), list):
            return Answer(400, {"error": "body must be {slots: [...], branch}"})
        branch = body.get("branch")
        if not isinstance(branch, str) or not branch or ".." in branch or branch.startswith("/"):
            return Answer(400, {"error": "branch must be a branch name"})
        repos: dict[str, str] = {}
        for slot in body["slots"]:
            if not isinstance(slot, dict) or not all(isinstance(slot.get(k), str) and slot.get(k)
                                                     for k in ("slot", "url", "identity", "key")):
                return Answer(400, {"error": "each slot needs slot, url, identity and key"})
            name = slot["slot"]
            if "/" in name or name.startswith("."):
                return Answer(400, {"error": "a slot name cannot hold '/' or start with '.'", "slot": name})
            repos[name] = f"/work/{name}/{branch.replace('/', '-')}"
        return Answer(200, {"repos": repos})

    def admit(self, sandbox: str, agent: str, conversation_id: str, body: object, now: float) -> tuple[Answer,
                                                                                                     list[Effect]]:
        harness = self._harness(sandbox)
        if not isinstance(body, dict):
            return Answer(400, {"error": "the admission body must be a JSON object"}), []
        record = {"sandbox": sandbox, "agent": agent, "conversationId": conversation_id,
                  "body": json.loads(json.dumps(body)), "bootId": harness.boot_id, "at": now}
        self.admissions.append(record)
        answer, effects = self._admit(harness, sandbox, record, body, now)
        record["status"] = answer.code
        return answer, effects

    def _admit(self, harness: _Harness, sandbox: str, record: dict[str, Any], body: dict[str, Any],
               now: float) -> tuple[Answer, list[Effect]]:
        agent, conversation_id = record["agent"], record["conversationId"]
        problem = _admission_problem(body)
        if problem:
            return Answer(400, {"error": problem}), []
        key = (agent, conversation_id)
        conv = harness.conversations.get(key)
        if conv is not None and body.get("kept") is not True:
            record["heldUnkept"] = True  # an admission not `kept` into a conversation this Harness holds
        if harness.draining:
            return Answer(503, {"error": "draining"}), []
        if body.get("kept") is True and conv is None:
            return Answer(404, {"error": f"conversation {conversation_id} is not held here", "kept": False}), []
        if conv is not None and conv.running:
            return Answer(409, {"error": "a submission is still running in this conversation"}), []
        if conv is None:
            conv = harness.conversations[key] = Conversation(agent, conversation_id, harness.instance_id,
                                                             seq=next(self._ids))
        # ADR-0062: the Harness words the Briefing; recorded so a test reads exactly what a model would see.
        record["briefing"] = briefing.render_admission(body).as_record()
        conv.batch += 1
        conv.submission = f"s-{next(self._ids)}"
        record["submissionId"] = conv.submission  # the Submission it started (ids share one counter with kills)
        record["conversationSeq"] = conv.seq  # the incarnation it went to
        conv.running = True
        turns = self._scripts.get(agent)
        allowed = body.get("allowed") if isinstance(body.get("allowed"), list) else []
        default: list[Action] = [Say("Done.")]
        if self._pick_first and allowed and isinstance(allowed[0], str):
            default.append(Pick(allowed[0]))
        conv.script = deque(turns.popleft() if turns else default)
        offset, boot_id = len(conv.events), harness.boot_id
        effects = self._run(sandbox, conv, now)
        return Answer(200, {"streamUrl": "", "offset": str(offset), "submissionId": conv.submission,
                            "bootId": boot_id}), effects

    def poll(self, sandbox: str, agent: str, conversation_id: str, offset: str) -> Answer:
        conv = self._harness(sandbox).conversations.get((agent, conversation_id))
        if conv is None:
            return Answer(404, {"error": "conversation lost"})
        try:
            start = int(offset or "0")
        except ValueError:
            return Answer(400, {"error": "offset must be a number"})
        if not 0 <= start <= len(conv.events):
            return Answer(400, {"error": "offset out of range"})
        events = conv.events[start:]
        headers = (("stream-next-offset", str(len(conv.events))), ("stream-up-to-date", "true"))
        if not events:
            return Answer(204, None, headers)
        return Answer(200, events, headers)

    def answer(self, sandbox: str, agent: str, conversation_id: str, body: object, now: float) -> tuple[
            Answer, list[Effect]]:
        conv = self._harness(sandbox).conversations.get((agent, conversation_id))
        if conv is None:
            return Answer(404, {"error": "conversation lost"}), []
        if not isinstance(body, dict) or not isinstance(body.get("callId"), str) or not isinstance(
                body.get("over"), bool) or "answer" not in body:
            return Answer(400, {"error": "body must be {callId, over, answer}"}), []
        if self._refused_answers:
            return Answer(self._refused_answers.pop(0), {"error": "draining"}), []
        if conv.awaiting != body["callId"]:
            return Answer(409, {"error": f"no pick {body['callId']} is waiting"}), []
        self.answers.append({"sandbox": sandbox, "agent": agent, "conversationId": conversation_id, **body})
        conv.awaiting = None
        if body["over"]:
            conv.script.clear()
            return Answer(200, {"ok": True}), self._stop(sandbox, conv, "completed")
        return Answer(200, {"ok": True}), self._run(sandbox, conv, now)

    def abort(self, sandbox: str, agent: str, conversation_id: str) -> tuple[Answer, list[Effect]]:
        conv = self._harness(sandbox).conversations.get((agent, conversation_id))
        if conv is None or not conv.running:
            return Answer(200, {"aborted": False}), []
        conv.script.clear()
        conv.awaiting = None
        return Answer(200, {"aborted": True}), self._stop(sandbox, conv, "aborted")

    def settle_due(self, sandbox: str, agent: str, conversation_id: str, submission: str, outcome: str) -> None:
        """A run-on is over: the Submission settles, unless it settled meanwhile (or its Harness restarted)."""
        conv = self._harness(sandbox).conversations.get((agent, conversation_id))
        if conv is not None and conv.running and conv.submission == submission:
            self._settle(conv, outcome)

    def kill_log(self) -> list[dict[str, Any]]:
        """Every kill on every Harness's list, oldest first, with its Sandbox: what a test counts notices
        against (`k-N` and `s-N` ids come from one counter, so they order kills among Submissions). A kill of
        a pod that is gone since says when it went (`goneAt`, on the same counter)."""
        kills = [*self._forgotten,
                 *({"sandbox": sandbox, **kill} for sandbox, h in self._harnesses.items() for kill in h.kills)]
        return sorted(kills, key=lambda k: int(str(k["id"]).removeprefix("k-") or 0))

    def kills_of(self, sandbox: str) -> list[dict[str, Any]]:
        """The kills `sandbox`'s list holds now, as a test reads them: not counted as a read of the list."""
        return list(self._harness(sandbox).kills)

    def memory_kills(self, sandbox: str) -> bytes:
        self.reads[sandbox] = self.reads.get(sandbox, 0) + 1
        # When, among kills and Submissions (one counter), each read was answered: a test tells a kill the
        # read before an admission could see from one it could not.
        self.read_log.append({"sandbox": sandbox, "seq": next(self._ids)})
        harness = self._harness(sandbox)
        if harness.raw_kills is not None:
            return harness.raw_kills
        return json.dumps({"kills": harness.kills}).encode()

    # -- the scripted model --------------------------------------------------------------------------

    def _stop(self, sandbox: str, conv: Conversation, outcome: str) -> list[Effect]:
        """The model is told to stop: it settles now, or after the run-on lever's seconds."""
        if self.run_on <= 0:
            self._settle(conv, outcome)
            return []
        conv.ending = conv.ending or outcome
        return [SettleLater(sandbox, conv.agent, conv.conversation_id, conv.submission, conv.ending, self.run_on)]

    def _run(self, sandbox: str, conv: Conversation, now: float) -> list[Effect]:
        harness = self._harness(sandbox)
        while conv.script:
            action = conv.script.popleft()
            if isinstance(action, Say):
                self._emit(conv, "message-appended", message={"role": "assistant", "content": action.text})
            elif isinstance(action, Pick):
                call_id = f"call-{next(self._ids)}"
                conv.awaiting = call_id
                self._emit(conv, "pick", callId=call_id, pick=action.pick, args=dict(action.args))
                return []
            elif isinstance(action, ProviderLimit):
                conv.script.clear()
                self._settle(conv, "failed", {"type": "provider_limit", "message": action.message})
                return []
            elif isinstance(action, GuardKill):
                kill_id = f"k-{next(self._ids)}"
                harness.kills.append({"id": kill_id, "at": rfc3339_ms(now), "agent": conv.agent,
                                      "instanceId": harness.instance_id, "peak": action.peak,
                                      "limit": action.limit, "told": [conv.conversation_id]})
                self._emit(conv, "memory-limit", id=kill_id, peak=action.peak, limit=action.limit)
                # ADR-0062: the guard kills the Sandbox's processes and `bash` returns its verdict; the
                # container and the Submission go on, so the Turn's next action follows.
            elif isinstance(action, KernelKill):
                self.end(sandbox, now)
                if action.watch_lag >= 0:  # else the shell begins the new process once the watch showed the end
                    self.begin(sandbox, now)
                return [KillHarness(sandbox, action.message, action.watch_lag)]
            elif isinstance(action, Hang):
                return []
        self._settle(conv, "completed")
        return []

    def _settle(self, conv: Conversation, outcome: str, error: Mapping[str, Any] | None = None) -> None:
        extra: dict[str, Any] = {"submissionId": conv.submission, "outcome": outcome}
        if error:
            extra["error"] = dict(error)
        self._emit(conv, "submission-settled", **extra)
        conv.running = False
        conv.ending = ""

    def _emit(self, conv: Conversation, type_: str, **fields: Any) -> None:
        index = sum(1 for e in conv.events if e["position"]["batch"] == conv.batch)
        conv.events.append({"type": type_, "conversationId": conv.conversation_id,
                            "position": {"batch": conv.batch, "index": index}, **fields})

    def _harness(self, sandbox: str) -> _Harness:
        if sandbox not in self._harnesses:
            self._harnesses[sandbox] = _Harness(f"i-{next(self._ids):04x}", self._boot(sandbox, None))
        return self._harnesses[sandbox]

    def _boot(self, sandbox: str, now: float | None) -> str:
        boot_id = f"boot-{next(self._boots)}"
        self.boots.append({"sandbox": sandbox, "bootId": boot_id, "began": now})
        return boot_id


def _admission_problem(body: Mapping[str, Any]) -> str:
    definition = body.get("definition")
    if not isinstance(definition, dict):
        return "definition must be an object"
    if not isinstance(definition.get("agent"), str) or not isinstance(definition.get("instructions"), str):
        return "definition needs agent and instructions"
    if definition.get("access") not in ("write", "read", "none"):
        return "definition.access must be write, read or none"
    if not isinstance(definition.get("menu", []), list):
        return "definition.menu must be a list"
    if not isinstance(body.get("message"), str):
        return "message must be a string"
    if not isinstance(body.get("allowed", []), list):
        return "allowed must be a list"
    if "notices" in body and not isinstance(body["notices"], list):
        return "notices must be a list"
    if "kept" in body and not isinstance(body["kept"], bool):
        return "kept must be a boolean"
    if "cwd" in body and not isinstance(body["cwd"], str):
        return "cwd must be a string"
    return ""
