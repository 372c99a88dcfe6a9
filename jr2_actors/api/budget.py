"""Admission control: serve's budget of memory and threads, and `POST /runs`'s 503 before it is spent.

Nothing else bounds the live runs: without this, a release of more runs than the pod can hold answers 201
to each until the kernel's OOM killer ends the process (and every run with it, until the restart restores
them, into the same end). So serve knows its limits — the pod's, read from its cgroup (`memory.max` and
`pids.max` under cgroup v2; `memory/memory.limit_in_bytes` and `pids/pids.max` under v1), each
overridable (`--max-memory`, `--max-threads`, `--max-runs`, or `JR2_MAX_MEMORY`, `JR2_MAX_THREADS`,
`JR2_MAX_RUNS`) — and refuses a run whose admission could take it past `share` of one of them.

Why a projection and not the measure alone: an accepted run costs little at once (its row, its actor) and
its full cost later (its Workspace's actor, its seat, its Turn's long-poll), so a burst of 5,000 submits
finds RSS low until it is too late. A run is refused when the larger of the measured use and `base` + the
live runs × their cost, plus one more run, is over `share` × the limit: `base` is the use measured when
serve started, a run's cost (`RUN_BYTES`, `RUN_THREADS`) what bench/release.py measured at 5,000 runs
(docs/benchmarks.md), and the share leaves room for what the estimate misses. The refusal says which
limit, answers `Retry-After`, and is counted (`jr2_runs_refused_total{resource}`); the limits and the live
runs they admit are gauges (docs/operations.md, "Admission control").
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

from jr2_actors.values.quantity import QuantityError, memory_bytes

log = logging.getLogger(__name__)

# A live one-Turn run's cost at its busiest, rounded up: bench/release.py measured 154 KiB and 3.4 threads a
# live run at the peak of a release of 5,000 (2,963 live, 506 MiB, 10,418 threads; docs/benchmarks.md). The
# threads: its RunActor, WorkspaceActor, seat and the seat's reader.
RUN_BYTES = 192 * 1024
RUN_THREADS = 4
SHARE = 0.85  # of a limit: what the projection may fill (the rest is for what it misses)
RETRY_AFTER_SECONDS = 10
UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a page-rounded 2^63 - 1

BUDGET_LIMIT = "jr2_budget_limit"
BUDGET_USED = "jr2_budget_used"
BUDGET_RUNS = "jr2_budget_runs"
RUNS_REFUSED = "jr2_runs_refused_total"
RESOURCES = ("memory", "threads", "runs")

_CGROUP_FILES = {
    "memory": ("memory.max", "memory/memory.limit_in_bytes"),
    "threads": ("pids.max", "pids/pids.max"),
}


@dataclass(frozen=True)
class Limits:
    """What serve may use; None: no limit on that resource."""

    memory_bytes: int | None = None
    threads: int | None = None
    runs: int | None = None


@dataclass(frozen=True)
class Usage:
    rss_bytes: int
    threads: int


def read_cgroup_limit(resource: str, root: str = "/sys/fs/cgroup") -> int | None:
    """The pod's limit on `resource` (`memory` in bytes, `threads` as pids) from its cgroup, v2 then v1;
    None when there is none ("max", a v1 "unlimited", no file). A file that is not a count is logged
    and taken as no limit: a start does not fail on a kernel's odd file, the flags can still set one."""
    for name in _CGROUP_FILES[resource]:
        path = os.path.join(root, name)
        try:
            with open(path) as f:
                text = f.read(64).strip()
        except OSError:
            continue
        if text == "max":
            return None
        if not re.fullmatch(r"[0-9]{1,20}", text):
            log.warning("%s: %r is not a count; no %s limit taken from the cgroup", path, text[:40], resource)
            return None
        value = int(text)
        return None if value >= UNLIMITED or value == 0 else value
    return None


def process_usage() -> Usage:
    """This process's resident memory and threads, from /proc/self/status (zeros where there is no /proc:
    the projection alone then decides)."""
    try:
        with open("/proc/self/status") as f:
            status = f.read()
    except OSError:
        return Usage(0, 0)
    rss = re.search(r"^VmRSS:\s+([0-9]+) kB", status, re.M)
    threads = re.search(r"^Threads:\s+([0-9]+)", status, re.M)
    return Usage(int(rss.group(1)) * 1024 if rss else 0, int(threads.group(1)) if threads else 0)


class BudgetError(ValueError):
    """A limit given by a flag or the environment that is not one (the CLI's one line)."""


def configured_limits(flags: dict[str, str | None], environ: dict[str, str] | None = None,
                      root: str = "/sys/fs/cgroup") -> Limits:
    """The limits: each flag (`memory`, `threads`, `runs`) when given, else its `JR2_MAX_*` variable, else the
    cgroup's (memory, threads; runs has none). A value that is not a positive size or count is `BudgetError`."""
    env = os.environ if environ is None else environ
    found: dict[str, int | None] = {}
    for resource in RESOURCES:
        flag, var = flags.get(resource), f"JR2_MAX_{resource.upper()}"
        text, source = (flag, f"--max-{resource}") if flag is not None else (env.get(var), var)
        if text is None or not text.strip():
            found[resource] = read_cgroup_limit(resource, root) if resource in _CGROUP_FILES else None
            continue
        found[resource] = _positive(text.strip(), source, size=resource == "memory")
    return Limits(found["memory"], found["threads"], found["runs"])


