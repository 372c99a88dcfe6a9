"""The `/memory-kills` list is untrusted: recorded valid and hostile lists, oversize, garbage."""

from __future__ import annotations

import json

import pytest

from jr2_actors.harness.memory_kills import MemoryKill, MemoryKillListError, parse_memory_kills
from tests.sandboxes import FIXTURES


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
    for expected in ("id missing", "is not a time", "peak left out", "limit left out", "agent missing",
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


def test_the_largest_list_within_bounds_is_read() -> None:
    kill = {"id": "k" * 64, "at": "2026-09-30T10:00:00.000000000+00:00"[:64], "agent": "a" * 128,
            "instanceId": "i" * 128, "peak": "1.9Gi", "limit": "2Gi", "told": ["c" * 128] * 32}
    raw = json.dumps({"kills": [kill] * 16}).encode()
    assert len(raw) < 256 * 1024
    assert len(parse_memory_kills(raw).kills) == 16


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
