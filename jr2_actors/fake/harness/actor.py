"""The fake Harness over loopback HTTP: one listener for every Sandbox's Harness and the Instance Harness.

A Sandbox's endpoint is `<base>/<sandboxName>` (the operator publishes it); the Instance Harness is
`<base>/_instance`. Every route but `/healthz` needs the bearer token whose digest the Sandbox's env
carries (`JR2_HARNESS_TOKEN_SHA256`), checked in constant time, and a `401 {"error":"unauthorized"}`
comes before any other answer. A Sandbox that is not `Ready` has no Harness serving: 503; nor has one
whose Harness process ended and the next has not begun (`HarnessCore.is_down`). `/healthz` answers
`{"ok": true, "bootId": …}`: the boot id of the process serving (ours, a contract addition).

HTTP threads (fake/http.py, outside the actor system) ask the `HarnessActor`, which alone holds the
`HarnessCore`. A long-poll that finds no event waits on its stream's change signal, up to the long-poll
window (25 s by default), then answers 204. The signal is its conversation's: a wider one answered every
long-poll beside it at each event (on the Instance Harness, every Menu-only Agent's: work growing with the
square of the live runs, that a real Harness does not make). A process begun or ended wakes its Sandbox's all.
The actor never asks another actor: the API server feeds it each Sandbox change of its namespace (so it
knows each token digest and phase), and a kernel kill is told to the operator. The latency lever
(`HarnessCore.set_answer_latency`) is waited on the HTTP thread, before the answer reaches the actor; the
run-on lever's settles are timers on the actor's clock.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
from dataclasses import dataclass, replace
from typing import Any, cast
from urllib.parse import unquote

import pykka

from jr2_actors.fake.harness.core import INSTANCE, Answer, Effect, HarnessCore, KillHarness, SettleLater
from jr2_actors.fake.harness.messages import HarnessReply, HarnessRequest
from jr2_actors.fake.http import HttpFront, HttpServer, Request
from jr2_actors.fake.messages import Run, SandboxChanged, Subscribed
from jr2_actors.fake.operator.actor import subscribe, unsubscribe
from jr2_actors.fake.operator.core import OperatorCore
from jr2_actors.harness.tokens import DIGEST_ENV, verify_bearer
from jr2_actors.shell import Shell, Timers, tell_quietly
from jr2_actors.shell.activity import HARNESS_SERVED, Job, activity
from jr2_actors.shell.clock import Clock, SystemClock, pause

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
LONG_POLL_SECONDS = 25.0
ASK_TIMEOUT = 10.0


@dataclass(frozen=True)
class _Settle:
    effect: SettleLater


@dataclass(frozen=True)
class _Begin:
    """A new Harness process begins, once the watch showed its old one's end (a `KillHarness` lag below 0)."""

    sandbox: str


@dataclass(frozen=True)
class _Seen:
    digest: str  # "" when the Sandbox names none
    ready: bool


