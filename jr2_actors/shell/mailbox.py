"""An actor's inbox that knows when each waiting message was queued, and what went through it.

Plain numbers on the actor's own objects — no lock and no prometheus_client call on a message's path
(bench/actor_overhead.py measures the cost); `shell.metrics.ActorMetrics` reads them at scrape time.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Callable
from typing import Any

# The processing time of one message, in seconds: from a trivial message (tens of µs) to one that blocks.
PROCESSING_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                      2.5, 5.0, 10.0)

# Set by a driven VirtualClock (testing/clock.py): called when an actor asks for its next message and none waits,
# so the clock waiting for quiet looks again then instead of polling. None (one read a take) otherwise.
went_idle: Callable[[], None] | None = None


class Mailbox(queue.Queue[Any]):
    """pykka's inbox (an unbounded `queue.Queue`) that knows when each waiting message was queued.

    `put` and `get` are `queue.Queue`'s for an unbounded queue without its task accounting (pykka calls
    neither `join` nor `task_done`): leaner than the general ones, which pays for the stamp and the count.
    Both run under the queue's own mutex, so the counts need no lock of their own. What the actor's
    thread records as it handles messages (`high_water`, `seconds`, `buckets`, `failures`) lives here too:
    one object holds what went through one actor.
    """

    def _init(self, maxsize: int) -> None:
        self.queue: deque[Any] = deque()
        self.stamps: deque[float] = deque()  # floats, not (time, message) tuples: nothing for the GC to scan
        self.now: Callable[[], float] = time.monotonic
        self.received = 0
        self.high_water = 0  # kept by the shell's loop: the deepest a mailbox gets is just before a take
        self.failures = 0
        self.seconds = 0.0
        self.buckets = 0  # a count a bucket, packed (shell/kind_totals.py's `BUCKET_UNITS`)
        # True from a take until the actor's thread asks for the next message (and before its first ask:
        # an actor still starting is at work): what a driven VirtualClock reads as "mid-message".
        self.handling = True
        self.owner: Callable[[], object] = lambda: None  # the actor (a weak reference), for a stalled test's text

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        with self.not_empty:
            self.queue.append(item)
            self.stamps.append(self.now())
            self.received += 1
            self.not_empty.notify()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        with self.not_empty:
            self.handling = False
            if not self.queue:
                if went_idle is not None:
                    went_idle()
                if not block:
                    raise queue.Empty
                if timeout is None:
                    while not self.queue:
                        self.not_empty.wait()
                else:
                    deadline = time.monotonic() + timeout
                    while not self.queue:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0.0:
                            raise queue.Empty
                        self.not_empty.wait(remaining)
            self.stamps.popleft()
            self.handling = True
            return self.queue.popleft()

    def take_while(self, wanted: Callable[[Any], bool], limit: int, *, idle_only: bool = False) -> list[Any]:
        """Take, without waiting, the messages at the head for which `wanted(message)` holds (at most
        `limit`): their envelopes, in order. The actor's thread handles them as one (the store's group
        commit) and answers each itself; the first message that is not wanted stays, so order holds.
        `idle_only`: for another thread's take (the watch's I/O thread), nothing while the actor's thread holds
        a message it took, which is older than any waiting."""
        taken: list[Any] = []
        with self.mutex:
            if idle_only and self.handling:  # another thread's take: the actor holds an older message
                return taken
            waiting = self.queue
            while waiting and len(taken) < limit and wanted(waiting[0].message):
                self.stamps.popleft()
                taken.append(waiting.popleft())
        return taken

    def oldest_age(self, now: float) -> float:
        """Seconds the oldest waiting message has waited (0 when none waits)."""
        return max(now - oldest, 0.0) if (oldest := self.oldest_stamp()) is not None else 0.0

    def oldest_stamp(self) -> float | None:
        """When the oldest waiting message was put (None: none waits); no mutex: the GIL reads a deque's head."""
        try:
            return self.stamps[0]
        except IndexError:
            return None


def label(ref: Any) -> str:
    inbox = ref.actor_inbox
    actor = inbox.owner() if isinstance(inbox, Mailbox) else None
    name = getattr(actor, "name", "") if actor is not None else ""
    return f"{ref.actor_class.__name__} {name}".rstrip()


def look_at_actors() -> tuple[int, list[str]]:
    """Every live actor's inbox: how many messages they have taken in all, and which are at work (a message
    waiting, or one being handled). What a driven VirtualClock reads to judge "nothing under way"."""
    import pykka

    received = 0
    busy: list[str] = []
    for ref in pykka.ActorRegistry.get_all():
        inbox = ref.actor_inbox
        if not isinstance(inbox, Mailbox):
            if not inbox.empty():
                busy.append(f"{ref.actor_class.__name__}: a message waits")
            continue
        with inbox.mutex:
            received += inbox.received
            waiting, handling = len(inbox.queue), inbox.handling
        if handling or waiting:
            what = "handling a message" if handling else ""
            if waiting:
                what += f"{', and ' if what else ''}{waiting} waiting"
            busy.append(f"{label(ref)}: {what}")
    return received, busy


def actor_names() -> list[str]:
    import pykka

    return sorted(label(ref) for ref in pykka.ActorRegistry.get_all())
