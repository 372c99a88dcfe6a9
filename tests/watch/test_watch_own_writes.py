"""A Workspace's own Lease renewal is not delivered back to it — only that change, only for the stamp the
renewal lane noted for its key in `OwnStamps` (no message per renewal) — and a delivery's write time belongs
to its event, never to a later replay of it."""

from __future__ import annotations

import copy
import random
from typing import Any

from jr2_actors.kube.frames import WatchEvent
from jr2_actors.watch.core import Registered, Unregistered, WatchCore, deliveries
from jr2_actors.watch.deliveries import Delivery, SandboxSeen
from jr2_actors.watch.identity import KEEPALIVE_ANNOTATION, SandboxKey
from jr2_actors.watch.messages import OwnStamps
from jr2_actors.watch.stream import FrameReceived, Listed, Started, WatchOpened
from tests.support.sandboxes import sandbox

A = SandboxKey("run-a", "F-1")
STAMP = "2026-12-01T23:00:00.000Z"


def renewed(obj: dict[str, Any], rv: int, stamp: str = STAMP, **status: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = str(rv)
    out["metadata"]["annotations"][KEEPALIVE_ANNOTATION] = stamp
    out["status"].update(status)
    return out


class Watch:
    def __init__(self) -> None:
        self.stamps = OwnStamps()  # the renewal lane's, read by the core
        self.core = WatchCore(rng=random.Random(1), own_stamps=self.stamps)
        self.core.step(Started(), 0)
        self.core.step(Listed([], "1"), 0)
        self.core.step(WatchOpened(self.core.stream), 0)

    def tell(self, event: Any) -> list[Delivery]:
        return list(deliveries(self.core.step(event, 1.0)))

    def frame(self, obj: dict[str, Any], type_: str = "MODIFIED", written_at: float | None = None) -> list[Delivery]:
        frame = WatchEvent(type_, obj, obj["metadata"]["resourceVersion"], written_at)  # type: ignore[arg-type]
        return self.tell(FrameReceived(self.core.stream, frame))


def running_watch() -> tuple[Watch, dict[str, Any]]:
    w = Watch()
    w.tell(Registered(A))
    first = sandbox("run-a", rv=2, phase="Ready")
    assert len(w.frame(first, "ADDED")) == 1
    return w, first


def test_the_announced_renewal_alone_is_not_delivered_and_the_next_change_is() -> None:
    w, first = running_watch()
    w.stamps.note(A, STAMP)
    own = renewed(first, 3)
    assert w.frame(own) == []  # its PATCH answer already carried version 3
    later = renewed(own, 4, phase="Lost")
    (seen,) = w.frame(later)
    assert isinstance(seen, SandboxSeen) and seen.sandbox.phase == "Lost"


def test_a_renewal_that_was_not_announced_is_delivered() -> None:
    w, first = running_watch()
    (seen,) = w.frame(renewed(first, 3))
    assert isinstance(seen, SandboxSeen) and seen.sandbox.resource_version == "3"


def test_another_stamp_than_the_announced_one_is_delivered() -> None:
    w, first = running_watch()
    w.stamps.note(A, STAMP)
    (seen,) = w.frame(renewed(first, 3, stamp="2026-12-01T23:00:05.000Z"))  # a predecessor's late write
    assert isinstance(seen, SandboxSeen) and seen.sandbox.resource_version == "3"


def test_a_change_carrying_the_stamp_with_anything_else_changed_is_delivered() -> None:
    w, first = running_watch()
    w.stamps.note(A, STAMP)
    (seen,) = w.frame(renewed(first, 3, endpoint="10.0.0.9:8080"))  # a re-list can fold two writes into one
    assert isinstance(seen, SandboxSeen) and seen.sandbox.endpoint == "10.0.0.9:8080"


def test_one_announcement_holds_back_one_change_only() -> None:
    w, first = running_watch()
    w.stamps.note(A, STAMP)
    own = renewed(first, 3)
    assert w.frame(own) == []
    (seen,) = w.frame(renewed(own, 4))  # the same stamp again, nothing else changed: someone else's write
    assert isinstance(seen, SandboxSeen) and seen.sandbox.resource_version == "4"


def test_a_stamp_forgotten_or_noted_for_another_key_holds_nothing_back() -> None:
    w, first = running_watch()
    w.stamps.note(A, STAMP)
    w.stamps.forget(A, "2026-12-01T22:00:00.000Z")  # another stamp than the key's: kept
    assert w.stamps.get(A) == STAMP
    w.stamps.forget(A, STAMP)  # the Lease was taken back from the lane
    w.tell(Unregistered(A))
    w.tell(Registered(A))  # the successor registers: its lane noted nothing yet
    w.stamps.note(SandboxKey("run-z", "F-1"), STAMP)
    (seen,) = w.frame(renewed(first, 3))
    assert seen.sandbox.resource_version == "3"  # type: ignore[union-attr]


def test_a_registration_after_a_held_back_renewal_is_handed_the_newest_object() -> None:
    w, first = running_watch()
    w.stamps.note(A, STAMP)
    assert w.frame(renewed(first, 3)) == []
    w.tell(Unregistered(A))
    (seen,) = w.tell(Registered(A))
    assert isinstance(seen, SandboxSeen) and seen.sandbox.resource_version == "3"


def test_a_delivery_carries_its_events_write_time_and_a_replay_of_it_none() -> None:
    w = Watch()
    w.tell(Registered(A))
    (seen,) = w.frame(sandbox("run-a", rv=2, phase="Ready"), "ADDED", written_at=1790000000.5)
    assert isinstance(seen, SandboxSeen) and seen.written_at == 1790000000.5
    w.tell(Unregistered(A))
    (replayed,) = w.tell(Registered(A))
    assert isinstance(replayed, SandboxSeen) and replayed.sandbox.resource_version == "2"
    assert replayed.written_at is None  # a latency measured from it would be the registration's wait
