"""The fake API server: a pykka actor owning `ClusterState`, served over loopback HTTP (fake/http.py).

Theory of operation: HTTP connection threads (outside the actor system) read a request and ask the
`ApiServerActor`, which alone touches the store, the fault knobs, the token and the request log — so there
is no lock around any of them. The actor checks the token, spends an injected fault, and hands the request
to the pure routes (rest.py). A watch is answered with its initial frames and a queue; the store's
sink puts each later frame on that queue, stamped with the write's time beside its object (issue 11:
`WATCH_WRITTEN_AT_FIELD`, which real clients ignore), and the connection thread streams it as one chunked line,
adding bookmarks (of the watched kind) on the configured interval and ending at `timeoutSeconds` (with a
last bookmark just before, as a real server does). A stalled watch sends nothing at all, bookmarks
included, and keeps its socket open.

Fault knobs (docs/fake-cluster.md): each is one `Knob` class here — its fields, its route under
`/_fake/`, and what it does; the actor's dispatch, the HTTP route and `FakeCluster`'s method all use it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import secrets
import ssl
import tempfile
import threading
import typing
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, cast

import pykka

from jr2_actors.fake.apiserver import discovery, rest
from jr2_actors.fake.apiserver.rest import ApiAnswer, ApiRequest, WatchSpec, status_answer
from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.apiserver.status import StatusError
from jr2_actors.fake.http import HttpServer, Request, json_args
from jr2_actors.fake.messages import Run
from jr2_actors.shell import Shell
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.values.constants import WATCH_WRITTEN_AT_FIELD
from jr2_actors.values.security import constant_time_equal

log = logging.getLogger(__name__)

ASK_TIMEOUT = 10.0
REQUEST_LOG_SIZE = 10_000
_END = object()


# -- messages ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ApiCall:
    request: ApiRequest
    authorization: str
    delayed: bool = False  # the injected latency was already waited for


@dataclass(frozen=True)
class Delay:
    """The answer to an `ApiCall` while latency is injected: wait this long, then call again, delayed."""

    seconds: float


@dataclass(frozen=True)
class Opened:
    """The answer to a watch: its first frames are on the ticket's queue already."""

    ticket: WatchTicket


@dataclass(frozen=True)
class Unwatch:
    ticket: WatchTicket


@dataclass(frozen=True)
class CurrentVersion:
    pass


class WatchTicket:
    """One open watch: what it asked for, its queue of frames and whether it has been stalled."""

    def __init__(self, spec: WatchSpec) -> None:
        self.spec = spec
        self.wid: int | None = None
        self.queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.stalled = threading.Event()

    def end(self) -> None:
        self.queue.put(_END)


# -- fault knobs: each declared once -------------------------------------------------------------------

@dataclass(frozen=True)
class Knob:
    """A fault knob: `route` under /_fake/ (method, name), built from a JSON body by `from_args` (the
    fields in camelCase), applied inside the actor by `apply`."""

    route: ClassVar[tuple[str, str]]

    def apply(self, server: ApiServerActor) -> Any:
        raise NotImplementedError

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Knob:
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        known = {_camel(f.name): f.name for f in fields(cls)}
        for key, value in args.items():
            if key not in known:
                raise ValueError(f"unknown argument {key!r} (takes {', '.join(sorted(known)) or 'none'})")
            values[known[key]] = _coerce(key, value, hints[known[key]])
        try:
            return cls(**values)
        except TypeError as e:
            raise ValueError(str(e)) from None


@dataclass(frozen=True)
class EndWatches(Knob):
    """Every open watch ends cleanly (the chunked stream closes)."""

    route = ("POST", "end-watches")

    def apply(self, server: ApiServerActor) -> None:
        server.end_watches()


@dataclass(frozen=True)
class StallWatches(Knob):
    """Open watches stay open and send nothing, bookmarks included."""

    on: bool = True
    route = ("POST", "stall")

    def apply(self, server: ApiServerActor) -> None:
        for t in server.tickets.values():
            if self.on:
                t.stalled.set()
            else:
                t.stalled.clear()


@dataclass(frozen=True)
class Compact(Knob):
    """The history is forgotten: a resume from before now gets the 410 frame."""

    route = ("POST", "compact")

    def apply(self, server: ApiServerActor) -> None:
        server.state.compact()


