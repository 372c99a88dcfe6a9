"""ADR-0062's rule for logging memory-kill reads, one test per clause (run/readlog.py)."""

from __future__ import annotations

from jr2_actors.run.readlog import MAX_SAID_PROBLEMS, ReadLog

F1, F2 = "http://ws-f-1:8080", "http://ws-f-2:8080"


def test_one_line_when_a_harnesss_reads_start_failing_none_while_they_keep_failing() -> None:
    log = ReadLog()
    assert log.failed(F1, "no answer in 5 s") == f"memory-kill reads from {F1} fail: no answer in 5 s"
    assert log.failed(F1, "no answer in 5 s") is None  # the second seat on the same Harness: not again
    assert log.failed(F1, "503 draining") is None


def test_per_harness_not_per_seat() -> None:
    log = ReadLog()
    assert log.failed(F1, "x") is not None
    assert log.failed(F2, "x") is not None  # another Harness starts failing: its own line


def test_nothing_when_they_work_again_and_again_only_after_a_read_that_worked() -> None:
    log = ReadLog()
    log.failed(F1, "x")
    assert log.read(F1, []) == []  # working again: no line
    assert log.failed(F1, "y") == f"memory-kill reads from {F1} fail: y"  # failing anew: said anew


def test_each_problem_of_a_list_is_said_once_per_harness() -> None:
    log = ReadLog()
    assert log.read(F1, ["kill 3 dropped: at is not a time"]) == [
        f"memory-kill list from {F1}: kill 3 dropped: at is not a time"]
    assert log.read(F1, ["kill 3 dropped: at is not a time"]) == []
    assert log.read(F2, ["kill 3 dropped: at is not a time"]) != []


def test_a_hostile_list_cannot_grow_what_is_remembered_past_its_bound() -> None:
    log = ReadLog()
    for i in range(MAX_SAID_PROBLEMS + 50):
        log.read(F1, [f"problem {i}"])
    assert log.remembered == MAX_SAID_PROBLEMS
    assert log.read(F1, [f"problem {MAX_SAID_PROBLEMS + 10}"]) != []  # past the bound: said again, not lost
