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

Below the lines, `ChunkDecoder` undoes HTTP/1.1 chunked framing (RFC 9112 §7.1), as pure as the lines'
decoder: the watch's reader hands it 64 KiB of socket bytes at a time, so a burst's events are one read and
one call, not one read per HTTP chunk as `http.client` does. Framing that is not chunked — a size
line that is not hex, too long, or lies about its data; the stream ending before its last chunk — raises
`ChunkError` with the body decoded before the fault, so the frames that arrived whole are still handed on
and the caller reconnects (the resume re-reads from the last version it saw). Chunk extensions and trailers
are read and ignored, as RFC 9112 allows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from jr2_actors.kube.decode import Loads, loads
from jr2_actors.values.constants import MAX_CHUNK_LINE_BYTES, MAX_FRAME_BYTES, WATCH_WRITTEN_AT_FIELD
from jr2_actors.values.errors import ApiStatus
from jr2_actors.values.metadata import meta_text

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
EXCERPT_CHARS = 120


class WatchEvent(NamedTuple):
    """A tuple, not a frozen dataclass: one is built per frame. Equal as the dataclass was, the write time aside."""

    type: EventType
    object: Mapping[str, Any]
    resource_version: str | None
    written_at: float | None = None  # the fake server's write time, if sent

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, WatchEvent) and self[:3] == other[:3]

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return f"WatchEvent(type={self.type!r}, resource_version={self.resource_version!r})"


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
    def __init__(self, max_line_bytes: int = MAX_FRAME_BYTES, decoder: Loads = loads) -> None:
        self._max = max_line_bytes
        self._loads = decoder  # `kube/decode.py`'s: orjson when installed (the tests run both)
        self._buf = bytearray()
        self._discarding = False
        self._discarded = 0

    def feed(self, chunk: bytes) -> list[Decoded]:
        out: list[Decoded] = []
        start = 0
        size = len(chunk)
        find = chunk.find
        while start < size:
            nl = find(b"\n", start)
            if nl < 0:
                self._take(chunk[start:])
                break
            if self._buf or self._discarding:
                self._take(chunk[start:nl])
                self._line_done(out)
            elif nl - start > self._max:  # a whole line in this chunk, over the cap: never copied
                out.append(FrameError("oversized", f"line over the {self._max}-byte limit", nl - start))
            elif nl > start:  # the common case: a whole line in this chunk, decoded from it without a copy
                line = chunk[start:nl]
                if not line.isspace():
                    out.append(decode_line(line, self._loads))
            start = nl + 1
        return out

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
        if line and not line.isspace():
            out.append(decode_line(line, self._loads))


class ChunkError(ValueError):
    """The answer's chunked framing is broken: `decoded` is the body that came whole before the fault."""

    def __init__(self, detail: str, decoded: bytes = b"") -> None:
        super().__init__(detail)
        self.detail = detail
        self.decoded = decoded


_SIZE, _DATA, _DATA_END, _TRAILER, _DONE = range(5)
_HEX = b"0123456789abcdefABCDEF"
_MAX_SIZE_DIGITS = 16  # below 2**64: a longer size is not a chunk anyone sends


class ChunkDecoder:
    """HTTP/1.1 chunked transfer coding → body bytes, incrementally (sans-I/O). `done` once the last chunk
    and its trailers are read; `end()` says whether the stream may end here."""

    def __init__(self, max_line_bytes: int = MAX_CHUNK_LINE_BYTES) -> None:
        self._max = max_line_bytes
        self._state = _SIZE
        self._left = 0  # data bytes left in the current chunk
        self._line = bytearray()  # a size or trailer line split across feeds
        self._trailer_bytes = 0
        self._surplus = 0  # bytes fed after the last chunk (a server that sent more than one answer)

    @property
    def done(self) -> bool:
        """The last chunk is read: nothing after it belongs to this answer."""
        return self._state == _DONE

    @property
    def clean_end(self) -> bool:
        """The last chunk and its trailers are read and no byte came after them: the connection is at the
        start of its next answer, so it can be used again (HTTP/1.1 keep-alive)."""
        return self._state == _DONE and not self._surplus

    def feed(self, data: bytes) -> bytes:
        """The body bytes in `data` (bytes after the last chunk are not read). Raises `ChunkError`."""
        body: list[bytes] = []
        pos = 0
        size = len(data)
        try:
            while pos < size:
                state = self._state
                if state == _DATA:
                    end = pos + self._left
                    if end <= size:
                        body.append(data[pos:end])
                        self._left = 0
                        self._state = _DATA_END
                        pos = end
                    else:
                        body.append(data[pos:])
                        self._left -= size - pos
                        pos = size
                    continue
                if state == _DONE:
                    break
                nl = data.find(b"\n", pos)
                if nl < 0:
                    if len(self._line) + size - pos > self._max:
                        raise ChunkError(self._too_long())
                    self._line += data[pos:]
                    break
                if self._line:
                    self._line += data[pos:nl]
                    line = bytes(self._line)
                    self._line.clear()
                else:
                    line = data[pos:nl]
                pos = nl + 1
                if len(line) > self._max:
                    raise ChunkError(self._too_long())
                self._line_done(line[:-1] if line.endswith(b"\r") else line)
        except ChunkError as e:
            raise ChunkError(e.detail, b"".join(body)) from None
        if self._state == _DONE:
            self._surplus += size - pos
        return body[0] if len(body) == 1 else b"".join(body)

    def end(self) -> None:
        """The stream ended: a fault unless the last chunk was read (a cut stream is not a whole answer)."""
        if self._state == _DONE:
            return
        if self._state == _DATA:
            raise ChunkError(f"the stream ended inside a chunk, {self._left} byte(s) short")
        raise ChunkError("the stream ended before its last chunk")

    def _line_done(self, line: bytes) -> None:
        state = self._state
        if state == _DATA_END:
            if line:  # the size line said fewer bytes than the chunk holds
                raise ChunkError(f"chunk data runs past its size: {_excerpt(line)!r}")
            self._state = _SIZE
        elif state == _SIZE:
            self._size_line(line)
        else:  # _TRAILER: header lines until an empty one, all ignored
            self._trailer_bytes += len(line) + 2
            if self._trailer_bytes > self._max:
                raise ChunkError(f"trailers over the {self._max}-byte limit")
            if not line:
                self._state = _DONE

    def _size_line(self, line: bytes) -> None:
        digits = line.split(b";", 1)[0].strip(b" \t")  # a chunk extension (`;name=value`) is ignored
        if not digits or digits.lstrip(_HEX):  # int(x, 16) alone would take "0x1a", "-1" and "1_0"
            raise ChunkError(f"chunk size line is not hex: {_excerpt(line)!r}")
        if len(digits) > _MAX_SIZE_DIGITS:
            raise ChunkError(f"chunk size of {len(digits)} hex digits")
        size = int(digits, 16)
        if size == 0:
            self._state = _TRAILER
        else:
            self._left = size
            self._state = _DATA

    def _too_long(self) -> str:
        if self._state == _DATA_END:
            return f"chunk data runs past its size by over {self._max} bytes"
        what = "trailer line" if self._state == _TRAILER else "chunk size line"
        return f"{what} over the {self._max}-byte limit"


def decode_line(line: bytes, decoder: Loads = loads) -> Decoded:
    """One complete line → a frame, or the reason it is not one."""
    size = len(line)
    try:
        doc = decoder(line)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and orjson's JSONDecodeError are ValueErrors
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
