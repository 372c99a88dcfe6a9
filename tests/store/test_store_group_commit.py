"""Issue 18 item 3: the StoreActor writes every persist waiting in its mailbox in one transaction, and each
ask is answered only once a commit holds its row (ADR-0065: the row before the caller's next side effect).

The actor's first write is held on an event until the others are queued behind it, so what each test
sees as one batch is decided by the test, never by timing."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pykka
import pytest

from jr2_actors.shell.mailbox import Mailbox
from jr2_actors.store.actor import StoreActor, save
from jr2_actors.store.messages import DiskWriteFailed, Fetch, Healthy, Persist, StoreError
from jr2_actors.store.rows import Row, RunStore
from tests.support.paths import ROOT
from tests.support.stores import unwritable
from tests.support.waiting import WAIT, wait_until


class Held:
    """`RunStore.persist_many` recorded: the first call waits for `release`; every call's rows are noted
    once they are committed (when the real call returns)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = threading.Event()
        self.holding = threading.Event()
        self.batches: list[list[str]] = []
        self.committed: set[str] = set()
        self._lock = threading.Lock()
        real = RunStore.persist_many

        def persist_many(store: RunStore, rows: Sequence[Row], now: float) -> list[int | StoreError]:
            if not self.batches and not self.holding.is_set():
                self.holding.set()
                assert self.release.wait(WAIT)
            outcomes = real(store, rows, now)  # raises what the disk refuses: nothing noted then
            with self._lock:
                self.batches.append([row.run_id for row in rows])
                self.committed.update(r.run_id for r, o in zip(rows, outcomes, strict=True) if isinstance(o, int))
            return outcomes

        monkeypatch.setattr(RunStore, "persist_many", persist_many)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Held:
    return Held(monkeypatch)


@pytest.fixture
def actor(tmp_path: Path, held: Held) -> Iterator[pykka.ActorRef[Any]]:
    ref = StoreActor.start(str(tmp_path))
    yield ref
    ref.stop(block=True, timeout=10)


def depth(ref: pykka.ActorRef[Any]) -> int:
    """How many messages wait in the actor's mailbox (the shell's `Mailbox`)."""
    return cast(Mailbox, ref.actor_inbox).qsize()


def on_disk(tmp_path: Path) -> dict[str, str]:
    """The rows committed, read on a connection of the test's own (it sees committed transactions only)."""
    with sqlite3.connect(tmp_path / "state.db") as db:
        return {str(r): str(b) for r, b in db.execute("SELECT run_id, blob FROM runs")}


def asks(ref: pykka.ActorRef[Any], messages: list[Persist],
         check: Callable[[Persist], object] | None = None) -> tuple[list[threading.Thread], dict[str, object]]:
    """Each persist asked from a thread of its own (a run's); what each heard, and `check`'s answer taken
    the moment its ask returned."""
    heard: dict[str, object] = {}

    def one(message: Persist) -> None:
        try:
            ref.ask(message, timeout=WAIT)
            heard[message.run_id] = check(message) if check else None
        except Exception as e:
            heard[message.run_id] = e

    threads = [threading.Thread(target=one, args=(m,)) for m in messages]
    for t in threads:
        t.start()
    return threads, heard


def queue_behind_the_held_write(ref: pykka.ActorRef[Any], held: Held, messages: list[Persist],
                                check: Callable[[Persist], object] | None = None) -> dict[str, object]:
    first, first_heard = asks(ref, [Persist("first", "live", {"n": 0})])
    assert held.holding.wait(WAIT)
    threads, heard = asks(ref, messages, check)
    wait_until(lambda: depth(ref) == len(messages), what="every persist queued")
    held.release.set()
    for t in [*first, *threads]:
        t.join(WAIT)
    assert first_heard == {"first": None}
    return heard


def test_persists_waiting_in_the_mailbox_are_one_transaction_and_each_is_answered_after_its_commit(
        tmp_path: Path, held: Held, actor: pykka.ActorRef[Any]) -> None:
    runs = [Persist(f"r{i}", "live", {"n": i}, create=True) for i in range(50)]

    def check(message: Persist) -> tuple[bool, str | None]:
        # The moment its ask returns, a run's row is committed: in the batch noted and on disk.
        return message.run_id in held.committed, on_disk(tmp_path).get(message.run_id)

    heard = queue_behind_the_held_write(actor, held, runs, check)
    assert heard == {m.run_id: (True, f'{{"n":{m.blob["n"]}}}') for m in runs}
    assert [len(b) for b in held.batches] == [1, 50]  # the held write, then all fifty in one commit


def test_a_row_refused_in_a_batch_is_answered_alone_and_the_others_land(
        tmp_path: Path, held: Held, actor: pykka.ActorRef[Any]) -> None:
    batch = [Persist("good", "live", {"n": 1}), Persist("first", "live", {"n": 2}, create=True),  # a taken id
             Persist("odd", "paused", {}), Persist("nan", "live", {"x": float("nan")}),
             Persist("also-good", "live", {"n": 3})]
    heard = queue_behind_the_held_write(actor, held, batch)
    assert heard["good"] is None and heard["also-good"] is None
    assert {k: type(v) for k, v in heard.items() if v is not None} == {
        "first": StoreError, "odd": StoreError, "nan": StoreError}
    assert "exists" in str(heard["first"])
    assert [len(b) for b in held.batches] == [1, 5]
    assert sorted(on_disk(tmp_path)) == ["also-good", "first", "good"]
    assert on_disk(tmp_path)["first"] == '{"n":0}'  # the taken id kept its row


