"""The feed's SSE framing both ways (api/sse.py): what the API writes the client reads back, and a feed
that is not ours is a clear ValueError, never a crash or a silent skip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jr2_actors.api.sse import MAX_SSE_FRAME_BYTES, decode, encode


def lines(raw: bytes) -> list[str]:
    return raw.decode().split("\n")


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=10)


@given(st.lists(st.dictionaries(st.text(), json_values, max_size=4), max_size=5))
def test_what_encode_writes_decode_reads_back_in_order(docs: list[dict[str, object]]) -> None:
    stream = b"".join(encode(i, "said", doc) for i, doc in enumerate(docs))
    assert list(decode(lines(stream))) == docs


def test_comments_other_fields_and_split_data_lines_read_as_the_specification_says() -> None:
    stream = [": keepalive", "", "id: 7", "event: said", "retry: 10", 'data: {"a":', "data:1}", "", ""]
    assert list(decode(stream)) == [{"a": 1}]


def test_an_event_without_a_final_blank_line_is_not_yet_an_event() -> None:
    assert list(decode(['data: {"a": 1}'])) == []


@pytest.mark.parametrize(("data", "words"), [
    ("data: not json", "not JSON"),
    ("data: [1, 2]", "not a JSON object"),
    ('data: "a string"', "not a JSON object"),
    ("data: {\"a\": ", "not JSON"),
])
def test_a_frame_that_is_not_a_json_object_is_a_clear_error(data: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        list(decode([data, ""]))


def test_the_events_before_a_bad_frame_are_delivered_first() -> None:
    events = decode(['data: {"n": 1}', "", "data: nope", ""])
    assert next(events) == {"n": 1}
    with pytest.raises(ValueError, match="not JSON"):
        next(events)


def test_an_oversized_event_is_refused_before_it_is_held_whole() -> None:
    chunk = "x" * 4096
    endless = (f"data: {chunk}" for _ in range(MAX_SSE_FRAME_BYTES // 4096 + 2))
    with pytest.raises(ValueError, match="larger than"):
        list(decode(endless))
