"""`RenewalLane`: every Workspace's Lease schedule of the process, and the renewals it brings, on one lane.

A Workspace hands its Lease here once its Sandbox is written (`hold`: the first due time, the interval) and
takes it back when it ends (`take_back`); in between the lane owns the due times (`lease_schedule.py`). One
timer on the injected clock stands at the soonest; when it fires, every renewal due within the next
`RENEWAL_TICK_SECONDS` is queued, and the senders (`renewal_senders.py`) send them back to back. Nothing goes
to the Workspace per renewal: its `renew` (run on a sender) tells it only what it must act on. A renewal costs
the patch and a share of one wake, not a timer → actor → lane → actor round trip, whose hand-offs cost more
than the patch itself at 5,000 live Workspaces (docs/benchmarks.md).

ADR-0064: a Workspace's delete never overtakes the renewal before it — it takes the Lease back and waits for
its renewal in flight (`wait`), then reads the version that renewal wrote (`Lease.resource_version`) for its
precondition. A driven `VirtualClock` jumps to the lane's timer (its `Timers` are on the clock).
"""

from __future__ import annotations

from jr2_actors.shell import Timers, jitter_source
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.values.constants import RENEWAL_LANE_THREADS, RENEWAL_TICK_SECONDS
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.watch.messages import OwnStamps
from jr2_actors.workspace.lease_schedule import Lease, Renew, Schedule
from jr2_actors.workspace.renewal_senders import RenewalSenders

__all__ = ["Lease", "RenewalLane"]


class RenewalLane(RenewalSenders):
    """The process's Lease schedules and the threads that renew them. Every method from any thread."""

    def __init__(self, *, clock: Clock | None = None, name: str = "jr2-renewals",
                 threads: int = RENEWAL_LANE_THREADS, tick: float = RENEWAL_TICK_SECONDS,
                 seed: int | None = None, stamps: OwnStamps | None = None, timers: Timers | None = None) -> None:
        """`stamps`: where a renewal notes the stamp it is about to write, which the watch reads. `timers`: a
        timer thread on `clock` to share (a Workspace's own lane); by default the lane keeps its own."""
        clock = clock or SystemClock()
        self._tick = tick
        self._schedule = Schedule(jitter_source(seed))
        self._timer: int | None = None
        self._timer_at: float | None = None
        self._owns_timers = timers is None
        self._timers = timers or Timers(clock, name=f"{name}-timer")
        super().__init__(clock, stamps if stamps is not None else OwnStamps(), name, threads)

    def hold(self, key: SandboxKey, renew: Renew, first_due: float, interval: float) -> Lease:
        """Take a Lease's schedule: `renew` runs first at `first_due` (monotonic), then every `interval` ±jitter."""
        lease = Lease(key, renew, first_due, interval)
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"the {self._name} lane is shut down")
            self._back(lease)
        return lease

    def take_back(self, lease: Lease) -> None:
        """No renewal of `lease` starts after this; one in flight goes on (`wait` for it)."""
        with self._lock:
            lease.dropped = True
            lease.renew = _taken_back  # nothing of its Workspace is held here after it (its actor keeps its Lease)
            self._schedule.dropped()
            if lease in self._ready:
                self._ready.remove(lease)
            if not lease.running and lease.stamp:  # one in flight forgets its stamp when it is back
                self.stamps.forget(lease.key, lease.stamp)

    def shutdown(self, wait: bool = True) -> None:
        """Stop: no renewal starts any more; those running end first when `wait`."""
        with self._lock:
            self._stopped = True
            self._ready.clear()
            self._schedule.clear()
            self._lock.notify_all()
            self._timers.cancel(self._timer)
        if self._owns_timers:
            self._timers.stop()
        if wait:
            self._join()

    # -- the timer (the caller holds `_lock`) --------------------------------------------------------------

    def _back(self, lease: Lease) -> None:
        self._schedule.push(lease)
        if self._timer_at is None or lease.due < self._timer_at:
            self._arm(lease.due)

    def _arm(self, at: float | None) -> None:
        if self._timer is not None and at is not None and self._timers.move(self._timer, at):
            self._timer_at = at
            return
        self._timers.cancel(self._timer)
        self._timer, self._timer_at = None, at
        if at is not None:
            self._timer = self._timers.schedule(at, self._due, f"the next Lease renewal ({self._name})")

    def _due(self) -> None:
        """On the timer's thread: every renewal due within one tick is queued, for the threads back to back."""
        with self._lock:
            self._timer = self._timer_at = None
            if self._stopped:
                return
            taken = self._schedule.take_due(self.clock.monotonic(), self._tick)
            self._ready.extend(taken)
            self._arm(self._schedule.soonest())
            self._lock.notify(min(len(taken), len(self._threads)))


def _taken_back(wall: float, stamp: str) -> None:
    """A taken-back Lease's renewal: nothing."""
