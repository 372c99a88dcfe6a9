"""A thread pool that knows how many of its jobs are queued or running: a driven VirtualClock's look at it.

A job's result reaches its actor by a `tell` at the job's end, so a job counts until it has returned: the
clock never jumps between a call coming back and its answer reaching the inbox.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from jr2_actors.shell.activity import activity

P = ParamSpec("P")
T = TypeVar("T")


class CountedPool(ThreadPoolExecutor):
    def __init__(self, max_workers: int, *, thread_name_prefix: str, clock: object = None) -> None:
        super().__init__(max_workers, thread_name_prefix=thread_name_prefix)
        self._name = thread_name_prefix
        self._count_lock = threading.Lock()
        self._jobs = 0
        self._running: set[int] = set()  # the threads running a job now
        self._activity = activity(clock)
        self._activity.probe(self._under_way)

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._count_lock:
            self._jobs += 1

        def job() -> T:
            me = threading.get_ident()
            with self._count_lock:
                self._running.add(me)
            try:
                return fn(*args, **kwargs)
            finally:
                with self._count_lock:
                    self._running.discard(me)
        try:
            future = super().submit(job)
        except BaseException:
            self._done(None)
            raise
        future.add_done_callback(self._done)
        return future

    def _done(self, _: Any) -> None:
        with self._count_lock:
            self._jobs -= 1
        self._activity.went_quiet()

    def _under_way(self) -> list[str]:
        with self._count_lock:
            jobs, running = self._jobs, set(self._running)
        if jobs and running:
            jobs -= len(self._activity.judged(running))  # each judged by the job it does (kube requests)
        return [f"pool {self._name}: {jobs} job(s) queued or running"] if jobs > 0 else []

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._activity.unprobe(self._under_way)
        super().shutdown(wait, cancel_futures=cancel_futures)

    def close(self, timeout: float) -> None:
        """Drop the queued jobs (their actors are stopping) and wait up to `timeout` for the running ones: a
        stop's budget, not a job's own length, bounds this wait (a cut call ends its job soon after)."""
        self.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(max(deadline - time.monotonic(), 0.0))
