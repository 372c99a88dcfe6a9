"""Watch lines → frames: a pure, incremental decoder (sans-I/O, like h11's receive_data).

Theory of operation: a watch answer is one JSON event per line, and a line can straddle chunks. Feed
the decoder whatever bytes arrived; it returns every complete frame at once, so the reader can hand
each off without waiting for more (an API server cuts a watcher that reads slowly). `end()` flushes a
last line that came without a newline.

It never raises and never skips in silence: a line that is not a watch event becomes a `FrameError`
saying why (`malformed`, `oversized`, `unknown-type`), and the caller decides. An oversized line is not
buffered: the decoder drops bytes until the next newline and reports the line's size.

A BOOKMARK's object carries only `metadata.resourceVersion`, so bookmarks are decoded on their own
terms, never through the typed view of a Sandbox. An `ERROR` frame carries a `Status` inside an
HTTP 200: that is how an expired resume arrives (CONTRACTS.md §2). An event the fake API server sent for
a write carries the write's wall time beside its object (`WATCH_WRITTEN_AT_FIELD`): it is read into
`WatchEvent.written_at` when it is a finite number, and ignored otherwise (a real server sends none).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jr2_actors.values.constants import MAX_FRAME_BYTES, WATCH_WRITTEN_AT_FIELD
from jr2_actors.values.errors import ApiStatus
from jr2_actors.values.metadata import meta_text

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
EXCERPT_CHARS = 120


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    object: Mapping[str, Any] = field(repr=False)
    resource_version: str | None
    written_at: float | None = field(default=None, compare=False)  # the fake server's write time, if sent


@dataclass(frozen=True, slots=True)
class Bookmark:
    resource_version: str


@dataclass(frozen=True, slots=True)
class ErrorFrame:
    status: ApiStatus


@dataclass(frozen=True, slots=True)
class FrameError:
    """A line that is not a usable watch event. `excerpt` is bounded and safe to log."""

    kind: Literal["malformed", "oversized", "unknown-type"]
    detail: str
    size: int
    excerpt: str = ""


Frame = WatchEvent | Bookmark | ErrorFrame
Decoded = Frame | FrameError


class FrameDecoder:
    def __init__(self, max_line_bytes: int = MAX_FRAME_BYTES) -> None:
        self._max = max_line_bytes
        self._buf = bytearray()
        self._discarding = False
        self._discarded = 0

    def feed(self, chunk: bytes) -> list[Decoded]:
        out: list[Decoded] = []
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            self._take(piece)
            if nl < 0:
                return out
            self._line_done(out)
            start = nl + 1

    def end(self) -> list[Decoded]:
        """The stream ended: decode what is left (a last line without a newline)."""
        out: list[Decoded] = []
        self._line_done(out)
        return out

    def _take(self, piece: bytes) -> None:
        if self._discarding:
            self._discarded += len(piece)
            return
        if len(self._buf) + len(piece) > self._max:
            self._discarding = True
            self._discarded = len(self._buf) + len(piece)
            self._buf = bytearray()
            return
        self._buf += piece

    def _line_done(self, out: list[Decoded]) -> None:
        if self._discarding:
            out.append(FrameError("oversized", f"line over the {self._max}-byte limit", self._discarded))
            self._discarding = False
            self._discarded = 0
            return
        line = bytes(self._buf)
        self._buf = bytearray()
        if line.strip():
            out.append(decode_line(line))


def decode_line(line: bytes) -> Decoded:
    """One complete line → a frame, or the reason it is not one."""
    size = len(line)
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        return FrameError("malformed", f"not JSON: {_short(str(e))}", size, _excerpt(line))
    if not isinstance(doc, dict):
        return FrameError("malformed", "not a JSON object", size, _excerpt(line))
    kind = doc.get("type")
    obj = doc.get("object")
    if not isinstance(kind, str):
        return FrameError("malformed", "no string 'type'", size, _excerpt(line))
    if not isinstance(obj, dict):
        return FrameError("malformed", f"{kind} frame without an 'object' mapping", size, _excerpt(line))
    if kind == "ERROR":
        status = ApiStatus.from_object(obj)
        if status is None:
            return FrameError("malformed", "ERROR frame whose object is not a Status", size, _excerpt(line))
        return ErrorFrame(status)
    rv = _resource_version(obj)
    if kind == "BOOKMARK":
        if not rv:
            return FrameError("malformed", "BOOKMARK without metadata.resourceVersion", size, _excerpt(line))
        return Bookmark(rv)
    if kind in ("ADDED", "MODIFIED", "DELETED"):
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return FrameError("malformed", f"{kind} object without a metadata mapping", size, _excerpt(line))
        if rv is None and meta.get("resourceVersion") not in (None, ""):
            return FrameError("malformed", f"{kind} with a non-string resourceVersion", size, _excerpt(line))
        event_type: EventType = kind  # type: ignore[assignment]
        return WatchEvent(event_type, obj, rv, _written_at(doc.get(WATCH_WRITTEN_AT_FIELD)))
    return FrameError("unknown-type", f"event type {_short(kind)!r}", size, _excerpt(line))


def _resource_version(obj: Mapping[str, Any]) -> str | None:
    return meta_text(obj, "resourceVersion") or None


def _written_at(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _excerpt(line: bytes) -> str:
    return line[:EXCERPT_CHARS].decode("utf-8", "replace")


def _short(text: str) -> str:
    return text[:EXCERPT_CHARS]
