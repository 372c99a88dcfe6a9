"""The FeedHub and the event stream's `gap` (issue 16 items 5 and 10): a reader whose `Last-Event-ID` is
older than what is kept is told so, and the hub's memory plateaus however many runs finish."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from typing import Any

from jr2_actors.api import sse
from jr2_actors.api.app import Api
from jr2_actors.run.blob import FEED_KEEP
from jr2_actors.run.feed.hub import FeedHub, FeedRead, Published
from jr2_actors.run.feed.lines import EndedLine, FeedEvent, SaidLine
from jr2_actors.values.constants import FEED_FINISHED_HELD
from jr2_actors.values.run_ids import Keyed
from tests.support.backends import QuietBackend

TOKEN = "t0ken-for-the-feed-tests-0123456789"



def said(i: int) -> FeedEvent:
    return FeedEvent(i, 0.0, SaidLine("coder", 1, f"line {i}"))


def test_the_hub_holds_a_bounded_number_of_finished_runs_however_many_finish() -> None:
    hub = FeedHub()
    live = [f"live-{i}" for i in range(3)]
    for run in live:
        hub.publish(run, [said(1)])
    finished = [f"r-{i}" for i in range(20 * FEED_FINISHED_HELD)]
    for run in finished:
        hub.publish(run, [said(i) for i in range(1, 30)])
        hub.publish(run, [FeedEvent(30, 0.0, EndedLine("done", None))], finished=True)
    held = [run for run in finished if hub.known(run)]
    assert held == finished[-FEED_FINISHED_HELD:]  # the newest finished, the older ones are their rows' now
    assert all(hub.known(run) for run in live)  # a live run's feed is never forgotten
    assert hub.held() == FEED_FINISHED_HELD + len(live)


def test_a_reader_of_a_feed_the_hub_forgets_is_woken() -> None:
    hub = FeedHub(finished_held=1)
    hub.publish("r-1", [said(1)], finished=True)
    hub.publish("r-2", [said(1)], finished=True)  # r-1 forgotten: the orchestrator reads its row
    assert hub.read("r-1", 0, 30.0) == FeedRead([], False)  # at once, not after 30 s


def test_the_hub_says_which_id_last_left_the_kept_lines() -> None:
    hub = FeedHub()
    hub.publish("r-1", [said(i) for i in range(1, FEED_KEEP + 11)])
    got = hub.read("r-1", 3, 0.0)
    assert got.dropped == 10 and got.events[0].id == 11  # lines 4..10 are gone for a reader after 3
    assert hub.read("r-1", 10, 0.0).dropped == 10  # a reader after 10 missed nothing: no gap for it
    restored = FeedHub()  # a new process: the restored run's kept lines come back with what had left them
    restored.tell(Published("r-1", tuple(got.events), dropped=10))
    assert restored.read("r-1", 3, 0.0).dropped == 10


class _Feed(QuietBackend):
    """A Backend with one run's feed, read as the hub or the row would answer."""

    def __init__(self, read: FeedRead) -> None:
        self._read = read

    def submit(self, document: object, run_input: Mapping[str, Any] | None, *,
               keyed: Keyed | None = None) -> str:
        return "r-1"

    def feed(self, run_id: str, after: int, wait: float) -> FeedRead | None:
        return FeedRead([e for e in self._read.events if e.id > after], True, self._read.dropped)





def _events(backend: _Feed, last_event_id: str) -> tuple[bytes, list[dict[str, Any]]]:
    api = Api(backend, TOKEN)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/runs/r-1/events", "HTTP_AUTHORIZATION": f"Bearer {TOKEN}",
               "HTTP_LAST_EVENT_ID": last_event_id, "wsgi.input": io.BytesIO()}
    body: Iterable[bytes] = api(environ, lambda status, headers: None)
    try:
        raw = b"".join(body)
    finally:
        getattr(body, "close", lambda: None)()
    return raw, list(sse.decode(raw.decode().split("\n")))


def test_a_reader_whose_last_event_id_is_older_than_what_is_kept_is_told_of_the_gap() -> None:
    kept = [said(i) for i in range(600, 606)]
    raw, docs = _events(_Feed(FeedRead(kept, True, 599)), "37")
    assert docs[0] == {"kind": "gap", "after": 37, "first": 600}
    assert [d["id"] for d in docs[1:]] == [600, 601, 602, 603, 604, 605]
    gap = raw.split(b"\n\n")[1]  # after the opening comment
    assert gap.startswith(b"event: gap\n") and b"id:" not in gap  # no id: Last-Event-ID stays the reader's


def test_a_reader_that_missed_nothing_gets_no_gap() -> None:
    kept = [said(i) for i in range(600, 606)]
    _, docs = _events(_Feed(FeedRead(kept, True, 599)), "599")
    assert [d["kind"] for d in docs] == ["said"] * 6
    _, docs = _events(_Feed(FeedRead([said(1), said(1040)], True, 0)), "1")  # an id jump after a restore: no gap
    assert [d["id"] for d in docs] == [1040]