@dataclass(frozen=True)
class FailNext(Knob):
    """The next `count` requests (only watch opens when `watch_only`) get `status`, with Retry-After."""

    status: int
    count: int = 1
    retry_after: int | None = None
    watch_only: bool = False
    route = ("POST", "fail")

    def apply(self, server: ApiServerActor) -> None:
        if not 100 <= self.status <= 599 or self.count < 0:
            raise ValueError("status must be an HTTP status (100-599) and count not negative")
        server.faults.extend([FailNext(self.status, 1, self.retry_after, self.watch_only)] * self.count)


@dataclass(frozen=True)
class Away(Knob):
    """The control plane is away (an apiserver restart, a partition): while `on`, every request gets
    `status` and open watches end; turning it off brings the server back as it was."""

    on: bool = True
    status: int = 503
    route = ("POST", "away")

    def apply(self, server: ApiServerActor) -> None:
        if not 100 <= self.status <= 599:
            raise ValueError("status must be an HTTP status (100-599)")
        server.away = self.status if self.on else 0
        if self.on:
            server.end_watches()


@dataclass(frozen=True)
class SetLatency(Knob):
    """Each request reaches the server only after this delay."""

    seconds: float
    route = ("POST", "latency")

    def apply(self, server: ApiServerActor) -> None:
        server.latency = max(0.0, self.seconds)


@dataclass(frozen=True)
class Restart(Knob):
    """Watches end; versions and objects are kept; faults and latency cleared."""

    route = ("POST", "restart")

    def apply(self, server: ApiServerActor) -> None:
        server.end_watches()
        server.faults.clear()
        server.latency = 0.0
        server.away = 0


@dataclass(frozen=True)
class RotateToken(Knob):
    """A new bearer token (the old one gets 401); the token file, and each kubeconfig `FakeCluster` wrote,
    holds the new one."""

    route = ("POST", "rotate-token")

    def apply(self, server: ApiServerActor) -> str:
        server.token = secrets.token_urlsafe(24)
        server.write_token_file()
        if server.on_token is not None:
            server.on_token(server.token)
        return server.token  # to the caller in process only: over HTTP the answer is {"ok": true}


@dataclass(frozen=True)
class RequestLog(Knob):
    """The request log: method, path, query, content type, watch or not, time."""

    clear: bool = False
    route = ("GET", "requests")

    def apply(self, server: ApiServerActor) -> dict[str, Any]:
        entries = list(server.log)
        if self.clear:
            server.log.clear()
        return {"requests": entries}


@dataclass(frozen=True)
class ClearRequestLog(RequestLog):
    """Empties the request log."""

    clear: bool = True
    route = ("DELETE", "requests")


@dataclass(frozen=True)
class WatchStats(Knob):
    """Open watches now, the most ever open at once, how many were opened."""

    route = ("GET", "watches")

    def apply(self, server: ApiServerActor) -> dict[str, int]:
        return {"open": len(server.tickets), "maxOpen": server.max_open_watches, "opened": server.watches_opened}


KNOBS: dict[tuple[str, str], type[Knob]] = {k.route: k for k in (
    EndWatches, StallWatches, Compact, FailNext, Away, SetLatency, Restart, RotateToken, RequestLog, ClearRequestLog,
    WatchStats)}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _coerce(key: str, value: object, hint: Any) -> Any:
    allowed = typing.get_args(hint) or (hint,)
    if value is None and type(None) in allowed:
        return None
    for t in allowed:
        if t is bool and isinstance(value, bool):
            return value
        if t is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if t is float and isinstance(value, int | float) and not isinstance(value, bool) and value == value:
            return float(value)
    raise ValueError(f"{key}: {value!r} is not a {' or '.join(getattr(t, '__name__', str(t)) for t in allowed)}")


# -- the actor ---------------------------------------------------------------------------------------