def _positive(text: str, source: str, *, size: bool) -> int:
    try:
        value = memory_bytes(text) if size else int(text) if re.fullmatch(r"[0-9]{1,12}", text) else -1
    except QuantityError:
        value = -1
    if value <= 0:
        what = "a size above zero (1Gi, 900Mi, 1073741824)" if size else "a whole number above zero"
        raise BudgetError(f"{source}: {text[:40]!r} is not {what}")
    return value


class Budget:
    """Whether one more run fits (`refusal`), by the measure and the projection over `live` runs."""

    def __init__(self, limits: Limits, *, live: Callable[[], int], usage: Callable[[], Usage] = process_usage,
                 share: float = SHARE, run_bytes: int = RUN_BYTES, run_threads: int = RUN_THREADS,
                 registry: CollectorRegistry | None = None) -> None:
        self.limits = limits
        self._live = live
        self._usage = usage
        self.share = share
        self.run_bytes, self.run_threads = run_bytes, run_threads
        self.base = usage()  # before the runs: what serve costs with none
        self._lock = threading.Lock()
        self.refused = dict.fromkeys(RESOURCES, 0)
        self._counter = Counter(RUNS_REFUSED, "POST /runs answered 503 because one more run could take serve past "
                                              "its budget, by the resource (memory, threads, runs).",
                                ["resource"], registry=registry)
        for resource in RESOURCES:
            self._counter.labels(resource)
        limit = Gauge(BUDGET_LIMIT, "serve's budget: the memory (bytes), threads and live runs it admits runs "
                                    "up to (-1: no limit on that resource).", ["resource"], registry=registry)
        used = Gauge(BUDGET_USED, "What serve uses of each budgeted resource now (bytes, threads, live runs).",
                     ["resource"], registry=registry)
        runs = Gauge(BUDGET_RUNS, "How many live runs the budget admits (the projection's bound, the least over "
                                  "the resources; -1: no limit).", registry=registry)
        bounds = {"memory": limits.memory_bytes, "threads": limits.threads, "runs": limits.runs}
        for resource, bound in bounds.items():
            limit.labels(resource).set(-1 if bound is None else bound)
        used.labels("memory").set_function(lambda: self._usage().rss_bytes)
        used.labels("threads").set_function(lambda: self._usage().threads)
        used.labels("runs").set_function(lambda: self._live())
        capacity = self.capacity()
        runs.set(-1 if capacity is None else capacity)

    def capacity(self) -> int | None:
        """The live runs the projection admits, the least over the limits (None: no limit)."""
        bounds = []
        if self.limits.memory_bytes is not None:
            bounds.append((self.share * self.limits.memory_bytes - self.base.rss_bytes) // self.run_bytes)
        if self.limits.threads is not None:
            bounds.append((self.share * self.limits.threads - self.base.threads) // self.run_threads)
        if self.limits.runs is not None:
            bounds.append(self.limits.runs)
        return max(0, int(min(bounds))) if bounds else None

    def describe(self) -> str:
        """The limits and the live runs they admit, for serve's start line."""
        limits = self.limits
        parts = [f"memory {_mib(limits.memory_bytes)}" if limits.memory_bytes is not None else "memory unbounded",
                 f"threads {limits.threads:,}" if limits.threads is not None else "threads unbounded",
                 f"runs {limits.runs:,}" if limits.runs is not None else "runs unbounded"]
        capacity = self.capacity()
        admits = "no bound on live runs" if capacity is None else f"admits about {capacity:,} live runs"
        return f"{', '.join(parts)}: {admits} (POST /runs answers 503 past it; docs/operations.md)"

    def refusal(self) -> str | None:
        """None when one more run fits; else why not, in one line (the 503's words), counted."""
        live = self._live()
        limits = self.limits
        reason = resource = None
        if limits.runs is not None and live >= limits.runs:
            resource, reason = "runs", f"serve holds {live:,} live runs, its limit (--max-runs)"
        elif limits.memory_bytes is not None or limits.threads is not None:
            now = self._usage()
            if limits.memory_bytes is not None:
                projected = max(now.rss_bytes, self.base.rss_bytes + live * self.run_bytes) + self.run_bytes
                if projected > self.share * limits.memory_bytes:
                    resource = "memory"
                    reason = (f"one more run could take serve past its memory budget: {_mib(now.rss_bytes)} in use, "
                              f"{_mib(projected)} projected for {live + 1:,} live runs, "
                              f"{self.share:.0%} of {_mib(limits.memory_bytes)}")
            if resource is None and limits.threads is not None:
                projected = max(now.threads, self.base.threads + live * self.run_threads) + self.run_threads
                if projected > self.share * limits.threads:
                    resource = "threads"
                    reason = (f"one more run could take serve past its thread budget: {now.threads:,} threads, "
                              f"{projected:,} projected for {live + 1:,} live runs, "
                              f"{self.share:.0%} of {limits.threads:,}")
        if resource is None:
            return None
        with self._lock:
            self.refused[resource] += 1
        self._counter.labels(resource).inc()
        return f"{reason}; try again once runs finish"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"
