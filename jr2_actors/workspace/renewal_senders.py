"""The renewal lane's senders: a fixed few threads that take the renewals due (`_ready`) and send them back to
back, each noting its stamp for the watch first (`OwnStamps`: its own change is not delivered back).

Not one thread: one alone fell behind when 5,000 Workspaces' first renewals came at once on a loaded machine,
and a Lease must not wait on a queue that grows. A renewal stuck on a slow API server holds one thread, never
a Workspace's other writes or attaches. A `renew` that raises is our bug: logged, and its Lease stays on its
schedule. A driven `VirtualClock` sees the renewals queued or running (`activity`), as `CountedPool`'s jobs.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

from jr2_actors.shell.activity import activity
from jr2_actors.shell.clock import Clock
from jr2_actors.watch.messages import OwnStamps
from jr2_actors.workspace.lease_schedule import Lease
from jr2_actors.workspace.manifest import keepalive

log = logging.getLogger(__name__)


class RenewalSenders:
    """The threads; `RenewalLane` (renewals.py) decides when each Lease is due. One lock for both."""

    def __init__(self, clock: Clock, stamps: OwnStamps, name: str, threads: int) -> None:
        self.clock = clock
        self.stamps = stamps
        self._name = name
        self._lock = threading.Condition()
        self._ready: deque[Lease] = deque()  # due, waiting for a thread
        self._running: set[int] = set()  # the threads renewing now
        self._stopped = False
        self._activity = activity(clock)
        self._activity.probe(self._under_way)
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def wait(self, lease: Lease, timeout: float | None = None) -> bool:
        """Wait until no renewal of `lease` is in flight; False when `timeout` passed first."""
        with self._lock:
            return self._lock.wait_for(lambda: not lease.running, timeout)

    def _back(self, lease: Lease) -> None:
        """A renewal of `lease` is back (the caller holds `_lock`): the lane schedules the next."""

    def _join(self) -> None:
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
        self._activity.unprobe(self._under_way)

    def _run(self) -> None:
        me = threading.get_ident()
        while True:
            with self._lock:
                while not self._ready and not self._stopped:
                    self._lock.wait()
                if self._stopped:
                    return
                lease = self._ready.popleft()
                lease.running = True
                self._running.add(me)
            version: str | None = None
            wall = self.clock.wall()
            stamp = keepalive(wall)
            try:
                self.stamps.note(lease.key, stamp)  # before the write: the watch knows it before the event
                lease.stamp = stamp
                version = lease.renew(wall, stamp)
            except Exception:  # our bug: the Lease stays on its schedule, the lane goes on
                log.exception("a Lease renewal of %s failed unexpectedly on the %s lane", lease.key, self._name)
            finally:
                with self._lock:
                    lease.running = False
                    self._running.discard(me)
                    if version:
                        lease.resource_version = version
                    if lease.dropped:
                        self.stamps.forget(lease.key, stamp)
                    elif not self._stopped:
                        self._back(lease)
                    self._lock.notify_all()  # a `wait` for this Lease
                self._activity.went_quiet()  # a clock waiting for quiet looks again now

    def _under_way(self) -> list[str]:
        with self._lock:
            queued, running = len(self._ready), set(self._running)
        if running:
            running -= self._activity.judged(running)  # each judged by the request it sends (parked or not)
        jobs = queued + len(running)
        return [f"{self._name}: {jobs} renewal(s) queued or running"] if jobs else []
