"""Order across threads: a message the actor's thread took is older than any still waiting (review fixes)."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run.messages import RunFinished
from jr2_actors.shell.mailbox import Mailbox


class _Envelope:
    def __init__(self, message: str) -> None:
        self.message = message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Envelope) and other.message == self.message


def _put(box: Mailbox, *messages: str) -> None:
    for m in messages:
        box.put(_Envelope(m))


def test_another_threads_take_gets_nothing_while_the_actor_holds_an_older_message() -> None:
    box = Mailbox()
    _put(box, "unregister")
    assert box.get() == _Envelope("unregister")  # the actor's thread holds it (not yet stepped)
    _put(box, "register")
    assert box.take_while(lambda m: True, 10, idle_only=True) == []  # would step the newer one first
    assert box.take_while(lambda m: True, 10) == [_Envelope("register")]  # the actor's own (group commit)
    _put(box, "again")
    assert box.get() == _Envelope("again")
    with pytest.raises(queue.Empty):
        box.get(block=False)  # back for its next message: idle
    _put(box, "again")
    assert box.take_while(lambda m: True, 10, idle_only=True) == [_Envelope("again")]  # idle: taken in order


def test_a_take_while_idle_takes_the_waiting_control_messages() -> None:
    box = Mailbox()
    with pytest.raises(queue.Empty):
        box.get(block=False)
    _put(box, "a", "b")
    assert box.take_while(lambda m: True, 10, idle_only=True) == [_Envelope("a"), _Envelope("b")]


class _Ref:
    def is_alive(self) -> bool:
        return False


def test_a_run_that_finished_before_its_actor_was_entered_is_not_listed_for_good(tmp_path: Path) -> None:
    with FakeCluster(operator=False, harness=False) as cluster:
        _finished_before_entered(Orchestrator(cluster.client(), state_dir=str(tmp_path),
                                              signing_key=cluster.signing_key))


def _finished_before_entered(orch: Orchestrator) -> None:
    ref: Any = _Ref()

    def start() -> Any:
        orch.tell(RunFinished("r-1", "done", None))  # its first step ended it, on the actor's thread
        return ref

    assert orch._started("r-1", start) is ref
    assert "r-1" not in orch._runs and not orch._entering
