"""The Lease schedules a renewal lane holds: one heap of due times, and which are due within a tick (pure).

ADR-0063/0064: each Lease's next renewal is due `interval` ×U(1 − LEASE_JITTER, 1 + LEASE_JITTER) after the
last was taken (never in lockstep). A Lease is back in the heap only once its renewal is back, so one Lease is
never renewed twice at once. The lane (`renewals.py`) holds its lock around every call here.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from jr2_actors.values.backoff import Jitter
from jr2_actors.values.constants import LEASE_JITTER
from jr2_actors.watch.identity import SandboxKey

# A renewal, on a lane thread: given the wall time and the stamp to write, the version it wrote, or None when
# it failed (it tells its Workspace what it must act on itself).
Renew = Callable[[float, str], "str | None"]


class Lease:
    """One Workspace's Lease on the lane. Its fields change under the lane's lock only."""

    __slots__ = ("dropped", "due", "interval", "key", "renew", "resource_version", "running", "stamp")

    def __init__(self, key: SandboxKey, renew: Renew, due: float, interval: float) -> None:
        self.key = key
        self.renew = renew
        self.due = due
        self.interval = interval
        self.dropped = False  # taken back: never renewed again
        self.running = False  # a renewal of it is in flight
        self.resource_version = ""  # the last version a renewal of it wrote
        self.stamp = ""  # the last stamp a renewal of it noted in `OwnStamps`


class Schedule:
    def __init__(self, rng: Jitter) -> None:
        self._random = rng
        self._heap: list[tuple[float, int, Lease]] = []  # a taken-back Lease leaves a stale entry
        self._ids = itertools.count()
        self._stale = 0  # entries of taken-back Leases still in the heap (at most: some were popped since)

    def push(self, lease: Lease) -> None:
        heapq.heappush(self._heap, (lease.due, next(self._ids), lease))

    def take_due(self, now: float, tick: float) -> list[Lease]:
        """Every Lease due by `now + tick`, out of the heap, each with its next due time set from `now`."""
        heap, taken = self._heap, []
        while heap and heap[0][0] <= now + tick:
            due, _, lease = heapq.heappop(heap)
            if lease.dropped or due != lease.due:
                continue
            lease.due = now + lease.interval * self._random.uniform(1 - LEASE_JITTER, 1 + LEASE_JITTER)
            taken.append(lease)
        return taken

    def dropped(self) -> None:
        """A Lease was taken back: its entry is stale. Once the stale entries are half the heap it is rebuilt
        without them, so what finished Workspaces leave here stays below what live ones hold (not a due time
        away: up to 5 min of a release's ended Leases)."""
        self._stale += 1
        if self._stale * 2 > len(self._heap):
            self._heap = [entry for entry in self._heap if not entry[2].dropped and entry[0] == entry[2].due]
            heapq.heapify(self._heap)
            self._stale = 0

    def soonest(self) -> float | None:
        heap = self._heap
        while heap and (heap[0][2].dropped or heap[0][0] != heap[0][2].due):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def clear(self) -> None:
        self._heap.clear()
