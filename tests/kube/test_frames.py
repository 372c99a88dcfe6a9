"""The watch frame decoder, fed the recorded frames of CONTRACTS.md §2 and hostile lines."""

from __future__ import annotations

import json

import pytest

from jr2_actors.kube.frames import Bookmark, ErrorFrame, FrameDecoder, FrameError, WatchEvent, decode_line
from jr2_actors.values.errors import ApiStatus
from tests.support.paths import FIXTURES

EXPIRED_410 = (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
               b'"message":"too old resource version: 1 (9371596)","reason":"Expired","code":410}}')


def test_recorded_410_error_frame_byte_for_byte() -> None:
    recorded = (FIXTURES / "watch-error-frames.jsonl").read_bytes().splitlines()[0]
    assert recorded == EXPIRED_410
    (frame,) = FrameDecoder().feed(recorded + b"\n")
    assert frame == ErrorFrame(ApiStatus(410, "Expired", "too old resource version: 1 (9371596)"))


def test_every_recorded_error_frame_decodes() -> None:
    frames = FrameDecoder().feed((FIXTURES / "watch-error-frames.jsonl").read_bytes())
    statuses = [f.status for f in frames if isinstance(f, ErrorFrame)]
    assert [(s.code, s.reason) for s in statuses] == [(410, "Expired"), (410, "Expired"), (410, "Gone"),
                                                      (504, "Timeout")]
    assert "Too large resource version" in statuses[3].message


def test_added_sandbox_then_bookmark() -> None:
    frames = FrameDecoder().feed((FIXTURES / "watch-added-then-bookmark.jsonl").read_bytes())
    assert len(frames) == 2
    added, bookmark = frames
    assert isinstance(added, WatchEvent)
    assert added.type == "ADDED"
    assert added.resource_version == "184233"
    assert added.object["status"]["phase"] == "Ready"
    assert added.object["status"]["harness"]["lastTerminated"]["reason"] == "OOMKilled"
    assert bookmark == Bookmark("184300")


def test_line_straddling_chunks_at_every_split_point() -> None:
    line = (FIXTURES / "watch-added-then-bookmark.jsonl").read_bytes().splitlines()[1] + b"\n"
    for cut in range(1, len(line)):
        decoder = FrameDecoder()
        first = decoder.feed(line[:cut])
        second = decoder.feed(line[cut:])
        assert first == []
        assert second == [Bookmark("184300")]


def test_byte_at_a_time_yields_every_frame_in_order() -> None:
    data = (FIXTURES / "watch-added-then-bookmark.jsonl").read_bytes() + EXPIRED_410 + b"\n"
    decoder = FrameDecoder()
    out = []
    for i in range(len(data)):
        out.extend(decoder.feed(data[i:i + 1]))
    assert [type(f) for f in out] == [WatchEvent, Bookmark, ErrorFrame]


def test_many_frames_in_one_chunk_are_all_returned_at_once() -> None:
    bookmarks = b"".join(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"%d"}}}\n' % i
                         for i in range(1, 101))
    out = FrameDecoder().feed(bookmarks)
    assert out == [Bookmark(str(i)) for i in range(1, 101)]


def test_last_line_without_newline_is_decoded_at_end() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(EXPIRED_410) == []
    (frame,) = decoder.end()
    assert isinstance(frame, ErrorFrame)
    assert decoder.end() == []


def test_blank_lines_are_not_frames() -> None:
    assert FrameDecoder().feed(b"\n  \n\r\n") == []


@pytest.mark.parametrize(
    ("line", "kind", "detail"),
    [
        (b"garbage", "malformed", "not JSON"),
        (b"\xff\xfe\xfd", "malformed", "not JSON"),
        (b"[1,2,3]", "malformed", "not a JSON object"),
        (b'{"object":{}}', "malformed", "no string 'type'"),
        (b'{"type":"ADDED"}', "malformed", "without an 'object'"),
        (b'{"type":"ADDED","object":{"metadata":[]}}', "malformed", "metadata"),
        (b'{"type":"ADDED","object":{"metadata":{"resourceVersion":7}}}', "malformed", "non-string"),
        (b'{"type":"BOOKMARK","object":{"metadata":{}}}', "malformed", "BOOKMARK"),
        (b'{"type":"ERROR","object":{"code":"410"}}', "malformed", "not a Status"),
        (b'{"type":"SURPRISE","object":{}}', "unknown-type", "SURPRISE"),
        (b"[" * 200_000 + b"]" * 200_000, "malformed", "not JSON"),
    ],
)
def test_hostile_lines_are_classified_never_raised(line: bytes, kind: str, detail: str) -> None:
    (frame,) = FrameDecoder().feed(line + b"\n")
    assert isinstance(frame, FrameError)
    assert frame.kind == kind
    assert detail in frame.detail
    assert frame.size == len(line)
    assert len(frame.excerpt) <= 120


def test_ten_mebibyte_line_is_oversized_and_the_stream_recovers() -> None:
    decoder = FrameDecoder()
    big = b'{"type":"ADDED","object":{"metadata":{"resourceVersion":"5"},"pad":"' + b"x" * (10 * 1024 * 1024) + b'"}}'
    out = []
    # Arrive in 64 KiB chunks, as a socket would deliver it, then a good frame after it.
    stream = big + b"\n" + EXPIRED_410 + b"\n"
    for i in range(0, len(stream), 65536):
        out.extend(decoder.feed(stream[i:i + 65536]))
    assert len(out) == 2
    oversized, after = out
    assert isinstance(oversized, FrameError)
    assert oversized.kind == "oversized"
    assert oversized.size == len(big)
    assert isinstance(after, ErrorFrame)
    # It never held the whole line: its buffer is empty again.
    assert decoder.feed(b"") == []


def test_oversized_without_newline_reports_at_end() -> None:
    decoder = FrameDecoder(max_line_bytes=1024)
    assert decoder.feed(b"x" * 5000) == []
    (frame,) = decoder.end()
    assert isinstance(frame, FrameError)
    assert frame.kind == "oversized"
    assert frame.size == 5000


def test_deleted_event_carries_its_version() -> None:
    obj = {"metadata": {"name": "a", "uid": "u", "resourceVersion": "9"}}
    frame = decode_line(json.dumps({"type": "DELETED", "object": obj}).encode())
    assert frame == WatchEvent("DELETED", obj, "9")