class HarnessActor(Shell):
    name = "harness"

    def __init__(self, api: pykka.ActorRef[Any], namespace: str, clock: Clock, *, base_url: str,
                 instance_digest: str = "", operator: pykka.ActorRef[Any] | None = None,
                 mode: str = "lenient") -> None:
        super().__init__()
        self.api = api
        self.namespace = namespace
        self.clock = clock
        self.core = HarnessCore(mode)
        self.instance_digest = instance_digest
        self.operator = operator  # told a kernel kill: it marks the Harness container OOMKilled
        self.base_url = base_url
        self._changed: dict[tuple[str, str, str], threading.Event] = {}  # (sandbox, agent, conversation) parked on
        self._sandboxes: dict[str, _Seen] = {}
        self._watch: int | None = None
        self._timers: Timers | None = None

    def started(self) -> None:
        self._timers = Timers(self.clock, name="fake-harness-timers")
        subscribe(self.api, self.actor_ref, self.namespace)

    def cleanup(self) -> None:
        self._signal()
        if self._timers is not None:
            self._timers.stop()
        unsubscribe(self.api, self._watch)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, HarnessRequest):
            return self._request(message)
        if isinstance(message, SandboxChanged):
            self._seen(message)
        elif isinstance(message, Subscribed):
            self._watch = message.watcher
        elif isinstance(message, Run):
            result = message.fn(self.core)
            if message.wakes:
                self._signal()
            return result
        elif isinstance(message, _Settle):
            e = message.effect
            self.core.settle_due(e.sandbox, e.agent, e.conversation_id, e.submission, e.outcome)
            self._signal(e.sandbox, (e.agent, e.conversation_id))
        elif isinstance(message, _Begin):
            self.core.begin(message.sandbox, self.clock.wall())
            self._signal(message.sandbox)
        return None

    def _seen(self, change: SandboxChanged) -> None:
        obj = change.object
        name = obj["metadata"]["name"]
        if change.type == "DELETED":
            self._sandboxes.pop(name, None)
            self.core.forget(name)  # its pod and its Harness are gone: a Sandbox made again starts afresh
            self._signal(name)
            return
        digest = ""
        env = (obj.get("spec") or {}).get("env") or []
        for var in env if isinstance(env, list) else []:
            if isinstance(var, dict) and var.get("name") == DIGEST_ENV and isinstance(var.get("value"), str):
                digest = var["value"]
        status = obj.get("status")
        self._sandboxes[name] = _Seen(digest, isinstance(status, dict) and status.get("phase") == "Ready")

    def _signal(self, sandbox: str | None = None, conversation: tuple[str, str] | None = None) -> None:
        """Wake the long-polls on `sandbox`'s `conversation`; without it, its every stream; None: all (a lever)."""
        if sandbox is None:
            woken, self._changed = list(self._changed.values()), {}
        elif conversation is not None:
            woken = [e for e in [self._changed.pop((sandbox, *conversation), None)] if e is not None]
        else:
            woken = [self._changed.pop(key) for key in [key for key in self._changed if key[0] == sandbox]]
        for event in woken:
            event.set()

    def _request(self, req: HarnessRequest) -> HarnessReply:
        parts = req.parts
        if parts == ("healthz",) and req.method == "GET":
            if not self._serving(req.sandbox):
                return _not_serving()
            return HarnessReply(Answer(200, {"ok": True, "bootId": self.core.boot_id(req.sandbox)}))
        digest = self._digest(req.sandbox)
        if digest is None:
            return _not_serving()
        if not verify_bearer(req.authorization, digest):
            return HarnessReply(Answer(401, {"error": "unauthorized"}))
        if not self._serving(req.sandbox):
            return _not_serving()
        now = self.clock.wall()
        body: object = None
        if req.method == "POST":
            try:
                body = json.loads(req.body) if req.body else {}
            except (ValueError, RecursionError):
                return HarnessReply(Answer(400, {"error": "the body is not JSON"}))
        answer: Answer
        effects: list[Effect] = []
        conversation = (parts[1], parts[2]) if len(parts) >= 3 and parts[0] == "agents" else None
        if parts == ("attach",) and req.method == "POST":
            answer = self.core.attach(req.sandbox, body)
        elif parts == ("memory-kills",) and req.method == "GET":
            return HarnessReply(Answer(200, None), raw=self.core.memory_kills(req.sandbox))
        elif len(parts) == 3 and parts[0] == "agents" and req.method == "POST":
            answer, effects = self.core.admit(req.sandbox, parts[1], parts[2], body, now)
            if answer.code == 200:
                answer = Answer(200, {**answer.doc, "streamUrl": self._stream_url(req, parts[1], parts[2])})
        elif len(parts) == 4 and parts[0] == "agents" and parts[3] == "abort" and req.method == "POST":
            answer, effects = self.core.abort(req.sandbox, parts[1], parts[2])
        elif len(parts) == 4 and parts[0] == "agents" and parts[3] == "answers" and req.method == "POST":
            if self.core.answer_latency and not req.delayed:
                return HarnessReply(Answer(0, None), delay=self.core.answer_latency)
            answer, effects = self.core.answer(req.sandbox, parts[1], parts[2], body, now)
        elif len(parts) == 3 and parts[0] == "streams" and req.method == "GET":
            answer = self.core.poll(req.sandbox, parts[1], parts[2], req.query.get("offset", "0"))
            changed = self._changed.setdefault((req.sandbox, parts[1], parts[2]), threading.Event()) \
                if answer.code == 204 else None
            return HarnessReply(answer, changed=changed)
        else:
            return HarnessReply(Answer(404, {"error": f"no route {req.method} /{'/'.join(parts)}"}))
        for effect in effects:
            if isinstance(effect, KillHarness):
                self._kernel_kill(effect)
            elif self._timers is not None:
                self._timers.schedule(self.clock.monotonic() + effect.after,
                                      functools.partial(tell_quietly, self.actor_ref, _Settle(effect)))
        killed = any(isinstance(e, KillHarness) for e in effects)  # the process ends: its every stream wakes
        if killed or conversation is not None:  # the attach changes no stream
            self._signal(req.sandbox, None if killed else conversation)
        return HarnessReply(answer)

    def _kernel_kill(self, effect: KillHarness) -> None:
        """The operator marks the end `watch_lag` seconds after the new process began (the core began it); a
        lag below 0 marks it now, and the new process begins that much later."""
        lag = effect.watch_lag
        mark = functools.partial(tell_quietly, self.operator, Run(_kernel_kill(effect, self.namespace, self.clock)))
        if lag == 0 or self._timers is None:
            mark()
            if lag < 0:
                self.core.begin(effect.sandbox, self.clock.wall())
        elif lag > 0:
            self._timers.schedule(self.clock.monotonic() + lag, mark)
        else:
            mark()
            self._timers.schedule(self.clock.monotonic() - lag,
                                  functools.partial(tell_quietly, self.actor_ref, _Begin(effect.sandbox)))

    def _stream_url(self, req: HarnessRequest, agent: str, conversation: str) -> str:
        """On the address the admission came to: a Sandbox with an address of its own streams from it."""
        return f"{req.origin or self.base_url}/{req.sandbox}/streams/{agent}/{conversation}"

    def _digest(self, sandbox: str) -> str | None:
        if sandbox == INSTANCE:
            return self.instance_digest or None
        seen = self._sandboxes.get(sandbox)
        return None if seen is None else seen.digest

    def _serving(self, sandbox: str) -> bool:
        if self.core.is_down(sandbox):
            return False
        if sandbox == INSTANCE:
            return True
        seen = self._sandboxes.get(sandbox)
        return seen is not None and seen.ready


