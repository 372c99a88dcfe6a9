"""What a bench hands `python -m bench`: its ratio rows and its samples, as JSON in `$JR2_BENCH_RESULT`.

A bench run alone prints its own table and writes nothing; run by `python -m bench` it is given a file to
write its rows (figure, ours, baseline, unit, goal) and any samples to plot — latency distributions in ms
(`samples`), and series against a count such as RSS or threads against live runs (`series`: name →
{"x": [...], "y": {label: [...]}, "xlabel": ..., "ylabel": ..., and optionally "y2": {label: [...]} with
"y2label", drawn on a second y-axis on the right}: `series_png` draws one). A script that writes nothing still runs; its
table is its own output.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
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


def series_png(title: str, series: dict[str, Any], path: Path) -> Path:
    """One series as a PNG: each `y` line against `x` on the left axis, each `y2` line on a right one (RSS in
    MiB and threads against live runs share a plot without one flattening the other). Needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    handles = []
    for label, ys in series["y"].items():
        handles += ax.plot(series["x"], ys, marker=".", markersize=4, linewidth=1, label=label)
    ax.set_xlabel(series.get("xlabel", ""))
    ax.set_ylabel(series.get("ylabel", ""))
    ax.grid(True, alpha=0.3)
    if series.get("y2"):
        right = ax.twinx()
        colors = iter(["tab:red", "tab:green", "tab:purple", "tab:brown"])
        for label, ys in series["y2"].items():
            handles += right.plot(series["x"], ys, marker=".", markersize=4, linewidth=1, label=label,
                                  color=next(colors, None))
        right.set_ylabel(series.get("y2label", ""))
    ax.legend(handles=handles, labels=[h.get_label() for h in handles], fontsize=8, loc="upper left")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def run_main(name: str, main: Callable[[], None]) -> None:
    """A bench's `main`, and Ctrl-C as every command answers it: one line and 130 (what the bench started —
    serve, the fake — stops in its `finally`s and gets the same SIGINT, one process group)."""
    try:
        main()
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None

