"""`jr2-actors sim --seeds 1-500`: the whole-system simulation, seed by seed (docs/reliability.md).

Each seed draws its runs and faults (`sim/schedule.py`), plays them on a fresh fake cluster and
orchestrator (`sim/runner.py`) and checks every invariant (`sim/invariants.py`), against the lenient and
the strict fake Harness in turn (`--harness`; the strict one does only what CONTRACTS.md §3 promises). A
failing seed prints its schedule, each violation, and the one command that replays it. Exit 0 when every
seed held, 1 when one did not, 2 on a usage error, 130 on Ctrl-C (after the seed under way stops).
"""

from __future__ import annotations

import argparse
import functools
import logging
import multiprocessing
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from jr2_actors.commands.common import UsageError


def _seeds(text: str) -> list[int]:
    from jr2_actors.sim.schedule import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 100000")
    return value


def add_parser(sub: Any) -> None:
    sim = sub.add_parser("sim", help="the whole-system simulation: seeded runs and faults, then the invariants",
                         description="Plays seeded schedules of runs and faults on the fake cluster and checks "
                                     "every invariant. Example: jr2-actors sim --seeds 1-20")
    sim.add_argument("--seeds", type=_seeds, default=[1],
                     help="the seeds to play: N, A-B, or a comma list of both (default: 1)")
    sim.add_argument("--show", action="store_true",
                     help="print each seed's schedule, not only a failing one's (default: only a failing one's)")
    sim.add_argument("--crash-trials", type=_count, default=0, metavar="N",
                     help="instead of seeds: N crash trials of `serve` (SIGKILLed with 20 runs under way, then "
                          "restarted on its state dir), drawn from the first seed (default: 0, none)")
    sim.add_argument("--first-trial", type=_count, default=0, metavar="K",
                     help="number the crash trials from K, to replay one (default: 0)")
    sim.add_argument("--jobs", type=_count, default=1, metavar="N",
                     help="play N seeds at once, each in a process of its own (a seed mostly waits, so more jobs "
                          "than cores pays; default: 1, in this process)")
    sim.add_argument("--harness", choices=("both", "lenient", "strict"), default="both",
                     help="the fake Harness each seed (or crash trial) is played against: strict does only what the "
                          "contract promises of a restart, lenient loses the conversations; both plays each twice "
                          "(default: both)")
    sim.add_argument("--keep", action="store_true",
                     help="keep each seed's state folders (printed) instead of removing them (default: removed)")


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    if args.crash_trials:
        return run_crash_trials(args, stop)
    seeds: list[int] = args.seeds
    if not seeds:
        raise UsageError("--seeds names no seed")
    modes = _modes(args)
    out = sys.stdout
    failed: list[tuple[int, str]] = []
    faults: Counter[str] = Counter()
    runs = 0
    started = time.monotonic()
    played = 0
    for outcome in _played([(seed, mode) for seed in seeds for mode in modes], args, stop):
        played += 1
        runs += outcome["runs"]
        faults.update(outcome["faults"])
        seed, mode = outcome["seed"], outcome["harness"]
        name = f"seed {seed}" + (f" ({mode})" if len(modes) > 1 else "")
        if outcome["kept"]:
            print(f"{name}: state kept in {outcome['kept']}", file=out)
        if not outcome["violations"]:
            print(f"{name}: ok ({outcome['runs']} runs, {len(outcome['faults'])} faults, "
                  f"{outcome['seconds']:.1f}s)", file=out, flush=True)
            if args.show:
                print(outcome["schedule"], file=out)
        else:
            failed.append((seed, mode))
            print(f"{name}: {len(outcome['violations'])} violation(s) in {outcome['seconds']:.1f}s, {mode} Harness",
                  file=out)
            print(outcome["schedule"], file=out)
            for v in outcome["violations"]:
                print(f"  violation: {v}", file=out)
            print(f"  replay: jr2-actors sim --seeds {seed} --harness {mode}", file=out, flush=True)
    took = time.monotonic() - started
    covered = ", ".join(f"{k} {n}" for k, n in sorted(faults.items()))
    what = " ".join(modes) if len(modes) > 1 else modes[0]
    print(f"{played} seed(s) ({what}), {runs} runs, {len(failed)} failed, {took:.0f}s; faults: {covered or 'none'}",
          file=out)
    for mode in modes:
        failing = sorted(seed for seed, m in failed if m == mode)
        if failing:
            print(f"failed seeds ({mode}): {','.join(str(s) for s in failing)}", file=out)
    if stop.is_set():
        return 130
    return 1 if failed else 0


def _modes(args: argparse.Namespace) -> list[str]:
    mode = getattr(args, "harness", "both")
    return ["lenient", "strict"] if mode == "both" else [mode]


Item = tuple[int, str]  # a seed or a trial, and the Harness mode it is played against


def _call(play: Callable[[Item, threading.Event | None], dict[str, Any]], item: Item) -> dict[str, Any]:
    return play(item, None)


def _seed_job(keep: bool, item: Item, stop: threading.Event | None) -> dict[str, Any]:
    return play_seed(item[0], keep, stop, harness=item[1])


