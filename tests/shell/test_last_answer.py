"""`shell/last_answer.py`: a busy actor's last answer is given at once, and it is asked again only once
that answer is older than `max_age` — one ask outstanding at a time (issue 18: GET /runs never queues
behind the watch's mailbox)."""

from __future__ import annotations

import threading
from typing import Any

import pykka

from jr2_actors.shell.last_answer import LastAnswer
from tests.support.waiting import wait_until


class _Counter(pykka.ThreadingActor):
    """Answers how many times it was asked; blocks while `busy` is set (a mailbox full of work)."""

    def __init__(self, busy: threading.Event, free: threading.Event) -> None:
        super().__init__()
        self.asked = 0
        self.busy, self.free = busy, free

    def on_receive(self, message: Any) -> Any:
        if self.busy.is_set():
            self.free.wait(30)
        self.asked += 1
        return self.asked


def test_a_busy_actor_answers_its_last_answer_and_is_asked_again_only_when_it_is_old() -> None:
    busy, free = threading.Event(), threading.Event()
    actor = _Counter.start(busy, free)
    now = [0.0]
    try:
        last = LastAnswer(actor, "asked?", wait=0.2, max_age=1.0, now=lambda: now[0])
        wait_until(lambda: last.get() == 1, what="the first answer")
        now[0] = 0.5
        assert last.get() == 1  # fresh enough: not asked again
        busy.set()
        now[0] = 2.0
        assert last.get() == 1  # old: asked again, but the actor is busy — its last answer meanwhile
        now[0] = 2.5
        assert last.get() == 1  # the ask in flight is not doubled while it is out
        now[0] = 5.5
        assert last.get() is None  # an answer asked 5 × max_age ago is no answer
        now[0] = 2.5
        free.set()
        wait_until(lambda: last.get() == 2, what="the second answer")
        assert last.get() == 2 and actor.proxy().asked.get(timeout=5) == 2  # two asks in all
    finally:
        free.set()
        actor.stop()


def test_a_dead_actor_is_no_answer() -> None:
    actor = _Counter.start(threading.Event(), threading.Event())
    last = LastAnswer(actor, "asked?", wait=1.0, max_age=0.0)
    assert last.get() == 1
    actor.stop()
    assert last.get() is None
