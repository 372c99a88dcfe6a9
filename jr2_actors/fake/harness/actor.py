"""The fake Harness over loopback HTTP: one listener for every Sandbox's Harness and the Instance Harness.

A Sandbox's endpoint is `<base>/<sandboxName>` (the operator publishes it); the Instance Harness is
`<base>/_instance`. Every route but `/healthz` needs the bearer token whose digest the Sandbox's env
carries (`JR2_HARNESS_TOKEN_SHA256`), checked in constant time, and a `401 {"error":"unauthorized"}`
comes before any other answer. A Sandbox that is not `Ready` has no Harness serving: 503.

HTTP threads ask the `HarnessActor`, which alone holds the `HarnessCore`. A long-poll that finds no event
waits on the actor's change signal, up to the long-poll window (25 s by default), then answers 204.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

import pykka

from jr2_actors.clock import Clock
from jr2_actors.fake.apiserver.actor import ASK_TIMEOUT, Call
from jr2_actors.fake.apiserver.state import StatusError
from jr2_actors.fake.harness.core import INSTANCE, Answer, HarnessCore, KillHarness
from jr2_actors.harness.tokens import DIGEST_ENV, verify_bearer
from jr2_actors.kube.kinds import SANDBOX

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
LONG_POLL_SECONDS = 25.0


@dataclass(frozen=True)
class HarnessRequest:
    sandbox: str
    method: str
    parts: tuple[str, ...]
    query: dict[str, str]
    authorization: str
    body: bytes = field(repr=False)


@dataclass(frozen=True)
class HarnessReply:
    answer: Answer
    raw: bytes | None = None
    changed: threading.Event | None = None  # set when any conversation changes (for a long-poll)


@dataclass(frozen=True)
class Operate:
    """Run `fn(core)` inside the actor: scripts, draining, hostile kill lists — from tests and users."""

    fn: Any


class HarnessActor(pykka.ThreadingActor):
    def __init__(self, api: pykka.ActorRef[Any], namespace: str, clock: Clock, *, base_url: str,
                 instance_digest: str = "", kill_harness: Any = None) -> None:
        super().__init__()
        self.api = api
        self.namespace = namespace
        self.clock = clock
        self.core = HarnessCore()
        self.instance_digest = instance_digest
        self.kill_harness = kill_harness  # (sandbox name, message) → None: the operator marks OOMKilled
        self.base_url = base_url
        self._changed = threading.Event()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, HarnessRequest):
            return self._request(message)
        if isinstance(message, Operate):
            result = message.fn(self.core)
            self._signal()
            return result
        return None

    def on_stop(self) -> None:
        self._changed.set()

    def _signal(self) -> None:
        changed, self._changed = self._changed, threading.Event()
        changed.set()

    def _request(self, req: HarnessRequest) -> HarnessReply:
        parts = req.parts
        if parts == ("healthz",) and req.method == "GET":
            return HarnessReply(Answer(200, {"ok": True})) if self._serving(req.sandbox) else _not_serving()
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
        effects: list[KillHarness] = []
        if parts == ("attach",) and req.method == "POST":
            answer = self.core.attach(req.sandbox, body)
        elif parts == ("memory-kills",) and req.method == "GET":
            return HarnessReply(Answer(200, None), raw=self.core.memory_kills(req.sandbox))
        elif len(parts) == 3 and parts[0] == "agents" and req.method == "POST":
            answer, effects = self.core.admit(req.sandbox, parts[1], parts[2], body, now)
            if answer.code == 200:
                answer = Answer(200, {**answer.doc, "streamUrl": self._stream_url(req.sandbox, parts[1], parts[2])})
        elif len(parts) == 4 and parts[0] == "agents" and parts[3] == "abort" and req.method == "POST":
            answer = self.core.abort(req.sandbox, parts[1], parts[2])
        elif len(parts) == 4 and parts[0] == "agents" and parts[3] == "answers" and req.method == "POST":
            answer, effects = self.core.answer(req.sandbox, parts[1], parts[2], body, now)
        elif len(parts) == 3 and parts[0] == "streams" and req.method == "GET":
            answer = self.core.poll(req.sandbox, parts[1], parts[2], req.query.get("offset", "0"))
            return HarnessReply(answer, changed=self._changed if answer.code == 204 else None)
        else:
            return HarnessReply(Answer(404, {"error": f"no route {req.method} /{'/'.join(parts)}"}))
        for effect in effects:
            if self.kill_harness is not None:
                self.kill_harness(effect.sandbox, effect.message)
        self._signal()
        return HarnessReply(answer)

    def _stream_url(self, sandbox: str, agent: str, conversation: str) -> str:
        return f"{self.base_url}/{sandbox}/streams/{agent}/{conversation}"

    def _sandbox(self, name: str) -> dict[str, Any] | None:
        ns = self.namespace
        try:
            return cast(dict[str, Any], self.api.ask(Call(lambda s: s.get(SANDBOX, ns, name)), timeout=ASK_TIMEOUT))
        except StatusError:
            return None

    def _digest(self, sandbox: str) -> str | None:
        if sandbox == INSTANCE:
            return self.instance_digest or None
        obj = self._sandbox(sandbox)
        if obj is None:
            return None
        env = (obj.get("spec") or {}).get("env") or []
        for var in env if isinstance(env, list) else []:
            if isinstance(var, dict) and var.get("name") == DIGEST_ENV and isinstance(var.get("value"), str):
                return str(var["value"])
        return ""

    def _serving(self, sandbox: str) -> bool:
        if sandbox == INSTANCE:
            return True
        obj = self._sandbox(sandbox)
        return obj is not None and (obj.get("status") or {}).get("phase") == "Ready"


def _not_serving() -> HarnessReply:
    return HarnessReply(Answer(503, {"error": "no Harness serves here (the Sandbox is not Ready)"}))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    actor: pykka.ActorRef[Any]
    closing: threading.Event
    long_poll: float


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("fake harness: " + format, *args)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send(413, {"error": "body too large"})
            self.close_connection = True
            return
        body = self.rfile.read(length) if length else b""
        segments = [unquote(p) for p in url.path.strip("/").split("/") if p]
        if not segments:
            self._send(404, {"error": "no Harness named"})
            return
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        req = HarnessRequest(segments[0], self.command, tuple(segments[1:]), query,
                             self.headers.get("Authorization", ""), body)
        waited = False
        while True:
            try:
                reply = cast(HarnessReply, self.server.actor.ask(req, timeout=ASK_TIMEOUT))
            except (pykka.ActorDeadError, pykka.Timeout):
                self._send(503, {"error": "the fake Harness is stopping"})
                return
            if reply.changed is None or waited:
                break
            # Long-poll: wait for any change, then look once more.
            waited = True
            if not reply.changed.wait(self.server.long_poll) or self.server.closing.is_set():
                break
        self._send(reply.answer.code, reply.answer.doc, reply.answer.headers, reply.raw)

    def _send(self, code: int, doc: Any, headers: tuple[tuple[str, str], ...] = (), raw: bytes | None = None) -> None:
        body = raw if raw is not None else (b"" if code == 204 else json.dumps(doc).encode())
        self.send_response(code)
        if code != 204:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)


class HarnessHttpServer:
    """Binds at once (so its URL is known); serves once `start(actor)` names the actor behind it."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, long_poll: float = LONG_POLL_SECONDS) -> None:
        self._server = _Server((host, port), _Handler)
        self._server.closing = threading.Event()
        self._server.long_poll = long_poll
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-harness-http", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self, actor: pykka.ActorRef[Any]) -> None:
        self._server.actor = actor
        self._thread.start()

    def stop(self) -> None:
        self._server.closing.set()
        with contextlib.suppress(pykka.ActorDeadError, AttributeError):
            self._server.actor.tell(Operate(lambda core: None))  # wake long-polls
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