def _trial_job(seed: int, keep: bool, item: Item, stop: threading.Event | None) -> dict[str, Any]:
    return play_trial(seed, item[0], keep, stop, harness=item[1])


def play_seed(seed: int, keep: bool = False, stop: threading.Event | None = None, *,
              harness: str = "lenient") -> dict[str, Any]:
    """One seed, played and checked; the outcome as plain data (it crosses a process boundary with --jobs)."""
    from jr2_actors.sim.runner import Sim, clean_workdir
    from jr2_actors.sim.schedule import draw

    quiet = logging.getLogger("jr2_actors")
    level = quiet.level
    if quiet.getEffectiveLevel() < logging.ERROR:
        quiet.setLevel(logging.ERROR)  # the faults make the orchestrator warn on purpose; a traceback still shows
    schedule = draw(seed)
    workdir = tempfile.mkdtemp(prefix=f"jr2-sim-{seed}-{harness}-")
    try:
        result = Sim(schedule, workdir, stop, harness_mode=harness).run()
    finally:
        quiet.setLevel(level)
        if not keep:
            clean_workdir(workdir)
    return {"seed": seed, "harness": harness, "violations": result.violations, "seconds": result.seconds,
            "runs": len(schedule.runs),
            "faults": [f.kind for f in schedule.faults], "schedule": schedule.describe(),
            "kept": workdir if keep else ""}


def _played(items: list[Item], args: argparse.Namespace, stop: threading.Event) -> Iterator[dict[str, Any]]:
    return _each(items, functools.partial(_seed_job, args.keep), args.jobs, stop)


def _each(items: list[Item], play: Callable[[Item, threading.Event | None], dict[str, Any]], jobs: int,
          stop: threading.Event) -> Iterator[dict[str, Any]]:
    """Each item's outcome as it is known: in order on this process, or from `jobs` worker processes (each
    item in a process of its own making, so no seed's threads or patched store reach another's)."""
    if jobs <= 1:
        for item in items:
            if stop.is_set():
                return
            outcome = play(item, stop)
            if stop.is_set():
                return
            yield outcome
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, max_tasks_per_child=1) as pool:
        futures = [pool.submit(_call, play, item) for item in items]
        try:
            pending = set(futures)
            while pending and not stop.is_set():
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=futures.index):
                    yield future.result()
        finally:
            for future in futures:
                future.cancel()


def play_trial(seed: int, n: int, keep: bool = False, stop: threading.Event | None = None, *,
               harness: str = "lenient") -> dict[str, Any]:
    """One crash trial, played and checked; plain data, as it crosses a process boundary with --jobs."""
    from jr2_actors.sim.crash import Trial
    from jr2_actors.sim.runner import clean_workdir

    workdir = tempfile.mkdtemp(prefix=f"jr2-crash-{seed}-{n}-{harness}-")
    try:
        result = Trial(seed, n, workdir, stop, harness_mode=harness).run()
    finally:
        if not keep:
            clean_workdir(workdir)
    return {"trial": n, "harness": harness, "violations": result.violations, "accepted": result.accepted,
            "seconds": result.seconds,
            "describe": result.describe, "kept": workdir if keep else ""}


def run_crash_trials(args: argparse.Namespace, stop: threading.Event) -> int:
    """`--crash-trials N`: `serve` SIGKILLed with 20 runs under way and restarted, N times (sim/crash.py)."""
    out = sys.stdout
    seed = args.seeds[0]
    modes = _modes(args)
    trials = [(n, mode) for n in range(args.first_trial, args.first_trial + args.crash_trials) for mode in modes]
    failed: list[tuple[int, str]] = []
    accepted = 0
    started = time.monotonic()
    played = 0
    for outcome in _each(trials, functools.partial(_trial_job, seed, args.keep), args.jobs, stop):
        played += 1
        accepted += outcome["accepted"]
        n, mode = outcome["trial"], outcome["harness"]
        name = f"trial {n}" + (f" ({mode})" if len(modes) > 1 else "")
        if outcome["kept"]:
            print(f"{name}: kept in {outcome['kept']}", file=out)
        if not outcome["violations"]:
            print(f"{name}: ok ({outcome['accepted']} runs accepted; {outcome['describe']}; "
                  f"{outcome['seconds']:.1f}s)", file=out, flush=True)
        else:
            failed.append((n, mode))
            print(f"{name}: {len(outcome['violations'])} violation(s) ({outcome['describe']}; {mode} Harness)",
                  file=out)
            for v in outcome["violations"]:
                print(f"  violation: {v}", file=out)
            print(f"  replay: jr2-actors sim --seeds {seed} --crash-trials 1 --first-trial {n} --harness {mode}",
                  file=out, flush=True)
    took = time.monotonic() - started
    print(f"{played} crash trial(s), {accepted} runs accepted, {len(failed)} failed, {took:.0f}s", file=out)
    for mode in modes:
        failing = sorted(n for n, m in failed if m == mode)
        if failing:
            print(f"failed trials ({mode}): {','.join(str(n) for n in failing)}", file=out)
    if stop.is_set():
        return 130
    return 1 if failed else 0
