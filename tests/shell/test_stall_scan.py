"""`/healthz`'s stall check (`ActorMetrics.stalled`) looks at every live actor's mailbox only once a stall has
become possible: a scan that finds none learns the oldest stamp waiting anywhere, and every message put after
it is younger, so until that stamp + the bound no actor can be past it. At 5,000 runs a scan is tens of
thousands of mailboxes; kubelet probes every few seconds."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from jr2_actors.shell.metrics import ActorMetrics
from jr2_actors.testing.clock import VirtualClock

BOUND = 60.0


@dataclass
class Box:
    """A mailbox as `stalled` reads it: its waiting messages' stamps, and how often they were looked at."""

    stamps: deque[float] = field(default_factory=deque)
    looks: int = 0

    def oldest_stamp(self) -> float | None:
        self.looks += 1
        return self.stamps[0] if self.stamps else None


@dataclass
class Stub:
    mailbox: Box
    name: str


def test_no_mailbox_is_read_until_the_oldest_waiting_message_could_be_past_the_bound() -> None:
    clock = VirtualClock()
    metrics = ActorMetrics(CollectorRegistry(), clock)
    boxes = [Box() for _ in range(3)]
    for i, box in enumerate(boxes):
        metrics.register(Stub(box, f"a{i}"))  # type: ignore[arg-type]
    start = clock.monotonic()
    boxes[1].stamps.append(start)  # one message waits from now on
    assert metrics.stalled(BOUND) == ""  # the first probe scans: every box read once
    assert [b.looks for b in boxes] == [1, 1, 1]
    clock.advance(BOUND)
    boxes[2].stamps.append(clock.monotonic())  # younger: cannot be past the bound before the first one
    assert metrics.stalled(BOUND) == ""
    assert [b.looks for b in boxes] == [1, 1, 1]  # no scan: nothing could be past the bound yet
    clock.advance(1)
    assert metrics.stalled(BOUND) == "Stub a1 has not taken a message for 61s"  # a stall now possible: scanned


def test_a_message_taken_moves_the_next_scan_to_the_oldest_still_waiting() -> None:
    clock = VirtualClock()
    metrics = ActorMetrics(CollectorRegistry(), clock)
    first, second = Box(), Box()
    metrics.register(Stub(first, "first"))  # type: ignore[arg-type]
    metrics.register(Stub(second, "second"))  # type: ignore[arg-type]
    first.stamps.append(clock.monotonic())
    clock.advance(30)
    second.stamps.append(clock.monotonic())
    assert metrics.stalled(BOUND) == ""
    first.stamps.popleft()  # taken: the oldest waiting is now the second's, 30 s younger
    clock.advance(31)  # 61 s after the first's stamp: a scan, which finds the second 31 s old
    assert metrics.stalled(BOUND) == ""
    looks = second.looks
    clock.advance(29)  # 60 s after the second's stamp: still within the bound, no scan
    assert metrics.stalled(BOUND) == ""
    assert second.looks == looks
    clock.advance(1)
    assert metrics.stalled(BOUND) == "Stub second has not taken a message for 61s"