def _kernel_kill(effect: KillHarness, namespace: str, clock: Clock) -> Any:
    def kill(core: OperatorCore) -> None:
        with contextlib.suppress(KeyError):  # the Sandbox went meanwhile: nothing left to kill
            core.kill_harness(effect.sandbox, clock.wall(), reason="OOMKilled", message=effect.message,
                              namespace=namespace)
    return kill


def _not_serving() -> HarnessReply:
    return HarnessReply(Answer(503, {"error": "no Harness serves here (the Sandbox is not Ready)"}))


class HarnessApp:
    def __init__(self, long_poll: float, clock: Clock | None = None) -> None:
        self.long_poll = long_poll
        self.actor: pykka.ActorRef[Any] | None = None
        self.closing = threading.Event()
        self.clock: Clock = clock or SystemClock()
        self.activity = activity(clock)

    def handle(self, r: Request) -> None:
        # A driven VirtualClock never jumps while a request is served, a long poll parked for a change excepted.
        with self.activity.busy(f"{HARNESS_SERVED}{r.command} {r.url_path}") as job:
            self._handle(r, job)

    def _handle(self, r: Request, job: Job) -> None:
        body = r.read_body(MAX_BODY)
        if body is None:
            r.respond_json(413, {"error": "body too large"})
            return
        segments = [unquote(p) for p in r.url_path.strip("/").split("/") if p]
        if not segments or self.actor is None:
            r.respond_json(404, {"error": "no Harness named"})
            return
        host, port = r.connection.getsockname()[:2]
        req = HarnessRequest(segments[0], r.command, tuple(segments[1:]), dict(r.query),
                             r.headers.get("Authorization", ""), body, origin=f"http://{host}:{port}")
        waited = False
        while True:
            try:
                reply = cast(HarnessReply, self.actor.ask(req, timeout=ASK_TIMEOUT))
            except (pykka.ActorDeadError, pykka.Timeout):
                r.respond_json(503, {"error": "the fake Harness is stopping"})
                return
            if reply.delay:
                if pause(self.clock, reply.delay, self.closing, what=f"fake Harness latency {r.url_path}", job=job):
                    r.respond_json(503, {"error": "the fake Harness is stopping"})
                    return
                req = replace(req, delayed=True)
                continue
            if reply.changed is None or waited:
                break
            # Long-poll: wait for any change, then look once more.
            waited = True
            changed = reply.changed
            # The window is on the real clock: on a driven VirtualClock the parked poll lets time jump, and
            # lasts until a change (a window ended every 25 virtual seconds would be a jump each).
            with job.waiting(changed.is_set):
                if not changed.wait(self.long_poll) or self.closing.is_set():
                    break
        if reply.raw is not None:
            r.respond(reply.answer.code, reply.raw, "application/json", reply.answer.headers)
        else:
            r.respond_json(reply.answer.code, reply.answer.doc, reply.answer.headers)


class HarnessHttpServer(HttpFront):
    """Binds at once (so its URL is known); serves once `start(actor)` names the actor behind it."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, long_poll: float = LONG_POLL_SECONDS,
                 clock: Clock | None = None, ports: int = 1) -> None:
        self._app = HarnessApp(long_poll, clock)
        self._http = HttpServer(self._app, host=host, port=port, name="fake-harness-http")
        self._app.closing = self._http.closing
        # `ports` > 1: as many addresses, each Sandbox at one of them in turn (`OperatorCore.endpoints`).
        self.urls = [self._http.url, *self._http.listen_more(ports - 1)] if ports > 1 else [self._http.url]

    def start(self, actor: pykka.ActorRef[Any]) -> None:
        self._app.actor = actor
        self._http.start()

    def stop(self) -> None:
        self._http.closing.set()
        tell_quietly(self._app.actor, Run(lambda core: None))  # wake long-polls
        self._http.stop()
