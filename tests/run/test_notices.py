"""ADR-0062's notice ledger, one test per rule, on the ledger alone (in the run's engine:
test_notices_run.py)."""

from __future__ import annotations

import json

from jr2_actors.run.notices import (
    UNREADABLE,
    Ledger,
    Mark,
    conversation_new,
    mark_from,
    mark_of,
    memory_notice,
    nudge_eligible,
    said_once,
)
from tests.support.kills import WALL0, at, kill


def test_one_kill_read_on_the_stream_and_in_the_list_is_one_notice() -> None:
    ledger = Ledger()
    assert ledger.stream_kill("F-1", "k-1", "coder", "1.9Gi", "2Gi") is True
    assert ledger.list_read("F-1", [kill("k-1")]) is False  # same source: nothing new, nothing to save
    assert [e.notice for e in ledger.take("F-1", "c")] == [memory_notice(agent="coder", peak="1.9Gi", limit="2Gi")]


def test_one_kill_on_two_streams_is_one_notice() -> None:
    ledger = Ledger()
    ledger.stream_kill("F-1", "k-1", "coder", "1.9Gi", "2Gi")
    ledger.stream_kill("F-1", "k-1", "reviewer", "1.9Gi", "2Gi")
    assert len(ledger.take("F-1", "c")) == 1


def test_a_burst_of_kills_in_one_read_is_one_notice_the_newest() -> None:
    ledger = Ledger()
    ledger.list_read("F-1", [kill("k-2", at(2), peak="1.5Gi"), kill("k-1", at(1)), kill("k-3", at(3), peak="1.7Gi")])
    taken = ledger.take("F-1", "c")
    assert [e.source for e in taken] == ["F-1|k-3"] and taken[0].notice.fields["peak"] == "1.7Gi"
    assert ledger.list_read("F-1", [kill("k-1", at(1)), kill("k-2", at(2))]) is False  # the older were marked seen


def test_stream_kills_with_different_sizes_give_one_notice_each() -> None:
    ledger = Ledger()
    ledger.stream_kill("F-1", "k-1", "coder", "1.5Gi", "2Gi")
    ledger.stream_kill("F-1", "k-2", "coder", "1.9Gi", "2Gi")
    assert [e.notice.fields["peak"] for e in ledger.take("F-1", "c")] == ["1.5Gi", "1.9Gi"]


def test_equal_notices_of_two_sources_keep_two_entries_and_are_said_once() -> None:
    ledger = Ledger()
    ledger.stream_kill("F-1", "k-1", "coder", "1.9Gi", "2Gi")
    ledger.stream_kill("F-1", "k-2", "coder", "1.9Gi", "2Gi")
    taken = ledger.take("F-1", "c")
    assert len(taken) == 2
    assert len(said_once([e.notice for e in taken])) == 1


def test_a_raise_that_changes_nothing_says_so() -> None:
    ledger = Ledger()
    assert ledger.list_read("F-1", None) is False  # a read that could not tell raises nothing
    assert ledger.list_read("F-1", []) is False
    assert ledger.list_read("F-1", [kill("k-1")]) is True
    assert ledger.list_read("F-1", [kill("k-1")]) is False


def test_a_restart_raises_no_kill_twice() -> None:
    ledger = Ledger()
    ledger.list_read("F-1", [kill("k-1")])
    ledger.take("F-1", "c")  # delivered
    again = Ledger.restore(json.loads(json.dumps(ledger.snapshot())))
    assert again.list_read("F-1", [kill("k-1")]) is False
    assert again.take("F-1", "c") == []


def test_a_crash_between_the_read_and_the_save_loses_no_kill() -> None:
    ledger = Ledger()
    saved = json.loads(json.dumps(ledger.snapshot()))
    ledger.list_read("F-1", [kill("k-1")])  # read, raised — and the process dies before the save
    again = Ledger.restore(saved)
    assert again.list_read("F-1", [kill("k-1")]) is True  # the list still holds it: the next read raises it
    assert len(again.take("F-1", "c")) == 1


def test_a_kernel_kill_says_the_limit_and_no_peak_and_is_one_notice_on_both_paths() -> None:
    ledger = Ledger()
    assert ledger.kernel_kill("F-1", "2026-11-29T10:00:00Z", "OOMKilled", "2Gi", agent="coder") is True
    assert ledger.kernel_kill("F-1", "2026-11-29T10:00:00Z", "OOMKilled", "2Gi") is False
    assert ledger.kernel_kill("F-1", "2026-11-29T11:00:00Z", "Error", "2Gi") is False  # not a memory kill
    (entry,) = ledger.take("F-1", "c")
    assert entry.notice.wire() == {"kind": "memory-limit", "scope": "workspace", "agent": "coder", "limit": "2Gi"}


