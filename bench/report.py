"""What a bench hands `python -m bench`: its ratio rows and its samples, as JSON in `$JR2_BENCH_RESULT`.

A bench run alone prints its own table and writes nothing; run by `python -m bench` it is given a file to
write its rows (figure, ours, baseline, unit, goal) and any samples to plot — latency distributions in ms
(`samples`), and series against a count such as RSS or threads against live runs (`series`: name →
{"x": [...], "y": [...], "xlabel": ..., "ylabel": ...}). A script that writes nothing still runs; its
table is its own output.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

RESULT_ENV = "JR2_BENCH_RESULT"


@dataclass(frozen=True, slots=True)
class Row:
    figure: str
    ours: float
    baseline: float
    unit: str
    goal: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else float("nan")


def emit(bench: str, rows: list[Row], *, samples: dict[str, list[float]] | None = None,
         series: dict[str, dict[str, Any]] | None = None) -> None:
    """Write the rows (and samples) where `python -m bench` asked; nothing when run alone."""
    path = os.environ.get(RESULT_ENV)
    if not path:
        return
    doc = {"bench": bench, "rows": [asdict(r) for r in rows], "samples": samples or {}, "series": series or {}}
    with open(path, "w") as f:
        json.dump(doc, f)
