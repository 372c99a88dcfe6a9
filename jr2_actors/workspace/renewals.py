"""`RenewalLane`: every Workspace's Lease renewal of the process sent from one lane.

Before, each renewal was a job on the kube pool: a `Future` and its callbacks made and dropped per
renewal, and the renewals competing with every other write for the pool's workers. Here a fixed few
threads (`RENEWAL_LANE_THREADS`) take the renewals handed to them and send those waiting back to back,
without a `Future`; a Workspace hands its renewal here instead of to the kube pool and nothing else
changes for it. Not one thread: one alone fell behind when 5,000 Workspaces' first renewals (each within
a fifth of the interval of its start) came at once on a loaded machine — 2,616 still waiting once every
Workspace was Running (docs/benchmarks.md) — and a Lease must not wait on a queue that grows.

ADR-0063/0064's rules hold as they did: a Workspace's cluster writes still leave one at a time and in order
from its own queue (`WorkspaceActor._kube`) — a renewal is handed here only once the write before it is
back, and the write after it waits for its answer — so a delete never overtakes the renewal before it, and
the Lease stamps the delete guard reads are still written by one call at a time. A renewal stuck on a slow
API server holds one of the lane's threads, never any Workspace's other writes (the kube pool's) or attaches.
A job that raises is our bug: it is logged and the lane goes on (the job itself tells its actor, as the
kube pool's jobs do).

A driven `VirtualClock` sees the jobs queued or running (`activity`), as `CountedPool`'s.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from jr2_actors.shell.activity import activity
from jr2_actors.values.constants import RENEWAL_LANE_THREADS

log = logging.getLogger(__name__)


class RenewalLane:
    """One queue and a fixed few threads for the process's Lease renewals. `submit` from any thread."""

    def __init__(self, *, clock: object = None, name: str = "jr2-renewals",
                 threads: int = RENEWAL_LANE_THREADS) -> None:
        self._name = name
        self._lock = threading.Condition()
        self._queue: deque[Callable[[], None]] = deque()
        self._running: set[int] = set()  # the threads running a renewal now
        self._stopped = False
        self._activity = activity(clock)
        self._activity.probe(self._under_way)
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` on the lane's thread after those handed before it (the caller carries its log context)."""
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"the {self._name} lane is shut down")
            self._queue.append(job)
            self._lock.notify()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking jobs; those still queued are dropped (their actors are stopping: the pools' shutdown
        cancels theirs too), those running end first when `wait`."""
        del cancel_futures  # the pools' signature: queued renewals are always dropped
        with self._lock:
            self._stopped = True
            self._queue.clear()
            self._lock.notify_all()
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()
        self._activity.unprobe(self._under_way)

    def _run(self) -> None:
        """Take the next renewal while any waits (back to back, no wait between), sleep when none does."""
        while True:
            with self._lock:
                while not self._queue and not self._stopped:
                    self._lock.wait()
                if self._stopped:
                    return
                job = self._queue.popleft()
                self._running.add(threading.get_ident())
            try:
                job()
            except Exception:  # our bug; the job told its actor what it could, the lane goes on
                log.exception("a Lease renewal failed unexpectedly on the %s lane", self._name)
            finally:
                with self._lock:
                    self._running.discard(threading.get_ident())
                self._activity.went_quiet()  # a clock waiting for quiet looks again now

    def _under_way(self) -> list[str]:
        with self._lock:
            queued, running = len(self._queue), set(self._running)
        if running:
            running -= self._activity.judged(running)  # each judged by the request it sends (parked or not)
        jobs = queued + len(running)
        return [f"{self._name}: {jobs} renewal(s) queued or running"] if jobs else []
