"""A scrape's sums over a kind's mailboxes: the packed bucket counts read back exactly, none spilling into
the next bucket, and the busiest named only among the mailboxes with mail."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from jr2_actors.shell.clock import SystemClock
from jr2_actors.shell.kind_totals import BUCKET_BITS, BUCKET_UNITS, Totals, unpacked
from jr2_actors.shell.mailbox import PROCESSING_BUCKETS, Mailbox
from jr2_actors.shell.metrics import ACTOR_BUSIEST_DEPTH, ActorMetrics


def test_packed_counts_read_back_each_bucket_up_to_the_fields_top() -> None:
    top = (1 << BUCKET_BITS) - 1
    counts = [top if i % 2 else i for i in range(len(BUCKET_UNITS))]
    packed = sum(n * unit for n, unit in zip(counts, BUCKET_UNITS, strict=True))
    assert unpacked(packed) == counts and len(counts) == len(PROCESSING_BUCKETS) + 1


def test_a_kinds_sum_over_many_mailboxes_counts_every_bucket_and_the_stopped_ones_kept() -> None:
    boxes = []
    for i in range(1000):
        box = Mailbox()
        box.buckets = BUCKET_UNITS[i % len(BUCKET_UNITS)] * (i + 1)  # i + 1 messages in bucket i mod 17
        box.received = i + 1
        boxes.append(box)
    totals = Totals(received=5, buckets=[1] * len(BUCKET_UNITS))  # what stopped actors had counted
    totals.add_all(boxes, 0)
    want = [1 + sum(i + 1 for i in range(1000) if i % len(BUCKET_UNITS) == b) for b in range(len(BUCKET_UNITS))]
    assert totals.buckets == want
    assert totals.received == 5 + sum(range(1, 1001)) == sum(totals.buckets) - len(BUCKET_UNITS) + 5


class Runner:
    def __init__(self, i: int) -> None:
        self.mailbox = Mailbox()
        self.name = f"runner-{i}"


def test_the_busiest_are_named_only_among_the_mailboxes_with_mail() -> None:
    registry = CollectorRegistry()
    metrics = ActorMetrics(registry, SystemClock())
    actors = [Runner(i) for i in range(500)]
    for actor in actors:
        metrics.register(actor)
    for i in (7, 300, 301):
        for _ in range(i % 5 + 1):
            actors[i].mailbox.put("work")
    busiest = {s.labels["name"]: s.value for m in registry.collect() if m.name == ACTOR_BUSIEST_DEPTH
               for s in m.samples}
    assert busiest == {"runner-7": 3, "runner-300": 1, "runner-301": 2}
