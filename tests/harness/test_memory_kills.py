"""The `/memory-kills` list is untrusted: recorded valid and hostile lists, every bound reached and passed,
oversize, garbage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jr2_actors.harness.memory_kills import MAX_LIST_BYTES, MemoryKill, MemoryKillListError, parse_memory_kills
from tests.support.paths import FIXTURES


def test_valid_list_reads_whole() -> None:
    read = parse_memory_kills((FIXTURES / "memory-kills-valid.json").read_bytes())
    assert read.problems == ()
    assert read.kills == (
        MemoryKill("k-01J9Z3", "2026-09-30T10:05:41.120Z", "coder", "i-7f3a", "1.9Gi", "2Gi", ("c-coder-1",)),
        MemoryKill("k-01J9Z4", "2026-09-30T10:07:02.001Z", "coder", "i-7f3a", "512Mi", "2Gi", ()),
    )


def test_hostile_list_drops_what_breaks_a_bound_and_keeps_real_kills() -> None:
    read = parse_memory_kills((FIXTURES / "memory-kills-hostile.json").read_bytes())
    kept = {k.id: k for k in read.kills}
    assert set(kept) == {"k-bad-size", "k-told"}  # 65-char id, bad `at`, 129-char agent: dropped
    assert (kept["k-bad-size"].peak, kept["k-bad-size"].limit) == (None, None)  # sizes left out, kill kept
    assert kept["k-told"].told == ("ok-conv",)
    text = " ".join(read.problems)
    for expected in ("id missing", "is not a time", "peak left out", "limit left out", "agent not a string",
                     "told entry left out"):
        assert expected in text, expected


def test_no_more_than_sixteen_kills_the_newest_kept() -> None:
    kills = [{"id": f"k-{i}", "at": "2026-09-30T10:00:00Z", "agent": "a", "instanceId": "i", "told": []}
             for i in range(20)]
    read = parse_memory_kills(json.dumps({"kills": kills}).encode())
    assert [k.id for k in read.kills] == [f"k-{i}" for i in range(4, 20)]
    assert "4 kills over the bound" in read.problems[0]


def test_no_more_than_thirty_two_told() -> None:
    kill = {"id": "k", "at": "2026-09-30T10:00:00Z", "agent": "a", "instanceId": "i",
            "told": [f"c-{i}" for i in range(40)]}
    (read,) = parse_memory_kills(json.dumps({"kills": [kill]}).encode()).kills
    assert read.told == tuple(f"c-{i}" for i in range(8, 40))


AT_64 = "2026-09-30T10:05:41." + "1" * 38 + "+00:00"  # the longest `at` that is still a time


def largest_kill(char: str, i: int) -> dict[str, Any]:
    """A kill with every field at its bound, written in `char` (counted as one character each)."""
    return {"id": f"{i:02d}" + char * 62, "at": AT_64, "agent": char * 128, "instanceId": char * 128,
            "peak": "999999.9Gi", "limit": "999999.9Gi", "told": [f"{i:02d}{j:02d}" + char * 124 for j in range(32)]}


@pytest.mark.parametrize("char", ["a", "é", "中"])
def test_the_largest_list_within_the_bounds_is_read_whole(char: str) -> None:
    raw = json.dumps({"kills": [largest_kill(char, i) for i in range(16)]}, ensure_ascii=False).encode()
    assert len(raw) <= MAX_LIST_BYTES
    if char == "中":  # characters are counted, not bytes: ADR-0062's largest list (149,259 bytes) fits
        assert len(raw) > 149_259
    read = parse_memory_kills(raw)
    assert read.problems == ()
    assert len(read.kills) == 16 and all(len(k.told) == 32 for k in read.kills)
    assert read.kills[15] == MemoryKill("15" + char * 62, AT_64, char * 128, char * 128, "999999.9Gi", "999999.9Gi",
                                        tuple(f"15{j:02d}" + char * 124 for j in range(32)))


@pytest.mark.parametrize(("field", "value", "kept"), [
    ("id", "k" * 65, False), ("at", AT_64[:-6] + "1+00:00", False), ("agent", "a" * 129, False),
    ("instanceId", "i" * 129, False), ("agent", "", True), ("agent", None, True), ("agent", 7, False),
    ("at", "2026-09-30", False), ("id", "", False), ("id", None, False), ("at", None, False),
    ("instanceId", None, True), ("instanceId", 7, False),
])
def test_out_of_bounds_or_no_id_or_time_drops_a_kill_no_agent_or_instance_keeps_it(field: str, value: object,
                                                                                  kept: bool) -> None:
    kill = largest_kill("a", 0)
    if value is None:
        del kill[field]
    else:
        kill[field] = value
    read = parse_memory_kills(json.dumps({"kills": [kill]}).encode())
    assert (len(read.kills) == 1) is kept
    assert (read.problems == ()) is kept
    if kept:
        (got,) = read.kills
        assert getattr(got, "instance_id" if field == "instanceId" else field) == ""  # kept, and read as none


def test_a_told_entry_past_its_bound_is_left_out_and_the_kill_kept() -> None:
    kill = largest_kill("a", 0)
    kill["told"] = ["c" * 129, *kill["told"][:31], ""]
    (read,) = parse_memory_kills(json.dumps({"kills": [kill]}).encode()).kills
    assert len(read.told) == 31


def test_the_read_is_at_most_256_kib() -> None:
    doc = b'{"kills": []}'
    assert parse_memory_kills(doc + b" " * (MAX_LIST_BYTES - len(doc))).kills == ()
    with pytest.raises(MemoryKillListError, match="over the"):
        parse_memory_kills(doc + b" " * (MAX_LIST_BYTES - len(doc) + 1))


@pytest.mark.parametrize("raw", [b"", b"not json", b"[]", b'{"kills": {}}', b'{"kills": "x"}', b"[" * 100_000,
                                 b"\xff\xfe", b'{"kills": []}' + b" " * (256 * 1024)])
def test_garbage_or_oversize_is_a_failed_read_never_a_crash(raw: bytes) -> None:
    with pytest.raises(MemoryKillListError):
        parse_memory_kills(raw)


def test_kills_of_the_wrong_shape_are_dropped_one_by_one() -> None:
    raw = json.dumps({"kills": [1, None, "x", {"id": "ok", "at": "2026-09-30T10:00:00Z", "agent": "a",
                                                  "instanceId": "i", "told": "nope"}]}).encode()
    read = parse_memory_kills(raw)
    assert [k.id for k in read.kills] == ["ok"]
    assert read.kills[0].told == ()
    assert len(read.problems) == 4


def _kill(i: int = 0, **fields: Any) -> dict[str, Any]:
    return {"id": f"k-{i}", "at": "2026-09-30T10:00:00Z", "agent": "coder", "instanceId": "i", "peak": "1.9Gi",
            "limit": "2Gi", "told": [], **fields}


def test_adr_0062s_bounds_seventeen_kills_thirty_three_told_and_a_300_kib_body() -> None:
    seventeen = parse_memory_kills(json.dumps({"kills": [_kill(i) for i in range(17)]}).encode())
    assert [k.id for k in seventeen.kills] == [f"k-{i}" for i in range(1, 17)]  # the oldest one is dropped
    told = parse_memory_kills(json.dumps({"kills": [_kill(told=[f"c-{j}" for j in range(33)])]}).encode())
    assert told.kills[0].told == tuple(f"c-{j}" for j in range(1, 33))
    body = json.dumps({"kills": [_kill(told=["x" * 100] * 30) for _ in range(100)]}).encode()
    assert len(body) > 300 * 1024
    with pytest.raises(MemoryKillListError, match="over the"):
        parse_memory_kills(body)  # a read of more than 256 KiB is no read: the list is kept for the next


def test_adr_0062s_bounds_a_65_character_id_and_an_unparseable_at_drop_the_kill_a_peak_of_lots_keeps_it() -> None:
    read = parse_memory_kills(json.dumps({"kills": [_kill(id="k" * 65), _kill(1, at="yesterday"),
                                                    _kill(2, peak="lots")]}).encode())
    assert [(k.id, k.peak, k.limit) for k in read.kills] == [("k-2", None, None)]  # ADR-0062: "says no sizes"
    assert any("peak left out" in p for p in read.problems)
