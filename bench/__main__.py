"""`python -m bench`: every benchmark, one table of ratios against the baselines each measured in the same run.

Each bench is a script of `bench/` run as its own process (`python -m bench.NAME ARGS`), one after the other,
so none measures beside another. `REGISTRY` below is the list: add a line for a new script (a script in
`bench/` missing from it is named at the end, never silently skipped; a registered one not present is skipped
with a note). A bench that writes its rows through `bench.report` (the file in
`$JR2_BENCH_RESULT`) gives ratios, samples and series; for the others the runner reads the ratio lines of
their own table (`ratio_lines`, `ratio_column`).

Plots (matplotlib, the `bench` extra): one PNG per bench of its latency distributions (an ECDF per sample)
and one per series (serve's RSS and threads against live runs, `bench.report.series_png`), written with the
table under a temp dir, or to `docs/bench/` with `--write-docs` (plus `docs/bench/latest.md`: machine, date,
command and the table; a quick run's are `NAME-quick.png` and `latest-quick.md`, so it never overwrites a
full run's).

    python -m bench [--quick] [--only NAME[,NAME]] [--write-docs]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import RESULT_ENV, series_png

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "bench"


@dataclass(frozen=True, slots=True)
class Line:
    """One row of the summary table."""

    bench: str
    figure: str
    ours: str
    baseline: str
    ratio: str
    goal: str


Parser = Callable[[str, str], list[Line]]


def _columns(header: str) -> list[str]:
    return [c for c in re.split(r"\s{2,}", header.strip()) if c]


_NUMBER = re.compile(r"^-?[\d,]*\.?\d+$")


def ratio_lines(bench: str, output: str) -> list[Line]:
    """The rows of a bench's own table whose label says `ratio` or `cost vs`: the numbers that follow the
    label, named by the header's columns, and any words after them as the goal."""
    lines = output.splitlines()
    header = next((x for x in lines if x.strip() and not any(_NUMBER.match(t) for t in x.split())), "")
    names = _columns(header)
    out = []
    for x in lines:
        if not re.search(r"(^|\s)ratio(\s|$)|\bcost vs\b", x):
            continue
        tokens = x.split()
        mark = next(i for i, t in enumerate(tokens) if t in ("ratio", "vs"))  # the numbers follow the label
        first = next((i for i, t in enumerate(tokens) if i > mark and _NUMBER.match(t)), None)
        if first is None:
            continue
        end = first
        while end < len(tokens) and _NUMBER.match(tokens[end]):
            end += 1
        numbers = tokens[first:end]
        label, goal = " ".join(tokens[:first]), " ".join(tokens[end:])
        cols = names[-len(numbers):] if len(names) >= len(numbers) + 1 else [""] * len(numbers)
        ratio = ", ".join(f"{c} {n}".strip() for c, n in zip(cols, numbers, strict=True))
        out.append(Line(bench, label, "", "", ratio, goal))
    return out


def ratio_column(bench: str, output: str) -> list[Line]:
    """A table whose columns are `figure ours base ratio goal`: each row as it is."""
    out = []
    for x in output.splitlines():
        m = re.match(r"^(.+?)\s+([\d,.]+)\s+([\d,.]+)\s+(\d+\.\d+)\s*(.*)$", x)
        if m:
            out.append(Line(bench, m.group(1).strip(), m.group(2), m.group(3), m.group(4), m.group(5).strip()))
    return out


@dataclass(frozen=True, slots=True)
class Bench:
    name: str  # bench/NAME.py
    quick: tuple[str, ...]  # its arguments in --quick (the whole run under 10 minutes)
    full: tuple[str, ...] = ()
    parse: Parser = ratio_lines  # when it writes no rows of its own
    timeout: float = 1800.0


REGISTRY: tuple[Bench, ...] = (
    Bench("watch_cpu", quick=("--quick", "--rounds", "3")),
    Bench("loss_detection", quick=("--trials", "60", "--rounds", "3"), full=("--trials", "200", "--rounds", "10")),
    Bench("watch_latency", quick=("--burst", "500", "--paced", "100", "--rounds", "3")),
    Bench("actor_overhead", quick=("--tells", "20000", "--asks", "1000", "--rounds", "3")),
    Bench("store_persist", quick=("--rounds", "3", "--n", "500", "--runs", "50", "--each", "50"),
          parse=ratio_column),
    Bench("store_restore", quick=("--rounds", "3", "--finished", "20000")),
    Bench("store_history", quick=("--runs", "2000", "--samples", "3"), parse=ratio_column),
    Bench("workspace_start", quick=("--n", "20", "--rounds", "1")),
    Bench("lease_patch", quick=("--calls", "100", "--rounds", "3")),
    Bench("renewal_cost", quick=("--n", "200", "--window", "330"), full=("--n", "5000", "--window", "300")),
    Bench("restart_readmit", quick=("--rounds", "2")),
    Bench("serve_runs", quick=("--runs", "50"), full=("--runs", "1000")),
    Bench("start_bare", quick=("--runs", "100"), full=("--runs", "1000")),
    Bench("release", quick=("--runs", "100", "--runs", "300", "--layout", "one"),
          full=("--runs", "1000", "--runs", "5000", "--layout", "one,own"), timeout=7200.0),
    Bench("stop_load", quick=("--small", "50", "--big", "200"), full=("--small", "200", "--big", "1000")),
    Bench("fake_scale", quick=("--nodes", "100", "--sandboxes", "1000", "--watchers", "3")),
    Bench("cli_startup", quick=("--runs", "3")),
)
NOT_BENCHES = {"__init__", "__main__", "report", "release_plot", "thread_kinds"}


