"""The fake API server: a pykka actor owning `ClusterState`, served over loopback HTTP.

Theory of operation: HTTP handler threads parse a request and `ask` the `ApiServerActor`, which alone
touches the object store, the fault knobs, the tokens and the request log — so there is no lock around
any of them. A watch request is answered with its initial frames and a queue; the actor puts each later
event on that queue and the handler thread streams it as one chunked line, adding bookmarks on the
configured interval and ending at `timeoutSeconds` (with a last bookmark just before, as a real server
does). A stalled watch sends nothing at all, bookmarks included, and keeps its socket open.

Faults (`Faults`, over HTTP under `/_fake/`, see docs/fake-cluster.md): end every open watch, stall
open watches, compact history, fail the next N requests with a status (and Retry-After), add latency,
restart (watches end, versions kept), rotate the bearer token, and a request log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import secrets
import select
import ssl
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

import pykka
import yaml

from jr2_actors.clock import Clock, SystemClock
from jr2_actors.fake.apiserver import discovery
from jr2_actors.fake.apiserver.selectors import SelectorError, parse
from jr2_actors.fake.apiserver.state import ClusterState, StatusError
from jr2_actors.kube.kinds import NAMESPACE, Kind
from jr2_actors.security import constant_time_equal

log = logging.getLogger(__name__)

MAX_REQUEST_BODY = 3 * 1024 * 1024  # the API server's own request limit
ASK_TIMEOUT = 10.0
REQUEST_LOG_SIZE = 10_000
_END = object()


# -- messages ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ApiRequest:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    accept: str
    authorization: str
    body: bytes = field(repr=False)


@dataclass(frozen=True)
class ApiAnswer:
    code: int
    doc: Any
    headers: tuple[tuple[str, str], ...] = ()
    watch: WatchTicket | None = None


@dataclass(frozen=True)
class Unwatch:
    ticket: WatchTicket


@dataclass(frozen=True)
class CurrentVersion:
    pass


@dataclass(frozen=True)
class CurrentLatency:
    pass


@dataclass(frozen=True)
class Fault:
    """Fail the next `count` requests (only watch opens when `watch_only`) with `status`."""

    count: int
    status: int
    retry_after: int | None = None
    watch_only: bool = False


@dataclass(frozen=True)
class SetLatency:
    seconds: float


@dataclass(frozen=True)
class EndWatches:
    pass


@dataclass(frozen=True)
class StallWatches:
    on: bool = True


@dataclass(frozen=True)
class Compact:
    pass


@dataclass(frozen=True)
class Restart:
    pass


@dataclass(frozen=True)
class RotateToken:
    pass


@dataclass(frozen=True)
class RequestLog:
    clear: bool = False


@dataclass(frozen=True)
class WatchStats:
    pass


@dataclass(frozen=True)
class Call:
    """Run `fn(state)` inside the actor: how in-process peers (the operator, tests) use the store."""

    fn: Callable[[ClusterState], Any]


class WatchTicket:
    """One open watch: its queue of frames and whether it has been stalled."""

    def __init__(self, wid: int | None, table: bool) -> None:
        self.wid = wid
        self.table = table
        self.queue: queue.Queue[object] = queue.Queue()
        self.stalled = threading.Event()

    def end(self) -> None:
        self.queue.put(_END)


# -- the actor ---------------------------------------------------------------------------------------

class ApiServerActor(pykka.ThreadingActor):
    def __init__(self, state: ClusterState, *, token: str | None, clock: Clock,
                 token_file: str | None = None) -> None:
        super().__init__()
        self.state = state
        self.clock = clock
        self.token = token
        self.token_file = token_file
        self.faults: list[Fault] = []
        self.latency = 0.0
        self.tickets: dict[int, WatchTicket] = {}
        self.log: deque[dict[str, Any]] = deque(maxlen=REQUEST_LOG_SIZE)  # bounded: the CLI runs for days
        self.open_watches = 0
        self.max_open_watches = 0
        self.watches_opened = 0
        self._write_token_file()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, ApiRequest):
            return self._request(message)
        if isinstance(message, Unwatch):
            if message.ticket.wid is not None:
                self.state.unsubscribe(message.ticket.wid)
                if self.tickets.pop(message.ticket.wid, None) is not None:
                    self.open_watches -= 1
            return None
        if isinstance(message, CurrentVersion):
            return self.state.rv
        if isinstance(message, CurrentLatency):
            return self.latency
        if isinstance(message, Call):
            return message.fn(self.state)
        if isinstance(message, Fault):
            self.faults.extend([Fault(1, message.status, message.retry_after, message.watch_only)] * message.count)
        elif isinstance(message, SetLatency):
            self.latency = max(0.0, message.seconds)
        elif isinstance(message, EndWatches):
            self._end_watches()
        elif isinstance(message, StallWatches):
            for t in self.tickets.values():
                if message.on:
                    t.stalled.set()
                else:
                    t.stalled.clear()
        elif isinstance(message, Compact):
            self.state.compact()
        elif isinstance(message, Restart):
            self._end_watches()
            self.faults.clear()
            self.latency = 0.0
        elif isinstance(message, RotateToken):
            self.token = secrets.token_urlsafe(24)
            self._write_token_file()
            return self.token
        elif isinstance(message, RequestLog):
            entries = list(self.log)
            if message.clear:
                self.log.clear()
            return entries
        elif isinstance(message, WatchStats):
            return {"open": self.open_watches, "maxOpen": self.max_open_watches, "opened": self.watches_opened}
        return None

    def on_stop(self) -> None:
        self._end_watches()

    def _end_watches(self) -> None:
        for wid, ticket in list(self.tickets.items()):
            self.state.unsubscribe(wid)
            ticket.end()
        self.open_watches -= len(self.tickets)
        self.tickets.clear()

    def _write_token_file(self) -> None:
        if self.token_file and self.token:
            with open(self.token_file, "w", encoding="utf-8") as f:
                f.write(self.token)

    def _request(self, req: ApiRequest) -> ApiAnswer:
        is_watch = req.query.get("watch") in ("true", "1")
        self.log.append({"method": req.method, "path": req.path, "query": dict(req.query),
                         "contentType": req.content_type, "watch": is_watch, "at": self.clock.wall()})
        if self.token is not None and not constant_time_equal(req.authorization, f"Bearer {self.token}"):
            return _status(StatusError(401, "Unauthorized", "Unauthorized"))
        for i, fault in enumerate(self.faults):
            if is_watch or not fault.watch_only:
                del self.faults[i]
                headers = (("Retry-After", str(fault.retry_after)),) if fault.retry_after is not None else ()
                reason = _REASONS.get(fault.status, "InternalError")
                return ApiAnswer(fault.status, StatusError(fault.status, reason, f"injected {fault.status}").status(),
                                 headers)
        try:
            answer = self._route(req, is_watch)
        except StatusError as e:
            answer = _status(e)
        return answer

    def _route(self, req: ApiRequest, is_watch: bool) -> ApiAnswer:
        path = req.path.rstrip("/") or "/"
        parts = [unquote(p) for p in path.strip("/").split("/")] if path != "/" else []
        if path in ("/healthz", "/readyz", "/livez"):
            return ApiAnswer(200, "ok")
        if path == "/version":
            return ApiAnswer(200, discovery.SERVER_VERSION)
        if path == "/api":
            return ApiAnswer(200, discovery.api_versions("127.0.0.1"))
        if path == "/apis":
            return ApiAnswer(200, discovery.api_groups())
        if path == "/openapi/v3":
            return ApiAnswer(200, discovery.openapi_v3_root())
        if path.startswith("/openapi/v3/"):
            doc = discovery.openapi_v3(path.removeprefix("/openapi/v3/"))
            return ApiAnswer(200, doc) if doc else _nf()
        if len(parts) == 2 and parts[0] == "apis":
            group = discovery.api_group(parts[1])
            return ApiAnswer(200, group) if group else _nf()
        if parts[:2] == ["api", "v1"]:
            api_version, rest = "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return _nf()
        if not rest:
            doc = discovery.resource_list(api_version)
            return ApiAnswer(200, doc) if doc else _nf()
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        kind = discovery.kind_for(api_version, rest[0])
        if kind is None or (kind.namespaced and namespace is None and len(rest) > 1):
            return _nf()
        if kind is NAMESPACE and namespace is not None:
            return _nf()
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) >= 3 else None
        if len(rest) > 3:
            return _nf()
        return self._resource(req, kind, namespace, name, sub, is_watch)

    def _resource(self, req: ApiRequest, kind: Kind, ns: str | None, name: str | None, sub: str | None,
                  is_watch: bool) -> ApiAnswer:
        selector = _selector(req.query.get("labelSelector"))
        now = self.clock.wall()
        if name is None:
            if req.method == "GET" and is_watch:
                return self._open_watch(req, kind, ns, selector)
            if req.method == "GET":
                doc = self.state.list_objects(kind, ns, selector)
                if discovery.wants_table(req.accept):
                    doc = discovery.table(doc["items"], doc["metadata"]["resourceVersion"], now)
                return ApiAnswer(200, doc)
            if req.method == "POST":
                return ApiAnswer(201, self.state.create(kind, ns, _body(req), now=now))
            return _not_allowed(req.method)
        if req.method == "GET":
            obj = self.state.get(kind, ns, name)
            if sub not in (None, "status"):
                return _nf()
            if discovery.wants_table(req.accept):
                return ApiAnswer(200, discovery.table([obj], obj["metadata"]["resourceVersion"], now))
            return ApiAnswer(200, obj)
        if req.method == "PATCH":
            ctype = req.content_type.split(";")[0].strip()
            if ctype == "application/apply-patch+yaml":
                if sub is not None:
                    return _nf()
                if req.query.get("force") not in (None, "true", "false"):
                    raise StatusError(400, "BadRequest", "force: invalid value")
                existed = self._exists(kind, ns, name)
                obj = self.state.apply(kind, ns, name, _body(req, yaml_ok=True),
                                       manager=req.query.get("fieldManager", ""), now=now)
                return ApiAnswer(200 if existed else 201, obj)
            if ctype == "application/merge-patch+json":
                return ApiAnswer(200, self.state.merge_patch(kind, ns, name, _body(req, any_json=True),
                                                             subresource=sub))
            raise StatusError(415, "UnsupportedMediaType",
                              f"the body of the request was in an unknown format - accepted media types include: "
                              f"application/merge-patch+json, application/apply-patch+yaml (got {ctype!r})")
        if req.method == "PUT":
            body = _body(req)
            current = self.state.get(kind, ns, name)
            sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
                group = f".{kind.group}" if kind.group else ""
                raise StatusError(409, "Conflict", f'Operation cannot be fulfilled on {kind.plural}{group} "{name}": '
                                                   "the object has been modified; please apply your changes to the "
                                                   "latest version and try again")
            patch = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
            for key in [k for k in current if k not in patch and k not in ("apiVersion", "kind", "metadata")]:
                patch[key] = None
            return ApiAnswer(200, self.state.merge_patch(kind, ns, name, patch, subresource=sub))
        if req.method == "DELETE" and sub is None:
            return ApiAnswer(200, self.state.delete(kind, ns, name))
        return _not_allowed(req.method)

    def _exists(self, kind: Kind, ns: str | None, name: str) -> bool:
        try:
            self.state.get(kind, ns, name)
        except StatusError:
            return False
        return True

    def _open_watch(self, req: ApiRequest, kind: Kind, ns: str | None, selector: Any) -> ApiAnswer:
        ticket = WatchTicket(None, discovery.wants_table(req.accept))
        initial, wid = self.state.subscribe(kind, ns, selector, req.query.get("resourceVersion"),
                                            ticket.queue.put)
        for frame in initial:
            ticket.queue.put(frame)
        if wid is None:
            ticket.end()  # the 410 frame, then the end of the stream
        else:
            ticket.wid = wid
            self.tickets[wid] = ticket
            self.open_watches += 1
            self.watches_opened += 1
            self.max_open_watches = max(self.max_open_watches, self.open_watches)
        return ApiAnswer(200, None, watch=ticket)


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            410: "Expired", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable", 504: "Timeout"}


def _status(e: StatusError) -> ApiAnswer:
    return ApiAnswer(e.code, e.status())


def _nf() -> ApiAnswer:
    return _status(StatusError(404, "NotFound", "the server could not find the requested resource"))


def _not_allowed(method: str) -> ApiAnswer:
    return _status(StatusError(405, "MethodNotAllowed", f"the server does not allow this method ({method}) here"))


def _selector(text: str | None) -> Any:
    try:
        return parse(text)
    except SelectorError as e:
        raise StatusError(400, "BadRequest", str(e)) from e


def _body(req: ApiRequest, *, yaml_ok: bool = False, any_json: bool = False) -> Any:
    try:
        doc = json.loads(req.body)
    except (ValueError, RecursionError):
        doc = None
        if yaml_ok:
            try:
                doc = yaml.safe_load(req.body)
            except (yaml.YAMLError, RecursionError):
                doc = None
        if doc is None:
            raise StatusError(400, "BadRequest", "the body of the request could not be decoded as JSON") from None
    if not any_json and not isinstance(doc, dict):
        raise StatusError(400, "BadRequest", "the body of the request is not a JSON object")
    return doc


# -- HTTP --------------------------------------------------------------------------------------------

class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    actor: pykka.ActorRef[Any]
    clock: Clock
    bookmark_interval: float | None
    closing: threading.Event


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("fake apiserver: " + format, *args)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        url = urlsplit(self.path)
        if url.path.startswith("/_fake/"):
            self._fake_control(url.path, self._read_body())
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BODY:
            remaining = length  # drain what the client sends (never held), then answer as a server does
            while remaining > 0 and remaining <= 16 * MAX_REQUEST_BODY:
                chunk = self.rfile.read(min(remaining, 65536))
                if not chunk:
                    break
                remaining -= len(chunk)
            self._send_json(413, StatusError(413, "RequestEntityTooLarge", "request is too large").status())
            self.close_connection = True
            return
        body = self._read_body()
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        req = ApiRequest(self.command, url.path, query, self.headers.get("Content-Type", ""),
                         self.headers.get("Accept", ""), self.headers.get("Authorization", ""), body)
        try:
            latency = cast(float, self.server.actor.ask(CurrentLatency(), timeout=ASK_TIMEOUT))
            if latency:  # the request reaches the server only after the delay, as over a slow network
                self.server.closing.wait(latency)
            answer = cast(ApiAnswer, self.server.actor.ask(req, timeout=ASK_TIMEOUT))
        except (pykka.ActorDeadError, pykka.Timeout):
            self._send_json(503, StatusError(503, "ServiceUnavailable", "the fake API server is stopping").status())
            return
        if answer.watch is not None:
            self._stream(answer.watch, int(query.get("timeoutSeconds") or 1800),
                         query.get("allowWatchBookmarks") == "true")
            return
        self._send_json(answer.code, answer.doc, answer.headers)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(min(length, MAX_REQUEST_BODY)) if length else b""

    def _send_json(self, code: int, doc: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
        body = (doc if isinstance(doc, str) else json.dumps(doc)).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(doc, str) else "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, frame: Any) -> None:
        data = json.dumps(frame, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, ticket: WatchTicket, timeout_seconds: int, bookmarks: bool) -> None:
        clock = self.server.clock
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        deadline = clock.monotonic() + max(timeout_seconds, 1)
        interval = self.server.bookmark_interval if bookmarks else None
        next_bookmark = clock.monotonic() + interval if interval else None
        self.close_connection = True  # until the stream ends cleanly; then the connection is reusable
        try:
            while not self.server.closing.is_set():
                if ticket.stalled.is_set():
                    if self._peer_gone():
                        return
                    with contextlib.suppress(queue.Empty):
                        if ticket.queue.get(timeout=0.05) is _END:
                            return
                    continue
                now = clock.monotonic()
                if now >= deadline:
                    if bookmarks:
                        self._bookmark(ticket)
                    break
                wait = deadline - now
                if next_bookmark is not None:
                    wait = min(wait, max(next_bookmark - now, 0.0))
                try:
                    item = ticket.queue.get(timeout=min(wait, 0.5))
                except queue.Empty:
                    if next_bookmark is not None and clock.monotonic() >= next_bookmark and interval:
                        self._bookmark(ticket)
                        next_bookmark = clock.monotonic() + interval
                    continue
                if item is _END:
                    break
                if ticket.stalled.is_set():
                    continue  # a blackholed connection: what would have been sent is lost
                frame = cast(dict[str, Any], item)
                if ticket.table and frame.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    obj = frame["object"]
                    frame = {"type": frame["type"], "object": discovery.table([obj],
                             obj["metadata"]["resourceVersion"], clock.wall())}
                self._chunk(frame)
            self.wfile.write(b"0\r\n\r\n")  # the end of the chunked stream
            self.wfile.flush()
            self.close_connection = self.server.closing.is_set()
        except OSError:
            pass  # the client went away
        finally:
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                self.server.actor.ask(Unwatch(ticket), timeout=ASK_TIMEOUT)

    def _bookmark(self, ticket: WatchTicket) -> None:
        try:
            rv = self.server.actor.ask(CurrentVersion(), timeout=ASK_TIMEOUT)
        except (pykka.ActorDeadError, pykka.Timeout):
            return
        self._chunk({"type": "BOOKMARK", "object": {"kind": "Sandbox", "apiVersion": "core.jr2.dev/v1alpha1",
                                                    "metadata": {"resourceVersion": str(rv)}}})

    def _peer_gone(self) -> bool:
        """A stalled stream sends nothing, so only the socket tells that the client left: a watching
        client never writes on its connection, so anything readable (a FIN, a TLS close) means it went."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _fake_control(self, path: str, body: bytes) -> None:
        try:
            args = json.loads(body) if body.strip() else {}
            if not isinstance(args, dict):
                raise ValueError("body must be a JSON object")
            doc = fake_control(self.server.actor, self.command, path, args)
        except (ValueError, TypeError, KeyError) as e:
            self._send_json(400, {"error": str(e)})
            return
        if doc is None:
            self._send_json(404, {"error": f"no fake control at {self.command} {path}"})
            return
        self._send_json(200, doc)


