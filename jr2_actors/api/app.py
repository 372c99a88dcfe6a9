"""The Orchestrator's HTTP surface (CONTRACTS.md §4) as a WSGI application over a `Backend`.

Routes: `GET /healthz` and `GET /metrics` are open; everything under `/runs` needs the Instance token
(`authorization: Bearer …`, compared in constant time; anything else is a bare 401). Bodies need their
`Content-Length`, are capped at 1 MiB and must be JSON objects; a workflow the parser refuses is a 400 whose
body names the key at fault (a 413 when it is over its size). Every header the app parses (the token,
`Content-Length`, `Last-Event-ID`) answers a hostile value with a 4xx, never a 500.
`GET /` and `GET /console…` are the Console (console/http.py).
An unknown path is 404, a wrong method 405 with `Allow`. `GET /runs/{id}/events` is a server-sent-event
stream of the run's feed that resumes after `Last-Event-ID` (a `gap` event first when lines after it are no
longer kept), sends a comment line as a heartbeat (so a gone client is noticed by a failed write), ends
when the run has finished, and is refused with 503 when too many streams are open (each holds a server
thread); a stream whose client closes gives its slot back at once (`environ["jr2.watch_client"]`, from
`api/server.py`), not at the next failed heartbeat. `POST /runs` answers 201 once the run's first row is on
disk; when the orchestrator cannot take a run now (its store cannot write, it is stopping, or one more run
could take it past its budget of memory and threads, `api/budget.py`) it answers 503 with the reason and
`Retry-After`, and nothing was accepted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol

from jr2_actors import __version__
from jr2_actors.api import sse
from jr2_actors.api.budget import RETRY_AFTER_SECONDS, Budget
from jr2_actors.console.http import Console
from jr2_actors.run.feed.hub import FeedRead
from jr2_actors.run.feed.wire import feed_doc
from jr2_actors.run.listing.table import encode_row  # how every answer's JSON is written
from jr2_actors.telemetry import CONTENT_TYPE as METRICS_CONTENT_TYPE
from jr2_actors.values.constants import (
    API_HEARTBEAT_SECONDS,
    API_IDEMPOTENCY_WAIT_SECONDS,
    API_MAX_BODY_BYTES,
    API_STREAM_SLICE_SECONDS,
    RUNS_FINISHED_LISTED,
)
from jr2_actors.values.errors import Unavailable
from jr2_actors.values.run_ids import Keyed
from jr2_actors.values.security import constant_time_equal
from jr2_actors.values.workflow import WorkflowError, WorkflowTooLarge

log = logging.getLogger(__name__)

MAX_BODY_BYTES = API_MAX_BODY_BYTES
UNAVAILABLE_RETRY_SECONDS = 5  # the 503's Retry-After when a run cannot be taken now
HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_LINE_NUMBER = re.compile(r"[0-9]{1,18}")  # ASCII digits only: str.isdigit() also says yes to '²'
_LAST_EVENT_ID = "Last-Event-ID must be a feed line's number (ASCII digits, at most 18)"

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class Backend(Protocol):
    """What the API needs of an orchestrator (the `Orchestrator` facade is one)."""

    def submit(self, document: object, run_input: Mapping[str, Any] | None, *, keyed: Keyed | None = None) -> str:
        """The run's id once its first row is on disk (`keyed` kept with it); `Unavailable` when no run can be
        taken now."""

    def made_by(self, key: str) -> tuple[str, Keyed] | None:
        """The run a request with this `Idempotency-Key` made and what it kept, while its row is kept;
        `Unavailable` when the store cannot answer."""

    def status(self, run_id: str) -> dict[str, Any] | None: ...

    def runs_encoded(self, prefix: str = "") -> Sequence[Mapping[str, Any] | bytes]:
        """`GET /runs`'s live lines: each a document, or its JSON already encoded (the run table's)."""

    def finished_runs(self, prefix: str = "", limit: int = RUNS_FINISHED_LISTED) -> list[dict[str, Any]]:
        """Finished runs still in the store, newest first (`GET /runs?all=true`)."""

    def document(self, run_id: str) -> dict[str, Any] | None:
        """The workflow document the run was submitted with (`GET /runs/{id}/workflow`)."""

    def cancel(self, run_id: str) -> dict[str, Any] | None: ...

    def feed(self, run_id: str, after: int, wait: float) -> FeedRead | None: ...

    def health(self) -> tuple[bool, str]: ...

    def metrics(self) -> str: ...

    def interrupt_feeds(self) -> None:
        """Wake every `feed` wait now (the API is stopping)."""


class HttpError(Exception):
    def __init__(self, status: int, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.status = status
        self.doc = {"error": error, **extra}
        self.headers: list[tuple[str, str]] = []


_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII, as the IETF draft's examples


class Idempotency:
    """The `Idempotency-Key`s whose request is under way, so a retry that comes while its first try is still
    being taken waits for it (and another body with the key is a 422 at once). What a key made is the
    store's to answer (`Backend.made_by`): the run's first row keeps it (ADR-0065), across a restart, for
    the row's week."""

    def __init__(self, wait: float = API_IDEMPOTENCY_WAIT_SECONDS) -> None:
        self._wait = wait
        self._lock = threading.Condition()
        self._under_way: dict[str, str] = {}  # key → its body's digest

    def claim(self, key: str, digest: str) -> None:
        """Hold the key for this request, once no other request holds it; `release` gives it back."""
        with self._lock:
            while (held := self._under_way.get(key)) is not None:
                if held != digest:
                    raise HttpError(422, "this Idempotency-Key was sent with another body")
                if not self._lock.wait(self._wait):
                    raise HttpError(409, "a request with this Idempotency-Key is still under way; try again")
            self._under_way[key] = digest

    def release(self, key: str) -> None:
        with self._lock:
            self._under_way.pop(key, None)
            self._lock.notify_all()


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: str
    open: bool = False