def machine() -> str:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((x.split(":", 1)[1].strip() for x in f if x.startswith("model name")), "")
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} CPUs ({cpu or platform.processor()}), {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, load average {load} at the start")


def run(bench: Bench, quick: bool, work: Path) -> tuple[str, dict[str, Any] | None, float, int]:
    result = work / f"{bench.name}.json"
    args = bench.quick if quick else bench.full
    env = {**os.environ, RESULT_ENV: str(result), "PYTHONPATH": str(ROOT)}
    began = time.monotonic()
    print(f"\n## {bench.name} {' '.join(args)}", flush=True)
    proc = subprocess.Popen([sys.executable, "-m", f"bench.{bench.name}", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    try:
        code = proc.wait(bench.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = -9
    doc = json.loads(result.read_text()) if result.exists() else None
    return "".join(lines), doc, time.monotonic() - began, code


def rows_of(bench: Bench, output: str, doc: dict[str, Any] | None) -> list[Line]:
    if doc is None:
        return bench.parse(bench.name, output)
    out = []
    for r in doc["rows"]:
        if not r["baseline"]:  # a figure with no baseline of its own (serve_runs' RSS at N live runs): as measured
            out.append(Line(bench.name, r["figure"], f"{r['ours']:.4g} {r['unit']}".strip(), "", "", r.get("goal", "")))
            continue
        ratio = r["ours"] / r["baseline"]
        out.append(Line(bench.name, r["figure"], f"{r['ours']:.4g} {r['unit']}".strip(),
                        f"{r['baseline']:.4g} {r['unit']}".strip(), f"{ratio:.2f}", r.get("goal", "")))
    return out


def plot(doc: dict[str, Any], where: Path, suffix: str = "") -> list[Path]:
    """An ECDF of each latency sample (one PNG per bench) and one PNG per series (`suffix`: `-quick`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    made: list[Path] = []
    samples: dict[str, list[float]] = doc.get("samples") or {}
    if samples:
        groups: dict[str, dict[str, list[float]]] = {}
        for label, values in samples.items():
            group, _, side = label.partition(": ")
            groups.setdefault(group, {})[side or label] = values
        fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 3.6), squeeze=False)
        for ax, (group, sides) in zip(axes[0], groups.items(), strict=True):
            for side, values in sides.items():
                ordered = sorted(values)
                if ordered:
                    ax.step(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], where="post",
                            label=f"{side} (n={len(ordered)})")
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_title(group, fontsize=10)
            ax.set_xlabel("ms")
            ax.set_ylabel("fraction delivered")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"{doc['bench']}: latency distributions", fontsize=11)
        fig.tight_layout()
        path = where / f"{doc['bench']}{suffix}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    for name, s in (doc.get("series") or {}).items():
        path = where / f"{doc['bench']}-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}{suffix}.png"
        made.append(series_png(f"{doc['bench']}: {name}", s, path))
    return made


def table(lines: list[Line]) -> str:
    head = ("bench", "figure", "ours", "baseline", "ratio", "goal")
    cells = [head, *((x.bench, x.figure, x.ours, x.baseline, x.ratio, x.goal) for x in lines)]
    out = ["| " + " | ".join(c) + " |" for c in cells]
    out.insert(1, "| " + " | ".join("---" for _ in head) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller loads: the whole run in under 10 minutes")
    parser.add_argument("--only", default="", help="comma-separated bench names (default: every one)")
    parser.add_argument("--write-docs", action="store_true",
                        help="write the plots and latest.md to docs/bench/ (default: a temp dir only)")
    args = parser.parse_args(argv)
    wanted = {x for x in args.only.split(",") if x}
    unknown = wanted - {b.name for b in REGISTRY}
    if unknown:
        parser.error(f"no such bench: {', '.join(sorted(unknown))} (see REGISTRY in bench/__main__.py)")
    present = {p.stem for p in (ROOT / "bench").glob("*.py")} - NOT_BENCHES
    began = time.monotonic()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    about = machine()
    lines: list[Line] = []
    notes: list[str] = []
    plots: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="jr2-bench-") as tmp:
        work = Path(tmp)
        where = DOCS if args.write_docs else work
        where.mkdir(parents=True, exist_ok=True)
        for bench in REGISTRY:
            if wanted and bench.name not in wanted:
                continue
            if bench.name not in present:
                notes.append(f"{bench.name}: not in bench/ yet, skipped")
                continue
            output, doc, seconds, code = run(bench, args.quick, work)
            notes.append(f"{bench.name}: {seconds:.0f} s" + ("" if code == 0 else f", exit status {code}"))
            lines += rows_of(bench, output, doc)
            if doc is not None:
                try:
                    plots += plot(doc, where, "-quick" if args.quick else "")
                except ImportError:
                    notes.append("matplotlib is missing (pip install -e '.[bench]'): no plots")
        for name in sorted(present - {b.name for b in REGISTRY}):
            notes.append(f"{name}: in bench/ but not in REGISTRY (bench/__main__.py), not run")
        total = time.monotonic() - began
        command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
        summary = (f"Machine: {about}.\nDate: {started}. Command: `{command.strip()}`. Total {total:.0f} s.\n\n"
                   f"{table(lines)}\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
        print("\n# Summary\n\n" + summary)
        if plots:
            print("plots: " + ", ".join(str(p.relative_to(ROOT) if args.write_docs else p) for p in plots))
        if args.write_docs:
            name = "latest-quick.md" if args.quick else "latest.md"
            (DOCS / name).write_text(f"# The last `python -m bench{' --quick' if args.quick else ''}` run\n\n"
                                     + summary)
    return 0


def interrupted_main() -> int:
    """Ctrl-C: the bench under way gets the same SIGINT (one process group) and ends; its temp dir goes with
    the `with` above; one line and 130, as every command of the project."""
    try:
        return main()
    except KeyboardInterrupt:
        print("python -m bench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(interrupted_main())