def test_a_batch_the_disk_refuses_is_write_failed_to_every_asker_and_none_of_it_lands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse = unwritable(monkeypatch)  # under the hold: the held write is refused too once released
    held = Held(monkeypatch)
    ref = StoreActor.start(str(tmp_path))
    try:
        batch = [Persist(f"r{i}", "live", {"n": i}) for i in range(5)]
        first, first_heard = asks(ref, [Persist("first", "live", {"n": 0})])
        assert held.holding.wait(WAIT)
        refuse.set()
        threads, heard = asks(ref, batch)
        wait_until(lambda: depth(ref) == len(batch), what="every persist queued")
        held.release.set()
        for t in [*first, *threads]:
            t.join(WAIT)
        assert {k: type(v) for k, v in {**first_heard, **heard}.items()} == dict.fromkeys(
            ["first", *(m.run_id for m in batch)], DiskWriteFailed)
        assert on_disk(tmp_path) == {}
        assert isinstance(ref.ask(Healthy(), timeout=WAIT), str)
        refuse.clear()
        assert ref.ask(Healthy(), timeout=WAIT) is True
        ref.ask(Persist("r0", "live", {"n": 9}), timeout=WAIT)
        assert on_disk(tmp_path) == {"r0": '{"n":9}'}
    finally:
        ref.stop(block=True, timeout=10)


def test_a_batch_stops_at_the_first_other_message_so_order_holds(
        tmp_path: Path, held: Held, actor: pykka.ActorRef[Any]) -> None:
    first, _ = asks(actor, [Persist("first", "live", {"n": 0})])
    assert held.holding.wait(WAIT)
    before, _ = asks(actor, [Persist("a", "live", {}), Persist("b", "live", {})])
    wait_until(lambda: depth(actor) == 2, what="two persists queued")
    fetched = actor.ask(Fetch("c"), block=False)  # asked before c's persist: it must not see c
    after, _ = asks(actor, [Persist("c", "live", {})])
    wait_until(lambda: depth(actor) == 4, what="the fetch and c queued")
    held.release.set()
    for t in [*first, *before, *after]:
        t.join(WAIT)
    assert fetched.get(timeout=WAIT) is None
    assert held.batches == [["first"], ["a", "b"], ["c"]]


