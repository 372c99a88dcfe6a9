"""The seats' metrics: the Harness as the Orchestrator's seats call it — admissions and memory-kill reads by
outcome, counted by each AgentActor as a call's result comes back. Next stage: `telemetry.py`, which
composes it into the registry.

An outcome is a kind of result, never its words: `error` (the Harness answered with an error),
`unreachable`, `protocol` (an answer that is not the Harness's), `malformed` (a kill list refused as
untrusted input), `crashed` (our bug; also what an unknown outcome counts as).
"""

from __future__ import annotations

import typing
from typing import Literal, Protocol

from prometheus_client import CollectorRegistry, Counter

from jr2_actors.shell.actor import Metered

HARNESS_ADMISSIONS = "jr2_harness_admissions_total"
HARNESS_MEMORY_KILL_READS = "jr2_harness_memory_kill_reads_total"

AdmissionOutcome = Literal["admitted", "not_kept", "error", "unreachable", "protocol", "crashed"]
KillReadOutcome = Literal["read", "error", "unreachable", "protocol", "malformed", "crashed"]
ADMISSION_OUTCOMES: tuple[AdmissionOutcome, ...] = typing.get_args(AdmissionOutcome)
MEMORY_KILL_READ_OUTCOMES: tuple[KillReadOutcome, ...] = typing.get_args(KillReadOutcome)


class HarnessMetrics:
    """The Harness as the Orchestrator calls it: admissions and memory-kill reads by outcome (counted by
    the AgentActors as each call's result comes back)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self._on = registry is not None
        admissions = Counter(HARNESS_ADMISSIONS, "Admissions posted to a Harness, by outcome (`error`: the "
                                                 "Harness answered with an error; `crashed`: our bug).",
                             ["outcome"], registry=registry)
        self._admissions: dict[str, Counter] = {o: admissions.labels(o) for o in ADMISSION_OUTCOMES}
        reads = Counter(HARNESS_MEMORY_KILL_READS, "Reads of a Harness's /memory-kills before an admission, by "
                                                   "outcome (`malformed`: the list was refused as untrusted "
                                                   "input).", ["outcome"], registry=registry)
        self._reads: dict[str, Counter] = {o: reads.labels(o) for o in MEMORY_KILL_READ_OUTCOMES}

    def admission(self, outcome: AdmissionOutcome | str) -> None:
        if self._on:
            self._admissions.get(outcome, self._admissions["crashed"]).inc()

    def memory_kill_read(self, outcome: KillReadOutcome | str) -> None:
        if self._on:
            self._reads.get(outcome, self._reads["crashed"]).inc()


class HarnessTelemetry(Metered, Protocol):
    """What an AgentActor (a seat on a Harness) is counted in (the orchestrator's `Telemetry` is one)."""

    @property
    def harness(self) -> HarnessMetrics: ...


OFF = HarnessMetrics(None)
"""For a seat outside an orchestrator: records nothing."""
