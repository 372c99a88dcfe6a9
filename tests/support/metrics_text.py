"""Reading an exposition back in tests: every sample by name and labels, with prometheus_client's parser; and
the plain data RunMetrics reads of a run, for tests that feed it without an engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from prometheus_client.parser import text_string_to_metric_families

from jr2_actors.run.core import RunCore
from jr2_actors.run.metrics import RunView
from jr2_actors.workspace.messages import WaitEntry

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str | Samples, metric: str, /, **labels: str) -> float | None:
    table = samples(text) if isinstance(text, str) else text
    return table.get((metric, tuple(sorted(labels.items()))))


def series(text: str) -> int:
    """How many time series the exposition holds."""
    return len(samples(text))


@dataclass
class Record:
    phase: str
    releasing: bool = False


@dataclass
class FakeRun:
    """What `RunView.of` reads of a RunCore, as plain data."""

    run_id: str
    state: str
    workspaces: dict[str, Record] = field(default_factory=dict)
    waits: list[tuple[str, WaitEntry]] = field(default_factory=list)

    def waiting(self) -> list[tuple[str, WaitEntry]]:
        return self.waits

    def view(self) -> RunView:
        """What a RunActor publishes of it: `RunView.of` reads only the fields above of a RunCore."""
        return RunView.of(cast(RunCore, self))