ROUTES = (
    Route("GET", re.compile(r"^/(?:console(?:/.*)?)?$"), "console", open=True),  # its data asks the token itself
    Route("GET", re.compile(f"^{HEALTH_PATH}$"), "healthz", open=True),
    Route("GET", re.compile(f"^{METRICS_PATH}$"), "metrics", open=True),
    Route("POST", re.compile(r"^/runs$"), "submit"),
    Route("GET", re.compile(r"^/runs$"), "runs"),
    Route("GET", re.compile(r"^/runs/(?P<run>[^/]+)$"), "status"),
    Route("GET", re.compile(r"^/runs/(?P<run>[^/]+)/events$"), "events"),
    Route("GET", re.compile(r"^/runs/(?P<run>[^/]+)/workflow$"), "workflow"),
    Route("POST", re.compile(r"^/runs/(?P<run>[^/]+)/cancel$"), "cancel"),
)


class Api:
    def __init__(self, backend: Backend, token: str, *, heartbeat: float = API_HEARTBEAT_SECONDS,
                 max_streams: int = 8, budget: Budget | None = None) -> None:
        if not token:
            raise ValueError("the API needs an Instance token")
        self.backend = backend
        self._token = token
        self._heartbeat = heartbeat
        self._streams = threading.BoundedSemaphore(max_streams)
        self._closing = threading.Event()
        self.idempotency = Idempotency()
        self.budget = budget  # admission control (api/budget.py): a run past it is a 503, never an OOM kill
        self.console = Console(document=backend.document, metrics=backend.metrics, runs=backend.runs_encoded)

    def close(self) -> None:
        """End every event stream now: the listener can stop without waiting out a follower."""
        self._closing.set()
        self.backend.interrupt_feeds()

    def __call__(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        path = str(environ.get("PATH_INFO", "/")) or "/"
        try:
            route, params = self._route(method, path)
            if not route.open:
                self._authorize(str(environ.get("HTTP_AUTHORIZATION", "")))
            return getattr(self, f"_{route.handler}")(environ, start_response, **params)  # type: ignore[no-any-return]
        except HttpError as e:
            return _json(start_response, e.status, e.doc, e.headers)
        except Exception:
            log.exception("the API failed on %s %s", method, path)
            return _json(start_response, 500, {"error": "internal error"})

    # -- routing ---------------------------------------------------------------------------------------

    def _route(self, method: str, path: str) -> tuple[Route, dict[str, str]]:
        allowed: list[str] = []
        for route in ROUTES:
            match = route.pattern.match(path)
            if match is None:
                continue
            if route.method == method:
                params = match.groupdict()
                if "run" in params and not _RUN_ID.match(params["run"]):
                    raise HttpError(404, "not found")
                return route, params
            allowed.append(route.method)
        if allowed:
            error = HttpError(405, f"{method} is not allowed here")
            error.headers.append(("Allow", ", ".join(sorted(set(allowed)))))
            raise error
        raise HttpError(404, "not found")

    def _authorize(self, header: str) -> None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not constant_time_equal(token.strip(), self._token):
            error = HttpError(401, "unauthorized")
            error.headers.append(("WWW-Authenticate", 'Bearer realm="jr2"'))
            raise error

    # -- handlers --------------------------------------------------------------------------------------

    def probe(self) -> tuple[int, dict[str, Any]]:
        """`GET /healthz`'s status and document (the listener's gate answers it itself, off the workers)."""
        ok, reason = self.backend.health()
        return (200, {"ok": True, "version": __version__}) if ok else (503, {"ok": False, "reason": reason})

    def _console(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        answer = self.console.answer(str(environ.get("PATH_INFO", "/")),
                                     lambda: self._authorize(str(environ.get("HTTP_AUTHORIZATION", ""))))
        start_response(f"{answer.status} {_phrase(answer.status)}", answer.headers)
        return [answer.body]

    def _healthz(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        return _json(start_response, *self.probe())

    def _metrics(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        body = self.backend.metrics().encode()
        start_response("200 OK", [("Content-Type", METRICS_CONTENT_TYPE), ("Content-Length", str(len(body)))])
        return [body]

    def _submit(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        doc = _json_body(environ)
        unknown = sorted(set(doc) - {"workflow", "input"})
        if unknown:
            raise HttpError(400, f"unknown key: {unknown[0]}", key=unknown[0])
        if "workflow" not in doc:
            raise HttpError(400, "workflow is required", key="workflow")
        run_input = doc.get("input")
        if run_input is not None and not isinstance(run_input, dict):
            raise HttpError(400, "input must be an object", key="input")
        key = _idempotency_key(environ)
        if not key:
            run_id = self._submit_once(doc, None)
            return _json(start_response, 201, {"runId": run_id}, [("Location", f"/runs/{run_id}")])
        keyed = Keyed(key, hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest())
        self.idempotency.claim(key, keyed.digest)
        try:
            made = self._made_by(key)
            if made is not None:  # a retry: the run this key made, from its row (a restart between included)
                if made[1].digest != keyed.digest:
                    raise HttpError(422, "this Idempotency-Key was sent with another body")
                return _json(start_response, 201, {"runId": made[0]},
                             [("Location", f"/runs/{made[0]}"), ("Idempotent-Replayed", "true")])
            run_id = self._submit_once(doc, keyed)  # refused (400, 503): nothing kept the key, it stays free
        finally:
            self.idempotency.release(key)
        return _json(start_response, 201, {"runId": run_id}, [("Location", f"/runs/{run_id}")])

    def _made_by(self, key: str) -> tuple[str, Keyed] | None:
        try:
            return self.backend.made_by(key)
        except Unavailable as e:
            raise _unavailable(e) from None

    def _submit_once(self, doc: dict[str, Any], keyed: Keyed | None) -> str:
        refusal = self.budget.refusal() if self.budget is not None else None
        if refusal is not None:  # nothing was accepted: the client sends it again after Retry-After
            error = HttpError(503, refusal)
            error.headers.append(("Retry-After", str(RETRY_AFTER_SECONDS)))
            raise error
        try:
            return self.backend.submit(doc["workflow"], doc.get("input"), keyed=keyed)
        except WorkflowTooLarge as e:
            raise HttpError(413, str(e), key="workflow") from e
        except WorkflowError as e:
            raise HttpError(400, str(e), key=f"workflow.{e.key}" if e.key else "workflow") from e
        except Unavailable as e:  # nothing was accepted: the client may send it again
            raise _unavailable(e) from None

    def _runs(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """Live runs; with `all=true` the finished ones still in the store after them; `prefix=P` keeps the
        runs whose id starts with P (the CLI names a run by a unique prefix)."""
        every, prefix = _runs_query(environ)
        lines = [line if isinstance(line, bytes) else encode_row(line) for line in self.backend.runs_encoded(prefix)]
        if every:
            lines.extend(encode_row(line) for line in self.backend.finished_runs(prefix))
        # The lines are joined, not encoded again, and the answer is one body written at once.
        body = b'{"runs":[' + b",".join(lines) + b"]}"
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def _workflow(self, environ: Mapping[str, Any], start_response: StartResponse, run: str) -> Iterable[bytes]:
        document = self.backend.document(run)
        if document is None:
            raise HttpError(404, f"no run {run}")
        return _json(start_response, 200, {"workflow": document})

    def _status(self, environ: Mapping[str, Any], start_response: StartResponse, run: str) -> Iterable[bytes]:
        status = self.backend.status(run)
        if status is None:
            raise HttpError(404, f"no run {run}")
        return _json(start_response, 200, status)

    def _cancel(self, environ: Mapping[str, Any], start_response: StartResponse, run: str) -> Iterable[bytes]:
        status = self.backend.cancel(run)
        if status is None:
            raise HttpError(404, f"no run {run}")
        return _json(start_response, 202, status)

    def _events(self, environ: Mapping[str, Any], start_response: StartResponse, run: str) -> Iterable[bytes]:
        after = _last_event_id(environ)
        first = self.backend.feed(run, after, 0.0)
        if first is None:
            raise HttpError(404, f"no run {run}")
        if not self._streams.acquire(blocking=False):
            raise HttpError(503, "too many event streams are open; try again later")
        start_response("200 OK", [("Content-Type", "text/event-stream; charset=utf-8"),
                                  ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")])
        stream = _Stream(self, run, after, first)
        watch = environ.get("jr2.watch_client")
        if callable(watch):  # the listener calls close() the moment the client closes (api/server.py)
            stream.unwatch = watch(stream.close)
        return stream


class _Stream:
    """The SSE body: a WSGI iterable whose `close()` (called by the server when the body ends, and by its
    watch the moment the client closes) gives the stream's slot back, once."""

    def __init__(self, api: Api, run: str, after: int, first: FeedRead) -> None:
        self._api = api
        self._lock = threading.Lock()
        self.unwatch: Callable[[], None] | None = None
        self._run = run
        self._after = after
        self._first: FeedRead | None = first
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield b": jr2 feed of " + self._run.encode() + b"\n\n"
        quiet = 0.0  # seconds waited since the stream last sent anything
        while not self._closed and not self._api._closing.is_set():
            if self._first is not None:
                batch, self._first = self._first, None
            else:
                # Waits in slices, so a stop that lands between the check above and the wait is seen
                # within one slice even if its wake-up was missed; the keepalive still goes once a heartbeat.
                wait = min(API_STREAM_SLICE_SECONDS, self._api._heartbeat)
                got = self._api.backend.feed(self._run, self._after, wait)
                if got is None or self._api._closing.is_set():
                    return
                batch = got
                quiet += wait
            events, finished, dropped = batch
            if events and self._after < dropped:
                # Lines after the reader's id are no longer kept: it is told so, then goes on.
                yield sse.encode_gap(self._after, events[0].id)
            for event in events:
                self._after = event.id
                yield sse.encode(event.id, event.kind, feed_doc(event))
            if events:
                quiet = 0.0
            if finished and not events:
                return
            if not events and quiet >= self._api._heartbeat:
                quiet = 0.0
                yield b": keepalive\n\n"

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._api._streams.release()
        if self.unwatch is not None:
            self.unwatch()


_PREFIX = re.compile(r"[A-Za-z0-9.-]{1,128}")  # what a run id may hold, no LIKE wildcard (`_`, `%`)
_RUNS_QUERY = "GET /runs takes all=true|false and prefix=P (letters, digits, '.', '-'), each at most once"


def _runs_query(environ: Mapping[str, Any]) -> tuple[bool, str]:
    """`GET /runs`'s query: a value it cannot use (or a key it does not know) is a 400, never ignored."""
    query = urllib.parse.parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
    if set(query) - {"all", "prefix"} or any(len(v) > 1 for v in query.values()):
        raise HttpError(400, _RUNS_QUERY)
    every = query.get("all", ["false"])[0]
    prefix = query.get("prefix", [""])[0]
    if every not in ("true", "false") or (prefix and not _PREFIX.fullmatch(prefix)):
        raise HttpError(400, _RUNS_QUERY)
    return every == "true", prefix


def _unavailable(e: Unavailable) -> HttpError:
    error = HttpError(503, str(e))
    error.headers.append(("Retry-After", str(UNAVAILABLE_RETRY_SECONDS)))
    return error


def _idempotency_key(environ: Mapping[str, Any]) -> str:
    """The `Idempotency-Key` header, or "" when none; one that is not 1-255 visible ASCII is a 400."""
    raw = environ.get("HTTP_IDEMPOTENCY_KEY")
    if raw is None:
        return ""
    if not _IDEMPOTENCY_KEY.fullmatch(str(raw)):
        raise HttpError(400, "Idempotency-Key must be 1-255 visible ASCII characters")
    return str(raw)


def _last_event_id(environ: Mapping[str, Any]) -> int:
    """The header's number, or the query's `lastEventId` (for EventSource clients that cannot set headers);
    0 when neither is given. A value that is not a line's number is a 400, never ignored."""
    raw = str(environ.get("HTTP_LAST_EVENT_ID", "")).strip()
    if not raw:
        query = urllib.parse.parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
        values = query.get("lastEventId", [])
        if not values:
            return 0
        if len(values) > 1:
            raise HttpError(400, _LAST_EVENT_ID)
        raw = values[0]
    if not _LINE_NUMBER.fullmatch(raw):
        raise HttpError(400, _LAST_EVENT_ID)
    return int(raw)


def _json_body(environ: Mapping[str, Any]) -> dict[str, Any]:
    ctype = str(environ.get("CONTENT_TYPE", "")).split(";")[0].strip().lower()
    if ctype != "application/json":
        raise HttpError(415, "the body must be application/json")
    length_text = str(environ.get("CONTENT_LENGTH", "") or "").strip()
    if not length_text:
        raise HttpError(411, "a body needs a Content-Length")
    if not re.fullmatch(r"[0-9]+", length_text):
        raise HttpError(400, "Content-Length must be a number of bytes (ASCII digits)")
    if len(length_text) > 18 or int(length_text) > MAX_BODY_BYTES:
        error = HttpError(413, f"the body is over {MAX_BODY_BYTES} bytes")
        error.headers.append(("Connection", "close"))
        raise error
    length = int(length_text)
    try:
        raw = environ["wsgi.input"].read(length)
    except TimeoutError as e:  # the listener's body deadline (api/server.py): a trickled or short body
        error = HttpError(408, "the body did not arrive in time")
        error.headers.append(("Connection", "close"))
        raise error from e
    except OSError as e:
        error = HttpError(400, "the body could not be read")
        error.headers.append(("Connection", "close"))
        raise error from e
    if len(raw) < length:
        error = HttpError(400, f"the body ended after {len(raw)} of its {length} bytes")
        error.headers.append(("Connection", "close"))
        raise error
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise HttpError(400, "the body is not JSON") from e
    if not isinstance(doc, dict):
        raise HttpError(400, "the body must be a JSON object")
    return doc


def _json(start_response: StartResponse, status: int, doc: Any,
          headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    body = encode_row(doc)
    start_response(f"{status} {_phrase(status)}",
                   [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *(headers or [])])
    return [body]


def _phrase(status: int) -> str:
    """The status line's reason phrase, the stdlib's (RFC 9110)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