def test_a_size_not_in_the_guards_form_is_left_out_and_the_kill_kept() -> None:
    ledger = Ledger()
    ledger.list_read("F-1", [kill("k-1", peak="lots", limit="2Gi")])
    (entry,) = ledger.take("F-1", "c")
    assert entry.notice.wire() == {"kind": "memory-limit", "scope": "workspace"}  # ADR-0062: "says no sizes"
    ledger.kernel_kill("F-2", "t", "OOMKilled", "2147483648")  # a Workspace's memory in bytes: said as a size
    assert ledger.take("F-2", "c")[0].notice.fields["limit"] == "2Gi"


def test_notices_are_pending_per_scope_and_taken_by_the_next_admission_in_it() -> None:
    ledger = Ledger()
    ledger.list_read("F-1", [kill("k-1")])
    ledger.conversation("conv-a", conversation_new("restart"))
    assert ledger.take("F-2", "conv-b") == []  # another Workspace, another conversation: nothing
    assert [e.scope for e in ledger.take("F-1", "conv-b")] == ["workspace:F-1"]
    assert [e.scope for e in ledger.take(None, "conv-a")] == ["conversation:conv-a"]  # Menu-only: conversation only


def test_what_the_harness_never_read_is_raised_again_with_its_source() -> None:
    ledger = Ledger()
    ledger.list_read("F-1", [kill("k-1")])
    carried = ledger.take("F-1", "c")
    assert ledger.raise_again(carried) is True
    assert ledger.take("F-1", "c") == carried
    assert ledger.list_read("F-1", [kill("k-1")]) is False  # still one notice: its source stays seen


def test_a_notice_with_no_source_merges_only_into_a_pending_one_with_no_source() -> None:
    ledger = Ledger()
    new = conversation_new("restart")
    ledger.conversation("c", new)
    carried = ledger.take(None, "c")
    ledger.conversation("c", new)
    ledger.raise_again(carried)
    assert len(ledger.take(None, "c")) == 1


def test_the_turns_mark_is_the_newest_kill_its_first_read_saw() -> None:
    assert mark_of([kill("k-1", at(1)), kill("k-2", at(2))], WALL0) == Mark("kill", kill="k-2")
    assert mark_of([], WALL0) == Mark("none")
    assert mark_of(None, WALL0) == Mark("at", wall=WALL0 - 1)  # a failed read: the Turn's start less a second
    for mark in (Mark("kill", kill="none"), Mark("none"), Mark("at", wall=WALL0 - 1)):  # the blob gives each back
        assert mark_from(json.loads(json.dumps(mark.json()))) == mark


def test_a_nudge_takes_only_kills_after_the_mark_and_after_the_newest_told() -> None:
    listed = [kill("k-1", at(1)), kill("k-2", at(2), told=("conv",)), kill("k-3", at(3)), kill("k-4", at(4))]
    assert nudge_eligible(listed, Mark("kill", kill="k-1"), "conv") == {"k-3", "k-4"}  # k-2 told it already
    assert nudge_eligible(listed, Mark("kill", kill="k-3"), "conv") == {"k-4"}
    assert nudge_eligible(listed, Mark("kill", kill="k-gone"), "other") == {"k-1", "k-2", "k-3", "k-4"}  # it left
    assert nudge_eligible(listed, Mark("none"), "other") == {"k-1", "k-2", "k-3", "k-4"}
    assert nudge_eligible(None, Mark("kill", kill="k-1"), "conv") == set()  # a read that could not tell: none
    assert nudge_eligible(listed, UNREADABLE, "other") == set()  # a mark that cannot be read: could not tell


def test_a_failed_first_read_marks_by_time_and_a_nudge_takes_only_later_kills() -> None:
    started = 1_795_946_400.0  # 2026-11-29T10:00:00Z
    mark = mark_of(None, started)
    listed = [kill("k-early", "2026-11-29T09:59:58.000Z"), kill("k-slack", "2026-11-29T09:59:59.500Z"),
              kill("k-late", "2026-11-29T10:00:30.000Z")]
    assert nudge_eligible(listed, mark, "conv") == {"k-slack", "k-late"}  # one second allowed for a slow pod clock


def test_a_nudge_takes_no_kernel_kill() -> None:
    ledger = Ledger()
    ledger.kernel_kill("F-1", "t", "OOMKilled", "2Gi")
    ledger.list_read("F-1", [kill("k-1")])
    taken = ledger.take_guard_kills("F-1", {"k-1", "t", "kernel"})
    assert [e.source for e in taken] == ["F-1|k-1"]
    assert [e.source for e in ledger.take("F-1", "c")] == ["F-1|kernel|t"]  # it stays for the next Turn


# -- in the engine -------------------------------------------------------------------------------------