class ApiServerActor(Shell):
    name = "apiserver"

    def __init__(self, state: ClusterState, *, token: str | None, clock: Clock,
                 token_file: str | None = None, on_token: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.state = state
        self.clock = clock
        self.token = token
        self.token_file = token_file
        self.on_token = on_token  # told each new token after a rotation (FakeCluster rewrites its kubeconfigs)
        self.faults: list[FailNext] = []
        self.away = 0  # while not 0, every request is answered this status (the control plane is away)
        self.latency = 0.0
        self.tickets: dict[int, WatchTicket] = {}
        self.log: deque[dict[str, Any]] = deque(maxlen=REQUEST_LOG_SIZE)  # bounded: the CLI runs for days
        self.max_open_watches = 0
        self.watches_opened = 0
        self.write_token_file()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, ApiCall):
            return self._call(message)
        if isinstance(message, Unwatch):
            if message.ticket.wid is not None:
                self.state.unsubscribe(message.ticket.wid)
                self.tickets.pop(message.ticket.wid, None)
            return None
        if isinstance(message, CurrentVersion):
            return self.state.rv
        if isinstance(message, Knob):
            return message.apply(self)
        if isinstance(message, Run):
            return message.fn(self.state)
        return None

    def cleanup(self) -> None:
        self.end_watches()

    def end_watches(self) -> None:
        for wid, ticket in list(self.tickets.items()):
            self.state.unsubscribe(wid)
            ticket.end()
        self.tickets.clear()

    def write_token_file(self) -> None:
        if self.token_file and self.token:
            write_atomically(self.token_file, self.token)

    def _call(self, call: ApiCall) -> ApiAnswer | Delay | Opened:
        req = call.request
        if self.latency and not call.delayed:
            return Delay(self.latency)  # the request reaches the server only after the delay
        self.log.append({"method": req.method, "path": req.path, "query": dict(req.query),
                         "contentType": req.content_type, "watch": req.is_watch, "at": self.clock.wall()})
        if self.token is not None and not constant_time_equal(call.authorization, f"Bearer {self.token}"):
            return status_answer(StatusError(401, "Unauthorized", "Unauthorized"))
        if self.away:
            return status_answer(StatusError(self.away, _REASONS.get(self.away, "InternalError"),
                                             "the control plane is away"))
        for i, fault in enumerate(self.faults):
            if req.is_watch or not fault.watch_only:
                del self.faults[i]
                headers = (("Retry-After", str(fault.retry_after)),) if fault.retry_after is not None else ()
                reason = _REASONS.get(fault.status, "InternalError")
                return status_answer(StatusError(fault.status, reason, f"injected {fault.status}"), headers)
        answer = rest.serve(req, self.state, self.clock.wall())
        if answer.watch is None:
            return answer
        try:
            return self._open_watch(answer.watch)
        except StatusError as e:
            return status_answer(e)

    def _open_watch(self, spec: WatchSpec) -> Opened:
        ticket = WatchTicket(spec)
        wall, put = self.clock.wall, ticket.queue.put

        def sink(frame: dict[str, Any]) -> None:  # called during the write: its time is the write's
            put({**frame, WATCH_WRITTEN_AT_FIELD: wall()})

        initial, wid = self.state.subscribe(spec.kind, spec.namespace, spec.labels, spec.since, sink, spec.fields)
        for frame in initial:
            ticket.queue.put(frame)
        if wid is None:
            ticket.end()  # the 410 frame, then the end of the stream
        else:
            ticket.wid = wid
            self.tickets[wid] = ticket
            self.watches_opened += 1
            self.max_open_watches = max(self.max_open_watches, len(self.tickets))
        return Opened(ticket)


def write_atomically(path: str, text: str) -> None:
    """`path` holds `text` (mode 0600), written to a temp file in the same folder and then renamed over it:
    a reader (a client reading the token file on every request, a process waiting for a kubeconfig)
    sees the old whole file or the new whole file, never half of one, and a failed write leaves the old."""
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            410: "Expired", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable", 504: "Timeout"}


# -- HTTP --------------------------------------------------------------------------------------------