def fake_control(actor: pykka.ActorRef[Any], method: str, path: str, args: dict[str, Any]) -> Any:
    """The `/_fake/` routes; docs/fake-cluster.md lists them."""
    route = (method, path.rstrip("/"))
    ask = actor.ask
    if route == ("POST", "/_fake/end-watches"):
        ask(EndWatches(), timeout=ASK_TIMEOUT)
    elif route == ("POST", "/_fake/stall"):
        ask(StallWatches(bool(args.get("on", True))), timeout=ASK_TIMEOUT)
    elif route == ("POST", "/_fake/compact"):
        ask(Compact(), timeout=ASK_TIMEOUT)
    elif route == ("POST", "/_fake/fail"):
        retry = args.get("retryAfter")
        ask(Fault(int(args.get("count", 1)), int(args["status"]), int(retry) if retry is not None else None,
                  bool(args.get("watchOnly", False))), timeout=ASK_TIMEOUT)
    elif route == ("POST", "/_fake/latency"):
        ask(SetLatency(float(args["seconds"])), timeout=ASK_TIMEOUT)
    elif route == ("POST", "/_fake/restart"):
        ask(Restart(), timeout=ASK_TIMEOUT)
    elif route == ("POST", "/_fake/rotate-token"):
        ask(RotateToken(), timeout=ASK_TIMEOUT)
    elif route == ("GET", "/_fake/requests"):
        return {"requests": ask(RequestLog(), timeout=ASK_TIMEOUT)}
    elif route == ("DELETE", "/_fake/requests"):
        ask(RequestLog(clear=True), timeout=ASK_TIMEOUT)
    elif route == ("GET", "/_fake/watches"):
        return ask(WatchStats(), timeout=ASK_TIMEOUT)
    else:
        return None
    return {"ok": True}


class ApiHttpServer:
    """The loopback listener in front of an `ApiServerActor`."""

    def __init__(self, actor: pykka.ActorRef[Any], *, host: str = "127.0.0.1", port: int = 0,
                 clock: Clock | None = None, bookmark_interval: float | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self._server = _Server((host, port), _Handler)
        if tls is not None:
            # The handshake runs on the handler's thread at its first read, not in the accept loop.
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True,
                                                  do_handshake_on_connect=False)
        self._scheme = "https" if tls is not None else "http"
        self._server.actor = actor
        self._server.clock = clock or SystemClock()
        self._server.bookmark_interval = bookmark_interval
        self._server.closing = threading.Event()
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-apiserver-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
