"""ADR-0065's order on the run path: a step that saves the run's row publishes its feed lines only once that
row is on disk — whoever publishes them (the StoreActor, since issue 18: right after its commit).

Every publication to the hub is checked as it happens, on the publishing thread: each line of a step that
persisted must already be in the run's row as a connection of the test's own reads it (committed rows only).
The runs end every way the run path ends a step that saves: a Turn that finishes, a Sandbox evicted."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick, Say
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run import messages as run
from jr2_actors.run.core import RunCore
from jr2_actors.run.feed.hub import FeedHub
from jr2_actors.run.feed.lines import FeedEvent
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.identity import sandbox_name
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow


def saved_ids(state: Path, run_id: str) -> set[int]:
    """The feed ids in the run's committed row (live, or moved to the history)."""
    for name in ("state.db", "history.db"):
        if (state / name).exists():
            with sqlite3.connect(state / name) as db:
                row = db.execute("SELECT blob FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is not None:
                return {int(line["id"]) for line in json.loads(row[0])["feed"]}
    return set()


class Order:
    """Which lines came from a step that persisted (noted as the core makes them), and every publication
    of one that its committed row did not hold yet."""

    def __init__(self, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lock = threading.Lock()
        self.must_be_saved: dict[str, set[int]] = {}
        self.checked: dict[str, set[int]] = {}
        self.early: list[tuple[str, int, str]] = []
        step, publish = RunCore.step, FeedHub.publish

        def step_noted(core: RunCore, event: run.Input, now: float, wall: float) -> run.RunStep:
            out = step(core, event, now, wall)
            if any(isinstance(a, run.Save) for a in out.actions):
                with self.lock:
                    self.must_be_saved.setdefault(core.run_id, set()).update(e.id for e in out.reports)
            return out

        def publish_checked(hub: FeedHub, run_id: str, events: Iterable[FeedEvent], **kw: Any) -> list[FeedEvent]:
            events = tuple(events)
            with self.lock:
                due = [e for e in events if e.id in self.must_be_saved.get(run_id, set())]
            if due:
                on_disk = saved_ids(state, run_id)
                with self.lock:
                    self.checked.setdefault(run_id, set()).update(e.id for e in due)
                    self.early += [(run_id, e.id, e.kind) for e in due if e.id not in on_disk]
            return publish(hub, run_id, events, **kw)

        monkeypatch.setattr(RunCore, "step", step_noted)
        monkeypatch.setattr(FeedHub, "publish", publish_checked)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None) as c:
        yield c


def test_no_feed_line_of_a_step_that_saves_is_published_before_its_row_is_on_disk(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    order = Order(state, monkeypatch)
    cluster.script("worker", [Pick("finish")], [Say("working"), Hang()])
    with Orchestrator(cluster.client(), state_dir=str(state), signing_key=cluster.signing_key) as orch:
        done = orch.submit(read_document(one_state("finishes")))
        assert orch.wait_finished(done, 30)
        evicted = orch.submit(read_document(one_state("evicted").replace("on: {finish: done}",
                                                                          "on: {never: done}")))
        wait_until(lambda: any(e.kind == "running" for e in orch.feed(evicted, 0, 0.0).events),  # type: ignore[union-attr]
                   what="the second run running")
        cluster.evict(sandbox_name(evicted, "W"))
        assert orch.wait_finished(evicted, 30)
        lines = {run_id: {e.id: (e.kind, getattr(e.line, "event", "")) for e in orch.feed(run_id, 0, 0.0).events}  # type: ignore[union-attr]
                 for run_id in (done, evicted)}
    assert order.early == []
    # The check ran on the lines that matter: each run's start, its Turn's admission and its end, and the loss.
    for run_id in (done, evicted):
        assert order.checked[run_id] == order.must_be_saved[run_id]
        assert len(order.checked[run_id]) >= 3, lines[run_id]
    lost = [i for i, line in lines[evicted].items() if line == ("event", "workspace.lost")]
    assert len(lost) == 1 and lost[0] in order.checked[evicted]
