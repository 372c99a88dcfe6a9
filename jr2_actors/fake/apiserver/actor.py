"""The fake API server: a pykka actor owning `ClusterState`, served over loopback HTTP (fake/http.py).

Theory of operation: HTTP connection threads (outside the actor system) read a request and ask the
`ApiServerActor`, which alone touches the store, the fault knobs, the token and the request log — so there
is no lock around any of them. The actor checks the token, spends an injected fault, and hands the request
to the pure routes (rest.py). A watch is answered with its initial frames and a queue; the store's
sink puts each later frame on that queue, stamped with the write's time beside its object
(`WATCH_WRITTEN_AT_FIELD`, which real clients ignore), and the connection thread streams it as one chunked line,
adding bookmarks (of the watched kind) on the configured interval and ending at `timeoutSeconds` (with a
last bookmark just before, as a real server does). A bookmark, and the end, go in the watch's queue behind
the frames already there; a bookmark says the version the actor published as its last message ended
(`Published`, read without an ask), never less than a frame it follows. A stalled watch sends nothing at all, bookmarks
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
import ssl
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, cast

import pykka

from jr2_actors.fake.apiserver import discovery, rest
from jr2_actors.fake.apiserver.knobs import (
    KNOBS,
    ApiCall,
    Delay,
    FailNext,
    Knob,
    Opened,
    Published,
    Unwatch,
    WatchTicket,
)
from jr2_actors.fake.apiserver.rest import ApiAnswer, ApiRequest, WatchSpec, status_answer
from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.apiserver.status import StatusError
from jr2_actors.fake.apiserver.stream_items import END, WAKE, BookmarkAt, Wake, drain, version_of
from jr2_actors.fake.http import HttpFront, HttpServer, Request, json_args
from jr2_actors.fake.messages import Run
from jr2_actors.shell import Shell
from jr2_actors.shell.activity import Job, activity
from jr2_actors.shell.clock import Clock, SystemClock, pause
from jr2_actors.shell.timers import Timers
from jr2_actors.values.constants import WATCH_WRITTEN_AT_FIELD
from jr2_actors.values.security import constant_time_equal

log = logging.getLogger(__name__)

ASK_TIMEOUT = 10.0
REQUEST_LOG_SIZE = 10_000


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
        self.published = Published()  # the version as each message leaves it: what a bookmark says
        self.published.rv = state.rv
        self.write_token_file()

    def on_receive(self, message: Any) -> Any:
        try:
            return self._receive(message)
        finally:
            self.published.rv = self.state.rv  # after the write's frames are queued, never before

    def _receive(self, message: Any) -> Any:
        if isinstance(message, ApiCall):
            return self._call(message)
        if isinstance(message, Unwatch):
            if message.ticket.wid is not None:
                self.state.unsubscribe(message.ticket.wid)
                self.tickets.pop(message.ticket.wid, None)
            return None
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
        ticket = WatchTicket(spec, self.published)
        wall, put = self.clock.wall, ticket.queue.put

        def sink(frame: dict[str, Any]) -> None:  # called during the write: its time is the write's
            if ticket.stalled.is_set():  # lost on the blackholed link as it is written, whenever the stream
                ticket.lost.set()  # thread looks (a stall set and cleared before it looked lost it all the same)
                return
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
        # On a virtual clock a watch's timeout and bookmarks are timers on it (a wake put in the watch's
        # queue), so the clock knows of them and jumps to them; on the real clock the loop's waits suffice.
        self.timers = Timers(clock, name="fake-watch-timers") if callable(getattr(clock, "attach", None)) else None
        self._streams: set[Wake] = set()  # each open watch's timer: a leap moves each
        self._streams_lock = threading.Lock()
        on_leap = getattr(clock, "on_leap", None)
        self.off_leap = on_leap(self._leapt) if self.timers is not None and callable(on_leap) else None

    def _leapt(self, seconds: float) -> None:
        """A driven VirtualClock crosses `seconds` of keepalives only: each open watch's timer moves that much
        later at once, and its loop moves its next bookmark and its timeout as it next reads the time, as if
        it had sent the one and not yet reached the other (`Wake.now`)."""
        with self._streams_lock:
            streams = list(self._streams)
        for wake in streams:
            wake.leap(seconds)

    def handle(self, r: Request) -> None:
        # A driven VirtualClock never jumps while a request is served (a parked watch excepted: `_stream`).
        with activity(self.clock).busy(f"fake API {r.command} {r.url_path}") as job:
            self._handle(r, job)

    def _handle(self, r: Request, job: Job) -> None:
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
                pause(self.clock, answer.seconds, self.closing, what=f"fake API latency {r.command} {path}", job=job)
                answer = self.actor.ask(ApiCall(call.request, call.authorization, delayed=True), timeout=ASK_TIMEOUT)
        except (pykka.ActorDeadError, pykka.Timeout):
            r.respond_json(503, StatusError(503, "ServiceUnavailable", "the fake API server is stopping").status())
            return
        if isinstance(answer, Opened):
            self._stream(r, answer.ticket, job)
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

    def _stream(self, r: Request, ticket: WatchTicket, job: Job) -> None:
        spec = ticket.spec
        clock = self.clock
        r.start_chunked()
        deadline = clock.monotonic() + spec.timeout_seconds
        interval = self.bookmark_interval if spec.bookmarks else None
        next_bookmark = clock.monotonic() + interval if interval else None
        r.close_connection = True  # until the stream ends cleanly; then the connection is reusable
        stalled = False
        ending = False  # the timeout came: the stream ends once what was queued before it is sent
        sent = 0  # the version of the last frame sent: a bookmark never goes back before it
        wake = Wake(self.timers, ticket.queue, f"watch {spec.kind.kind}")
        frames = ticket.queue
        taken = False  # an item taken whose `task_done` waits until the loop is done with it (`Frames.held`)
        with self._streams_lock:
            self._streams.add(wake)
        try:
            while not self.closing.is_set():
                if taken:
                    frames.task_done()
                    taken = False
                if ticket.stalled.is_set():
                    # Sends nothing; notices at once a client that gives up on it (its stall bound). No
                    # keepalive of its own is pending, so a driven clock's leap never crosses that bound.
                    stalled = True
                    wake.arm(None, "")
                    with job.waiting(lambda: False):
                        if r.peer_gone(wait=0.05):
                            return
                    if drain(frames):  # what would have been sent is lost, as on a blackholed link
                        return
                    continue
                if stalled or ticket.lost.is_set():
                    # The link comes back: a TCP stream cannot skip what it lost and go on, so this one ends (the
                    # client resumes from what it last saw; found by the simulation: a stream that went on
                    # after a gap left Workspaces waiting for events that never came).
                    return
                now, leapt = wake.now(clock)
                if leapt:  # a driven clock leapt over keepalives only: as if its bookmarks had gone out
                    deadline += leapt
                    if next_bookmark is not None:
                        next_bookmark += leapt
                if not ending and now >= deadline:  # a last bookmark just before the end, as a real server's
                    ending = True
                    wake.arm(None, "")
                    if spec.bookmarks:
                        frames.put(BookmarkAt(ticket.published.rv))
                    frames.put(END)
                elif not ending and next_bookmark is not None and interval and now >= next_bookmark:
                    # Queued behind every frame of the writes up to its version (CONTRACTS.md §2: a bookmark
                    # says all before it was sent), on either clock, while frames flow too.
                    frames.put(BookmarkAt(ticket.published.rv))
                    next_bookmark = now + interval
                due = deadline if next_bookmark is None else min(deadline, next_bookmark)
                if not ending:
                    wake.arm(due, "bookmark" if next_bookmark is not None and next_bookmark < deadline else "timeout")
                wait = 0.5 if ending else due - now
                try:
                    with job.waiting(frames.held):  # parked: work again once a frame waits, until it is written
                        item = frames.get(timeout=min(max(wait, 0.0), 0.5))
                except queue.Empty:
                    continue
                taken = True
                if item is WAKE:
                    wake.fired()
                    continue
                if item is END:
                    break
                if ticket.lost.is_set():
                    return  # a frame before this one was lost to a stall: the stream cannot go on past it
                if ticket.stalled.is_set():
                    stalled = True
                    continue  # a blackholed connection: what would have been sent is lost
                if isinstance(item, BookmarkAt):
                    # A bookmark carries the watched kind and only a resourceVersion (CONTRACTS.md §2).
                    r.chunk(_line({"type": "BOOKMARK", "object": {
                        "kind": spec.kind.kind, "apiVersion": spec.kind.api_version,
                        "metadata": {"resourceVersion": str(max(item.rv, sent))}}}))
                    continue
                frame = cast(dict[str, Any], item)
                r.chunk(_line(self._framed(frame, spec)))
                sent = max(sent, version_of(frame))
            r.end_chunked()
            r.close_connection = self.closing.is_set()
        except OSError:
            pass  # the client went away
        finally:
            if taken:
                frames.task_done()
            with self._streams_lock:
                self._streams.discard(wake)
            wake.arm(None, "")
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                self.actor.ask(Unwatch(ticket), timeout=ASK_TIMEOUT)

    def _framed(self, frame: dict[str, Any], spec: WatchSpec) -> dict[str, Any]:
        if spec.table and frame.get("type") in ("ADDED", "MODIFIED", "DELETED"):
            obj = frame["object"]
            return {"type": frame["type"],
                    "object": discovery.table(spec.kind, [obj], obj["metadata"]["resourceVersion"],
                                              self.clock.wall())}
        return frame


def _line(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame, separators=(",", ":")).encode() + b"\n"


class ApiHttpServer(HttpFront):
    """The loopback listener in front of an `ApiServerActor`."""

    def __init__(self, actor: pykka.ActorRef[Any], *, host: str = "127.0.0.1", port: int = 0,
                 clock: Clock | None = None, bookmark_interval: float | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self._app = ApiApp(actor, clock or SystemClock(), bookmark_interval)
        self._http = HttpServer(self._app, host=host, port=port, name="fake-apiserver-http", tls=tls)
        self._app.closing = self._http.closing

    def start(self) -> None:
        self._http.start()

    def stop(self) -> None:
        self._http.stop()
        if self._app.off_leap is not None:
            self._app.off_leap()
        if self._app.timers is not None:
            self._app.timers.stop()


# The knobs are the server's vocabulary: FakeCluster and the tests name them through this module.
