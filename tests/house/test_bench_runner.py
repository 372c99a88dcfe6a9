"""`python -m bench`: every script of bench/ is in its registry, and the ratio rows of the benches' own tables
are read as they print them (no bench is run here)."""

from __future__ import annotations

from bench.__main__ import NOT_BENCHES, REGISTRY, ratio_column, ratio_lines, rows_of, table
from tests.support.paths import BENCH


def test_every_bench_script_is_registered() -> None:
    present = {p.stem for p in BENCH.glob("*.py")} - NOT_BENCHES
    assert present <= {b.name for b in REGISTRY}, "add the new script to REGISTRY in bench/__main__.py"


def test_ratio_lines_are_read_with_their_columns_and_goal() -> None:
    output = """alone: ['state.db'], 1.0 MiB
cache side       wall ms    CPU ms
cold  alone         7.90      7.04
cold  ratio         1.41      1.07   goal ≤ 1.2 (wall)
2 CPUs  cost vs pykka              0.935        0.805
"""
    (cold, cost) = ratio_lines("b", output)
    assert (cold.figure, cold.ratio, cold.goal) == ("cold ratio", "wall ms 1.41, CPU ms 1.07", "goal ≤ 1.2 (wall)")
    assert (cost.figure, cost.ratio) == ("2 CPUs cost vs pykka", "wall ms 0.935, CPU ms 0.805")


def test_a_ratio_column_table_is_read_row_by_row() -> None:
    output = """figure                                    ours        base   ratio    goal
persist 1 KB, p50 µs: ours / raw          10.1         7.3    1.40     ≤ 2
50 at once, rows/s: ours / raw          21,464      39,542    0.54
"""
    rows = ratio_column("s", output)
    assert [(r.figure, r.ours, r.baseline, r.ratio, r.goal) for r in rows] == [
        ("persist 1 KB, p50 µs: ours / raw", "10.1", "7.3", "1.40", "≤ 2"),
        ("50 at once, rows/s: ours / raw", "21,464", "39,542", "0.54", ""),
    ]
    assert table(rows).splitlines()[2].startswith("| s | persist 1 KB")


def test_a_written_row_without_a_baseline_is_shown_as_measured_with_no_ratio() -> None:
    """serve_runs' peak RSS at N live runs has no baseline of its own: no `0 MiB` baseline, no `nan` ratio."""
    serve_runs = next(b for b in REGISTRY if b.name == "serve_runs")
    doc = {"rows": [{"figure": "peak RSS at 1,000 live runs", "ours": 158, "baseline": 0, "unit": "MiB", "goal": ""},
                    {"figure": "threads vs one per actor", "ours": 2049, "baseline": 2000, "unit": "", "goal": "≈ 1"}]}
    rss, threads = rows_of(serve_runs, "", doc)
    assert (rss.ours, rss.baseline, rss.ratio) == ("158 MiB", "", "")
    assert (threads.ours, threads.baseline, threads.ratio, threads.goal) == ("2049", "2000", "1.02", "≈ 1")
