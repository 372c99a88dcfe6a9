"""The seats' metrics: the Harness as the Orchestrator's seats call it — admissions and memory-kill reads by
outcome, counted by each AgentActor as a call's result comes back; and the session's pools (harness/pools.py)
read at scrape time: addresses with a pool and held, evictions, the idle connections kept (all, and on the
address keeping most), connections opened, and returns to a full pool. Next stage: `telemetry.py`, which
composes it into the registry.

An outcome is a kind of result, never its words: `error` (the Harness answered with an error),
`unreachable`, `protocol` (an answer that is not the Harness's), `malformed` (a kill list refused as
untrusted input), `crashed` (our bug; also what an unknown outcome counts as).
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Mapping
from typing import Literal, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from jr2_actors.shell.actor import Metered

HARNESS_ADMISSIONS = "jr2_harness_admissions_total"
HARNESS_MEMORY_KILL_READS = "jr2_harness_memory_kill_reads_total"
HARNESS_POOL_ADDRESSES = "jr2_harness_pools"
HARNESS_POOLS_HELD = "jr2_harness_pools_held"
HARNESS_POOL_EVICTIONS = "jr2_harness_pool_evictions_total"
HARNESS_POOL_CONNECTIONS = "jr2_harness_pool_connections"
HARNESS_POOL_CONNECTIONS_MAX = "jr2_harness_pool_connections_max"
HARNESS_POOL_OPENED = "jr2_harness_pool_connections_opened_total"
HARNESS_POOL_FULL = "jr2_harness_pool_full_total"

AdmissionOutcome = Literal["admitted", "not_kept", "error", "unreachable", "protocol", "crashed"]
KillReadOutcome = Literal["read", "error", "unreachable", "protocol", "malformed", "crashed"]
ADMISSION_OUTCOMES: tuple[AdmissionOutcome, ...] = typing.get_args(AdmissionOutcome)
MEMORY_KILL_READ_OUTCOMES: tuple[KillReadOutcome, ...] = typing.get_args(KillReadOutcome)


class PoolStats(Protocol):
    """What the pools' metrics read (`HarnessPools`)."""

    def stats(self) -> Mapping[str, int]: ...


P = TypeVar("P", bound=PoolStats)


class HarnessMetrics:
    """The Harness as the Orchestrator calls it: admissions and memory-kill reads by outcome (counted by
    the AgentActors as each call's result comes back), and the session's pools at scrape time."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self._on = registry is not None
        self._pools: PoolStats | None = None
        admissions = Counter(HARNESS_ADMISSIONS, "Admissions posted to a Harness, by outcome (`error`: the "
                                                 "Harness answered with an error; `crashed`: our bug).",
                             ["outcome"], registry=registry)
        self._admissions: dict[str, Counter] = {o: admissions.labels(o) for o in ADMISSION_OUTCOMES}
        reads = Counter(HARNESS_MEMORY_KILL_READS, "Reads of a Harness's /memory-kills before an admission, by "
                                                   "outcome (`malformed`: the list was refused as untrusted "
                                                   "input).", ["outcome"], registry=registry)
        self._reads: dict[str, Counter] = {o: reads.labels(o) for o in MEMORY_KILL_READ_OUTCOMES}
        if registry is not None:
            registry.register(self)

    def admission(self, outcome: AdmissionOutcome | str) -> None:
        if self._on:
            self._admissions.get(outcome, self._admissions["crashed"]).inc()

    def memory_kill_read(self, outcome: KillReadOutcome | str) -> None:
        if self._on:
            self._reads.get(outcome, self._reads["crashed"]).inc()

    def read_pools(self, pools: P) -> P:
        """Read `pools` (the process's Harness session's) at each scrape; returns them."""
        self._pools = pools
        return pools

    def collect(self) -> Iterator[Metric]:
        pools = self._pools
        if pools is None:
            return
        s = pools.stats()
        yield GaugeMetricFamily(HARNESS_POOL_ADDRESSES, "Harness addresses with a connection pool.",
                                value=s["addresses"])
        yield GaugeMetricFamily(HARNESS_POOLS_HELD, "Harness addresses a client (a seat, an attach) holds: their "
                                                    "pools are never evicted.", value=s["held"])
        yield CounterMetricFamily(HARNESS_POOL_EVICTIONS, "Pools of addresses no client held, closed past the "
                                                          "bound on addresses (HARNESS_POOLS).", value=s["evicted"])
        yield GaugeMetricFamily(HARNESS_POOL_CONNECTIONS, "Idle connections kept by the Harness pools, all "
                                                          "addresses.", value=s["connections"])
        yield GaugeMetricFamily(HARNESS_POOL_CONNECTIONS_MAX, "Idle connections kept by the pool of the address "
                                                              "that keeps most.", value=s["connections_max"])
        yield CounterMetricFamily(HARNESS_POOL_OPENED, "Connections the Harness pools opened (each a TCP "
                                                       "handshake: what churn shows as).", value=s["opened"])
        yield CounterMetricFamily(HARNESS_POOL_FULL, "Connections closed on their return because their pool was "
                                                     "full (urllib3's \"Connection pool is full\").",
                                  value=s["discarded"])


class HarnessTelemetry(Metered, Protocol):
    """What an AgentActor (a seat on a Harness) is counted in (the orchestrator's `Telemetry` is one)."""

    @property
    def harness(self) -> HarnessMetrics: ...


OFF = HarnessMetrics(None)
"""For a seat outside an orchestrator: records nothing."""
