"""The watch's JSON decoder, both ways: orjson (the `fast` extra) and the standard library's fallback read every
frame alike, and refuse a malformed, oversized or hostile one with a clear `FrameError`: never a raise, never a
frame dropped without one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jr2_actors.kube import decode
from jr2_actors.kube.decode import Loads, stdlib_loads
from jr2_actors.kube.frames import Bookmark, Decoded, ErrorFrame, FrameDecoder, FrameError, WatchEvent, decode_line
from jr2_actors.values.constants import WATCH_WRITTEN_AT_FIELD
from tests.support.sandboxes import sandbox

orjson = pytest.importorskip("orjson")  # the test extra installs it: both ways run in CI
DECODERS: dict[str, Loads] = {"orjson": orjson.loads, "json": stdlib_loads}


@pytest.fixture(params=sorted(DECODERS))
def loads(request: pytest.FixtureRequest) -> Loads:
    return DECODERS[request.param]


def line(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def test_the_fast_decoder_is_chosen_when_installed_and_the_fallback_is_the_standard_librarys() -> None:
    assert decode.DECODER == "orjson" and decode.loads is orjson.loads
    assert stdlib_loads(b' {"a": [1, 2.5, "\\u00e9", null, true]} ') == {"a": [1, 2.5, "é", None, True]}


WELL_FORMED: list[Any] = [
    {"type": "ADDED", "object": sandbox("run-a", rv=5), WATCH_WRITTEN_AT_FIELD: 1790000000.25},
    {"type": "MODIFIED", "object": sandbox("rün-ü", rv="12", phase="Lost")},  # text beyond ASCII
    {"type": "DELETED", "object": {"metadata": {"name": "n", "uid": "u", "resourceVersion": "9", "x": [[[{}]]]}}},
    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}},
    {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}},
]


@pytest.mark.parametrize("doc", WELL_FORMED, ids=lambda d: d["type"])
def test_both_decoders_read_every_frame_alike(doc: Any) -> None:
    fast, fallback = (decode_line(line(doc), DECODERS[name]) for name in ("orjson", "json"))
    assert fast == fallback
    assert isinstance(fast, WatchEvent | Bookmark | ErrorFrame)
    if isinstance(fast, WatchEvent):
        assert fast.object == doc["object"] and fast.written_at == doc.get(WATCH_WRITTEN_AT_FIELD)


HOSTILE: dict[str, bytes] = {
    "not JSON": b"{not json",
    "truncated": b'{"type": "ADDED", "object": {"metadata": {"name": "a"',
    "two documents": b'{"type": "ADDED", "object": {}} {"type": "ADDED"}',
    "NaN": b'{"type": "ADDED", "object": {"metadata": {}}, "jr2.dev/writtenAt": NaN}',
    "Infinity": b'{"type": "ADDED", "object": {"metadata": {}}, "x": -Infinity}',
    "a double's overflow": b'{"type": "ADDED", "object": {"metadata": {}}, "x": 1e400}',
    "invalid UTF-8": b'{"type": "ADDED", "object": {"metadata": {"name": "\xff\xfe"}}}',
    "UTF-16": '{"type": "ADDED", "object": {}}'.encode("utf-16"),
    "nested past any limit": b'{"type": "ADDED", "object": {"metadata": {}}, "x": ' + b"[" * 100_000
                             + b"]" * 100_000 + b"}",
    "a bare string": b'"ADDED"',
    "an array": b"[1, 2]",
    "NUL bytes": b"\x00\x00\x00",
}


@pytest.mark.parametrize("what", HOSTILE)
def test_a_hostile_line_is_a_clear_malformed_frame_either_way(what: str, loads: Loads) -> None:
    frame = decode_line(HOSTILE[what], loads)
    assert isinstance(frame, FrameError) and frame.kind == "malformed", frame
    assert frame.detail and frame.size == len(HOSTILE[what]) and len(frame.excerpt) <= 120


def test_the_decoders_differ_only_where_the_module_says(loads: Loads) -> None:
    """A lone surrogate escape and an integer beyond 64 bits: a frame either way, never a raise."""
    surrogate = decode_line(b'{"type": "ADDED", "object": {"metadata": {"name": "\\ud800"}}}', loads)
    assert isinstance(surrogate, WatchEvent | FrameError)
    big = decode_line(b'{"type": "ADDED", "object": {"metadata": {}, "n": ' + b"9" * 30 + b"}}", loads)
    assert isinstance(big, WatchEvent) and big.object["n"] == pytest.approx(10**30)


def test_the_frame_decoder_uses_the_decoder_it_is_given_and_loses_nothing(loads: Loads) -> None:
    calls: list[bytes] = []

    def counted(data: bytes) -> Any:
        calls.append(bytes(data))
        return loads(data)

    good = [line(doc) for doc in WELL_FORMED]
    stream = b"\n".join([good[0], HOSTILE["NaN"], good[1], b"x" * 5_000, good[3], HOSTILE["invalid UTF-8"],
                         good[2]]) + b"\n"
    frames: list[Decoded] = []
    decoder = FrameDecoder(max_line_bytes=4_096, decoder=counted)
    for i in range(0, len(stream), 777):  # lines straddling reads
        frames += decoder.feed(stream[i:i + 777])
    frames += decoder.end()
    kinds = [f.kind if isinstance(f, FrameError) else type(f).__name__ for f in frames]
    assert kinds == ["WatchEvent", "malformed", "WatchEvent", "oversized", "Bookmark", "malformed", "WatchEvent"]
    assert len(calls) == 6  # the oversized line is never decoded (nor buffered)