@pytest.mark.slow
def test_a_crash_between_group_commits_loses_no_acknowledged_row(tmp_path: Path) -> None:
    """Twenty runs persist at once through the StoreActor, each printing what was acknowledged; the process
    is SIGKILLed mid-stream. Every acknowledged save is on disk: each run's row is that save or a later one."""
    script = textwrap.dedent(f"""
        import sys, threading
        from jr2_actors.store.actor import Persist, StoreActor
        ref = StoreActor.start({str(tmp_path)!r})
        out = threading.Lock()
        def run(i):
            n = 0
            while True:
                n += 1
                ref.ask(Persist(f"r{{i}}", "live", {{"n": n, "pad": "x" * 512}}), timeout=30)
                with out:
                    sys.stdout.write(f"r{{i}} {{n}}\\n")
                    sys.stdout.flush()
        for i in range(20):
            threading.Thread(target=run, args=(i,), daemon=True).start()
        threading.Event().wait()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    acked: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        for count, line in enumerate(proc.stdout):
            run, n = line.split()
            acked[run] = int(n)
            if count >= 2000 and len(acked) == 20:  # every run has saved (a loaded machine starves some a while)
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=WAIT)
    assert proc.returncode == -9
    store = RunStore(str(tmp_path))
    store.open()
    kept = {r.run_id: int(r.blob["n"]) for r in store.restore().runs}
    store.close()
    assert len(acked) == 20
    assert all(kept[run] >= n for run, n in acked.items()), {r: (n, kept.get(r)) for r, n in acked.items()}


def test_a_snapshot_too_deep_to_encode_is_our_bug_answered_alone_and_the_store_stays_healthy(
        tmp_path: Path) -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    ref = StoreActor.start(str(tmp_path))
    try:
        with pytest.raises(StoreError, match="not JSON"):
            ref.ask(Persist("deep", "live", {"turn": deep}), timeout=WAIT)
        assert ref.ask(Healthy(), timeout=WAIT) is True  # not the disk's: /healthz is not turned 503 by it
    finally:
        ref.stop(block=True, timeout=10)


class Told:
    """A recipient of a persist's `then`: what each tell saw the moment it came — the rows committed and
    which askers had heard their answer."""

    def __init__(self, tmp_path: Path, heard: dict[str, object]) -> None:
        self.tmp_path = tmp_path
        self.heard = heard
        self.seen: dict[object, tuple[set[str], set[str]]] = {}

    def tell(self, message: object) -> None:
        self.seen[message] = (set(on_disk(self.tmp_path)), set(self.heard))


def test_a_persists_then_is_told_after_its_commit_before_any_answer_and_never_for_a_row_that_did_not_land(
        tmp_path: Path, held: Held, actor: pykka.ActorRef[Any]) -> None:
    first, _ = asks(actor, [Persist("first", "live", {"n": 0})])
    assert held.holding.wait(WAIT)
    heard: dict[str, object] = {}
    told = Told(tmp_path, heard)
    batch = [Persist("a", "live", {"n": 1}, then=(told, "a's lines")),
             Persist("odd", "paused", {}, then=(told, "odd's lines")),  # refused: our bug
             Persist("b", "live", {"n": 2}, then=(told, "b's lines"))]

    def one(message: Persist) -> None:
        try:
            actor.ask(message, timeout=WAIT)
            heard[message.run_id] = None
        except Exception as e:
            heard[message.run_id] = e

    threads = [threading.Thread(target=one, args=(m,)) for m in batch]
    for t in threads:
        t.start()
    wait_until(lambda: depth(actor) == len(batch), what="every persist queued")
    held.release.set()
    for t in [*first, *threads]:
        t.join(WAIT)
    assert held.batches == [["first"], ["a", "odd", "b"]]
    assert isinstance(heard["odd"], StoreError) and heard["a"] is None and heard["b"] is None
    # Both told once their row was committed, before any asker of the batch heard; the refused row: never.
    assert told.seen == {"a's lines": ({"first", "a", "b"}, set()), "b's lines": ({"first", "a", "b"}, set())}


def test_a_persists_then_is_not_told_when_the_disk_refuses_the_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse = unwritable(monkeypatch)
    ref = StoreActor.start(str(tmp_path))
    try:
        told = Told(tmp_path, {})
        refuse.set()
        with pytest.raises(DiskWriteFailed):
            ref.ask(Persist("r0", "live", {"n": 1}, then=(told, "r0's lines")), timeout=WAIT)
        assert told.seen == {}
        refuse.clear()
        ref.ask(Persist("r0", "live", {"n": 1}, then=(told, "r0's lines")), timeout=WAIT)
        assert told.seen == {"r0's lines": ({"r0"}, set())}
    finally:
        ref.stop(block=True, timeout=10)


def test_save_returns_once_the_commit_holds_its_row_and_raises_what_an_ask_would(
        tmp_path: Path, held: Held, actor: pykka.ActorRef[Any]) -> None:
    """`store.save` (how runs persist: an `AnswerLatch` for a Future) keeps the ask's promise and its errors."""
    first, _ = asks(actor, [Persist("first", "live", {"n": 0})])
    assert held.holding.wait(WAIT)
    batch = [*(Persist(f"r{i}", "live", {"n": i}) for i in range(20)), Persist("odd", "paused", {})]
    heard: dict[str, object] = {}

    def one(message: Persist) -> None:
        try:
            save(actor, message, WAIT)
            heard[message.run_id] = (message.run_id in held.committed, on_disk(tmp_path).get(message.run_id))
        except Exception as e:
            heard[message.run_id] = e

    threads = [threading.Thread(target=one, args=(m,)) for m in batch]
    for t in threads:
        t.start()
    wait_until(lambda: depth(actor) == len(batch), what="every save queued")
    assert heard == {}  # nobody answered while the write before theirs holds
    held.release.set()
    for t in [*first, *threads]:
        t.join(WAIT)
    assert isinstance(heard.pop("odd"), StoreError)  # our bug, raised to its caller as the ask raises it
    assert heard == {f"r{i}": (True, f'{{"n":{i}}}') for i in range(20)}
    # One batch after the first, every save in it; their order is the order their threads queued (any).
    assert [b if i == 0 else sorted(b) for i, b in enumerate(held.batches)] == \
        [["first"], sorted(m.run_id for m in batch)]


def test_a_save_queued_when_the_store_stops_is_answered_actor_dead_and_one_unanswered_times_out(
        tmp_path: Path, held: Held) -> None:
    ref = StoreActor.start(str(tmp_path))
    first, _ = asks(ref, [Persist("first", "live", {"n": 0})])
    assert held.holding.wait(WAIT)
    with pytest.raises(pykka.Timeout):
        save(ref, Persist("late", "live", {}), 0.05)  # behind the held write: no answer in time
    heard: list[BaseException] = []

    def queued() -> None:
        try:
            save(ref, Persist("queued", "live", {}), WAIT)
        except BaseException as e:
            heard.append(e)

    ref.stop(block=False)  # queued behind "late": the save after it is left in the inbox for the teardown
    thread = threading.Thread(target=queued)
    thread.start()
    wait_until(lambda: depth(ref) == 3, what="the save queued behind the stop")
    held.release.set()
    thread.join(WAIT)
    for t in first:
        t.join(WAIT)
    assert [type(e) for e in heard] == [pykka.ActorDeadError]
    with pytest.raises(pykka.ActorDeadError):
        save(ref, Persist("after", "live", {}), WAIT)
