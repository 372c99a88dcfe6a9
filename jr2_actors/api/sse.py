"""Server-sent events, both ways: how the API writes a feed event and how a client reads it back. Pure.

One module so the writer and the reader cannot drift (CONTRACTS.md §4: `GET /runs/{id}/events`). The
reader is a parser of outside data: a frame that is not a JSON object, or one larger than
`MAX_SSE_FRAME_BYTES`, is a `ValueError` naming what was wrong, never a crash or a silent skip.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

# A feed event is a few hundred bytes; a said line is bounded by the Harness. 1 MiB is far above any.
MAX_SSE_FRAME_BYTES = 1 << 20
GAP = "gap"  # the event that tells a reader lines it asked for are no longer kept


def encode(event_id: int, kind: str, doc: Any) -> bytes:
    """One event frame: `id`, `event` and one `data` line of compact JSON (JSON has no raw newline)."""
    data = json.dumps(doc, separators=(",", ":"))
    return f"id: {event_id}\nevent: {kind}\ndata: {data}\n\n".encode()


def encode_gap(after: int, first: int) -> bytes:
    """The `gap` event: the feed's lines after id `after` and before id `first` are no longer kept. It has no
    `id` of its own, so a reader's Last-Event-ID stays the last line it was sent."""
    data = json.dumps({"kind": GAP, "after": after, "first": first}, separators=(",", ":"))
    return f"event: {GAP}\ndata: {data}\n\n".encode()


def decode(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON object of each event, in order, from the stream's lines (without their line ends).

    As the SSE specification reads it: `data` lines of one event join with newlines, one space after
    the colon is dropped, comments (`:` keepalives) and other fields are ignored, a blank line ends an
    event, and an event with no data is no event."""
    data: list[str] = []
    size = 0
    for line in lines:
        if not line:
            if data:
                yield _document("\n".join(data))
                data, size = [], 0
            continue
        if line.startswith("data:"):
            value = line[5:]
            value = value[1:] if value.startswith(" ") else value
            size += len(value) + 1
            if size > MAX_SSE_FRAME_BYTES:
                raise ValueError(f"an event larger than {MAX_SSE_FRAME_BYTES} bytes")
            data.append(value)


def _document(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError:
        raise ValueError(f"an event whose data is not JSON: {text[:80]!r}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"an event whose data is not a JSON object: {text[:80]!r}")
    return doc
