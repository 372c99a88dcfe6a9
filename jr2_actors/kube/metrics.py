"""The Kubernetes client's metrics: requests by verb and answer code, 401s retried, the write gate.

Verbs are the client's own (`Verb`, anything else `other`); codes are the HTTP answer's, `none` for none.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Literal

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric

from jr2_actors.kube.gate import FifoGate

KUBE_REQUESTS = "jr2_kube_requests_total"
KUBE_UNAUTHORIZED_RETRIES = "jr2_kube_unauthorized_retries_total"
KUBE_WRITES_IN_FLIGHT = "jr2_kube_writes_in_flight"
KUBE_WRITES_WAITING = "jr2_kube_writes_waiting"
KUBE_WRITE_CAP = "jr2_kube_write_cap"

Verb = Literal["get", "list", "watch", "create", "apply", "patch", "delete"]
KUBE_VERBS: tuple[Verb, ...] = typing.get_args(Verb)


class KubeMetrics:
    """The one in-process Kubernetes client: requests by verb and answer code (`none`: no answer), 401s
    retried with a re-read token, and the write gate read at scrape time."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self._on = registry is not None
        self._requests = Counter(KUBE_REQUESTS, "Requests to the API server, by verb and answer code (`none`: "
                                                "no answer came).", ["verb", "code"], registry=registry)
        self._retries = Counter(KUBE_UNAUTHORIZED_RETRIES, "Requests answered 401 and sent again once with the "
                                                           "token file re-read.", registry=registry)
        self._gate: FifoGate | None = None
        if registry is not None:
            registry.register(self)

    def request(self, verb: Verb | str, code: int | None) -> None:
        if self._on:
            self._requests.labels(verb if verb in KUBE_VERBS else "other",
                                  "none" if code is None else str(code)).inc()

    def unauthorized_retry(self) -> None:
        if self._on:
            self._retries.inc()

    def read_gate(self, gate: FifoGate) -> None:
        """Read `gate` (the client's write gate) at scrape time (`KubeClient.measure` hands it)."""
        self._gate = gate

    def collect(self) -> Iterator[Metric]:
        gate = self._gate
        if gate is None:
            return
        yield GaugeMetricFamily(KUBE_WRITES_IN_FLIGHT, "Kubernetes writes in flight.", value=gate.in_flight)
        yield GaugeMetricFamily(KUBE_WRITES_WAITING, "Kubernetes writes waiting for a slot of the cap.",
                                value=gate.waiting)
        yield GaugeMetricFamily(KUBE_WRITE_CAP, "The cap on Kubernetes writes in flight (8-16).",
                                value=gate.capacity)


OFF = KubeMetrics(None)
"""For a client outside an orchestrator: records nothing."""
