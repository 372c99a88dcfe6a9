"""Mailbox metrics: a blocked actor's queued messages show as depth; the text is valid exposition."""

from __future__ import annotations

import re
import threading
from typing import Any

import pykka

from jr2_actors.metrics import MailboxSample, mailbox_samples, render
from tests.waiting import wait_until


class Slow(pykka.ThreadingActor):
    def __init__(self, gate: threading.Event, started: threading.Event) -> None:
        super().__init__()
        self.gate = gate
        self.started = started

    def on_receive(self, message: Any) -> None:
        self.started.set()
        self.gate.wait(10)


def test_queued_messages_are_the_depth_of_the_class() -> None:
    gate, started = threading.Event(), threading.Event()
    refs = [Slow.start(gate, started) for _ in range(2)]
    refs[0].tell("first")  # taken at once: the actor now blocks on the gate
    assert started.wait(10)
    for i in range(5):
        refs[0].tell(i)
    refs[1].tell("x")
    wait_until(lambda: any(s.depth_total >= 5 for s in mailbox_samples(refs)))
    (sample,) = mailbox_samples(refs)
    assert sample.actor == "Slow" and sample.actors == 2
    assert sample.depth_max == 5
    assert sample.depth_total in (5, 6)  # the second actor may or may not have taken its one message yet
    gate.set()
    for ref in refs:
        ref.stop(block=True, timeout=10)


def test_exposition_format() -> None:
    text = render([MailboxSample('Odd"Name\\', 3, 7, 4)], {"jr2_kube_writes_in_flight": ("Writes in flight.", 2)})
    assert 'jr2_actor_mailbox_depth{actor="Odd\\"Name\\\\"} 7' in text
    assert 'jr2_actor_mailbox_depth_max{actor="Odd\\"Name\\\\"} 4' in text
    assert "jr2_kube_writes_in_flight 2" in text
    sample_line = re.compile(r'^[a-z_][a-z0-9_]*(\{[a-z_]+="(?:[^"\\]|\\.)*"\})? -?[0-9.e+]+$')
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or sample_line.match(line), line
