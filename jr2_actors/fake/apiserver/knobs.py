"""The fake API server's messages and its fault knobs (each declared once: its name, its POST
/_fake/... body, its FakeCluster method), apart from the actor that serves them."""

from __future__ import annotations

import secrets
import threading
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from jr2_actors.fake.apiserver.rest import ApiRequest, WatchSpec
from jr2_actors.fake.apiserver.status import StatusError
from jr2_actors.fake.apiserver.stream_items import END, WAKE, Frames

if TYPE_CHECKING:
    from jr2_actors.fake.apiserver.actor import ApiServerActor


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


class Published:
    """The store's resourceVersion as the API server's last message left it, read by a watch's stream
    thread without an ask: a write's watch frames are all queued before it moves, so a bookmark queued
    after reading it follows every frame up to it."""

    __slots__ = ("rv",)

    def __init__(self) -> None:
        self.rv = 0


class WatchTicket:
    """One open watch: what it asked for, its queue of frames and whether it has been stalled."""

    def __init__(self, spec: WatchSpec, published: Published) -> None:
        self.spec = spec
        self.published = published
        self.wid: int | None = None
        self.queue = Frames()
        self.stalled = threading.Event()
        self.lost = threading.Event()  # a frame was written while it was stalled: the stream cannot go on

    def end(self) -> None:
        self.queue.put(END)


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
                t.queue.put(WAKE)  # its loop sees the stall now and drops its keepalive: no leap crosses the bound
            else:
                t.stalled.clear()


@dataclass(frozen=True)
class StreamError(Knob):
    """Every open watch gets an in-stream ERROR frame (a Status with this code), then ends — as a real
    server does for a storage error or a too-large resource version (CONTRACTS.md §2: any ERROR re-lists)."""

    status: int = 500
    reason: str = "InternalError"
    message: str = "an in-stream error"
    route = ("POST", "stream-error")

    def apply(self, server: ApiServerActor) -> None:
        if not 100 <= self.status <= 599:
            raise ValueError("status must be an HTTP status (100-599)")
        frame = {"type": "ERROR", "object": StatusError(self.status, self.reason, self.message).status()}
        for ticket in server.tickets.values():
            ticket.queue.put(frame)  # before the end `end_watches` queues behind it
        server.end_watches()


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
    EndWatches, StallWatches, StreamError, Compact, FailNext, Away, SetLatency, Restart, RotateToken, RequestLog,
    ClearRequestLog, WatchStats)}


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
