"""Serve's CPU by kind of thread: the kernel's run time of each thread (schedstat), summed by its OS name,
which `thread_names/sitecustomize.py` sets from the Python thread's kind when a bench puts that folder on
serve's path (`bench/serve_runs.py --threads-cpu`)."""

from __future__ import annotations

import os
from pathlib import Path

THREAD_NAMES = Path(__file__).resolve().parent / "thread_names"  # its sitecustomize names serve's OS threads


def run_time_by_kind(pid: int) -> dict[str, tuple[int, float]]:
    """Each thread kind's (live threads, seconds on a CPU): the kernel's exact run time (schedstat, ns), not the
    tick-sampled utime, which charges threads that run for less than a tick almost nothing."""
    kinds: dict[str, tuple[int, float]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            ran = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        count, seconds = kinds.get(name, (0, 0.0))
        kinds[name] = (count + 1, seconds + ran)
    return kinds


def print_kinds(kinds: dict[str, tuple[int, float]], runs: int) -> None:
    total = sum(seconds for _, seconds in kinds.values()) or 1.0
    print(f"  serve's run time by thread kind once all {runs:,} were placed (live threads; kernel schedstat):")
    print(f"    {'kind':<16}{'threads':>8}{'seconds':>10}{'ms a run':>10}{'share':>8}")
    for name, (count, seconds) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        if seconds >= 0.01 * total or count > 100:
            print(f"    {name:<16}{count:>8}{seconds:>10.2f}{1000 * seconds / runs:>10.2f}{seconds / total:>8.1%}")