class ApiApp:
    """What each HTTP connection thread does: read, ask the actor, write the answer or stream the watch."""

    def __init__(self, actor: pykka.ActorRef[Any], clock: Clock, bookmark_interval: float | None) -> None:
        self.actor = actor
        self.clock = clock
        self.bookmark_interval = bookmark_interval
        self.closing = threading.Event()

    def handle(self, r: Request) -> None:
        path = r.url_path
        if path.startswith("/_fake/"):
            self._control(r, path)
            return
        body = r.read_body(rest.MAX_REQUEST_BODY)
        if body is None:
            r.respond_json(413, StatusError(413, "RequestEntityTooLarge", "request is too large").status())
            return
        call = ApiCall(ApiRequest(r.command, path, r.query, r.headers.get("Content-Type", ""),
                                  r.headers.get("Accept", ""), body, r.headers.get("User-Agent", "")),
                       r.headers.get("Authorization", ""))
        try:
            answer = self.actor.ask(call, timeout=ASK_TIMEOUT)
            if isinstance(answer, Delay):
                self.closing.wait(answer.seconds)
                answer = self.actor.ask(ApiCall(call.request, call.authorization, delayed=True), timeout=ASK_TIMEOUT)
        except (pykka.ActorDeadError, pykka.Timeout):
            r.respond_json(503, StatusError(503, "ServiceUnavailable", "the fake API server is stopping").status())
            return
        if isinstance(answer, Opened):
            self._stream(r, answer.ticket)
            return
        answer = cast(ApiAnswer, answer)
        r.respond_json(answer.code, answer.doc, answer.headers)

    def _control(self, r: Request, path: str) -> None:
        knob_class = KNOBS.get((r.command, path.removeprefix("/_fake/").rstrip("/")))
        body = r.read_body(1024 * 1024) or b""
        if knob_class is None:
            r.respond_json(404, {"error": f"no fake control at {r.command} {path}"})
            return
        try:
            knob = knob_class.from_args(json_args(body))
            doc = self.actor.ask(knob, timeout=ASK_TIMEOUT)
        except ValueError as e:
            r.respond_json(400, {"error": str(e)})
            return
        except (pykka.ActorDeadError, pykka.Timeout):
            r.respond_json(503, {"error": "the fake API server is stopping"})
            return
        r.respond_json(200, doc if isinstance(doc, dict) else {"ok": True})

    def _stream(self, r: Request, ticket: WatchTicket) -> None:
        spec = ticket.spec
        clock = self.clock
        r.start_chunked()
        deadline = clock.monotonic() + spec.timeout_seconds
        interval = self.bookmark_interval if spec.bookmarks else None
        next_bookmark = clock.monotonic() + interval if interval else None
        r.close_connection = True  # until the stream ends cleanly; then the connection is reusable
        try:
            while not self.closing.is_set():
                if ticket.stalled.is_set():
                    # Sends nothing; notices at once a client that gives up on it (its stall bound).
                    if r.peer_gone(wait=0.05):
                        return
                    if _drain(ticket.queue):  # what would have been sent is lost, as on a blackholed link
                        return
                    continue
                now = clock.monotonic()
                if now >= deadline:
                    if spec.bookmarks:
                        self._bookmark(r, spec)
                    break
                wait = deadline - now
                if next_bookmark is not None:
                    wait = min(wait, max(next_bookmark - now, 0.0))
                try:
                    item = ticket.queue.get(timeout=min(wait, 0.5))
                except queue.Empty:
                    if next_bookmark is not None and interval and clock.monotonic() >= next_bookmark:
                        self._bookmark(r, spec)
                        next_bookmark = clock.monotonic() + interval
                    continue
                if item is _END:
                    break
                if ticket.stalled.is_set():
                    continue  # a blackholed connection: what would have been sent is lost
                r.chunk(_line(self._framed(cast(dict[str, Any], item), spec)))
            r.end_chunked()
            r.close_connection = self.closing.is_set()
        except OSError:
            pass  # the client went away
        finally:
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                self.actor.ask(Unwatch(ticket), timeout=ASK_TIMEOUT)

    def _framed(self, frame: dict[str, Any], spec: WatchSpec) -> dict[str, Any]:
        if spec.table and frame.get("type") in ("ADDED", "MODIFIED", "DELETED"):
            obj = frame["object"]
            return {"type": frame["type"],
                    "object": discovery.table(spec.kind, [obj], obj["metadata"]["resourceVersion"],
                                              self.clock.wall())}
        return frame

    def _bookmark(self, r: Request, spec: WatchSpec) -> None:
        try:
            rv = self.actor.ask(CurrentVersion(), timeout=ASK_TIMEOUT)
        except (pykka.ActorDeadError, pykka.Timeout):
            return
        # A bookmark carries the watched kind and only a resourceVersion (CONTRACTS.md §2).
        r.chunk(_line({"type": "BOOKMARK", "object": {"kind": spec.kind.kind, "apiVersion": spec.kind.api_version,
                                                      "metadata": {"resourceVersion": str(rv)}}}))


def _drain(frames: queue.SimpleQueue[object]) -> bool:
    """Drop every queued frame; True when the end of the stream was among them."""
    while True:
        try:
            if frames.get_nowait() is _END:
                return True
        except queue.Empty:
            return False


def _line(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame, separators=(",", ":")).encode() + b"\n"


class ApiHttpServer:
    """The loopback listener in front of an `ApiServerActor`."""

    def __init__(self, actor: pykka.ActorRef[Any], *, host: str = "127.0.0.1", port: int = 0,
                 clock: Clock | None = None, bookmark_interval: float | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self._app = ApiApp(actor, clock or SystemClock(), bookmark_interval)
        self._http = HttpServer(self._app, host=host, port=port, name="fake-apiserver-http", tls=tls)
        self._app.closing = self._http.closing

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        return self._http.url

    def start(self) -> None:
        self._http.start()

    def stop(self) -> None:
        self._http.stop()
