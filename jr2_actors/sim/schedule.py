"""What one seed of the whole-system simulation does: its runs and its faults, drawn from the seed. Pure.

A seed fixes everything the simulation chooses: which workflows run (and under which run ids), what each
scripted model does in its Turns, and every fault with its time and its parameters. The same seed draws
the same schedule on any machine (`random.Random(seed)`, nothing else), so a failing seed replays with
`jr2-actors sim --seeds N`. Threads still interleave as they will; the schedule is what the seed fixes.

The workflows are the shapes that lost runs before: one Agent in consecutive states, a state
that re-enters itself, a review that sends work back (states re-entered, two Agents in one Workspace), a
Pool-like fan-out over two Workspaces, and runs whose ids share a prefix. Every workflow routes
`workspace.lost` and `agent.fault` back into the state that met them, so no fault the schedule draws can
end a run any way but `done` (or `cancelled`, when the schedule cancels it): a transient fault is
invisible in the outcome, which is the first invariant.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Literal

# The faults the simulation draws, and what each does (runner.py performs them).
FaultKind = Literal[
    "api-latency",        # every API request is delayed for a while
    "watch-drop",         # every open watch ends cleanly
    "watch-expire",       # the history is compacted and watches end: resumes get 410
    "watch-stall",        # open watches go silent for a while
    "watch-error",        # an in-stream ERROR frame (500, 504 too-large version, 403), then the watch ends
    "api-refuse",         # the next N requests get 403/429/500/503 (429 with Retry-After)
    "control-plane-away",  # every request is refused 503 for a while
    "token-rotation",     # the bearer token rotates (the file holds the new one)
    "evict",              # a running Sandbox is evicted: the Workspace is lost
    "harness-restart",    # a Harness container restarts: its Submissions end (a lenient one loses its conversations)
    "harness-draining",   # a Harness answers admissions 503 for a while
    "answers-refused",    # the next N answers to picks are refused 503: the model's call still waits
    "conversations-lost",  # a Harness forgets its conversations (404 kept: false on the next admission)
    "list-kill",          # a guard kill on a Harness's list while no Turn may run
    "kernel-kill",        # the kernel OOM-kills a Harness container (a Turn may or may not run), as a restart
    "quota",              # a tight quota for a while: new Sandboxes wait on it
    "cancel",             # the user cancels a run
    "store-unwritable",   # the store's disk refuses writes for a while (full, or read-only)
    "restart-clean",      # the orchestrator stops and starts again on its state dir
    "restart-crash",      # the orchestrator's process state is dropped; its store's file is kept
]

FAULT_KINDS: tuple[FaultKind, ...] = (
    "api-latency", "watch-drop", "watch-expire", "watch-stall", "watch-error", "api-refuse", "control-plane-away",
    "token-rotation", "evict", "harness-restart", "harness-draining", "answers-refused", "conversations-lost",
    "list-kill", "kernel-kill", "quota", "cancel", "store-unwritable", "restart-clean", "restart-crash",
)
# Faults aimed at one run's Workspace (the runner finds its Sandbox when the fault is due).
TARGETED: frozenset[FaultKind] = frozenset({"evict", "harness-restart", "harness-draining", "conversations-lost",
                                            "list-kill", "kernel-kill", "cancel"})

WorkflowShape = Literal["same-agent", "self-loop", "review", "fan-out"]
SHAPES: tuple[WorkflowShape, ...] = ("same-agent", "self-loop", "review", "fan-out")

# The Harness models a seed draws: (answer latency, run-on after `over: true`), in seconds — the 0, 50
# and 500 ms answers, with Submissions that settle at once or run on after their answer.
HARNESS_MODELS: tuple[tuple[float, float], ...] = ((0.0, 0.0), (0.05, 0.0), (0.05, 0.3), (0.5, 0.3), (0.0, 0.3))

# A seed's time: faults fall in its first WINDOW seconds; each lasting fault lasts at most MAX_SPAN.
WINDOW_SECONDS = 4.0
MAX_SPAN_SECONDS = 2.0
# A Harness restart reaches the watch up to this long after the new process answers, or before it (CONTRACTS.md
# §3: "can arrive before or after the new Harness answers"); drawn apart from the rest, so a seed's runs and
# faults are what they were before the lag was drawn.
MAX_WATCH_LAG_SECONDS = 2.0
RESTARTS: frozenset[FaultKind] = frozenset({"harness-restart", "kernel-kill"})


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the seed's runs were submitted
    kind: FaultKind
    run: int = -1  # the run it aims at (an index into Schedule.runs), -1 for none
    workspace: str = ""  # the Workspace path it aims at
    seconds: float = 0.0  # how long a lasting fault lasts
    count: int = 0
    status: int = 0
    peak: str = ""  # a list kill's peak (unique in the seed, so its notice can be counted)
    lag: float = 0.0  # a restart's: the watch shows it this long after the new process answers (< 0: before)

    def describe(self) -> str:
        parts = [f"t={self.at:.2f}s", self.kind]
        if self.run >= 0:
            parts.append(f"run#{self.run}" + (f"/{self.workspace}" if self.workspace else ""))
        if self.seconds:
            parts.append(f"for {self.seconds:.2f}s")
        if self.count:
            parts.append(f"x{self.count}")
        if self.status:
            parts.append(f"status {self.status}")
        if self.peak:
            parts.append(f"peak {self.peak}")
        if self.kind in RESTARTS:
            parts.append(f"watch {self.lag:+.2f}s")
        return " ".join(parts)


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    shape: WorkflowShape
    document: dict[str, Any] = field(repr=False)
    scripts: dict[str, tuple[tuple[Any, ...], ...]] = field(repr=False, default_factory=dict)
    guard_peaks: tuple[str, ...] = ()  # the peaks of the guard kills its scripts make (each unique in the seed)


@dataclass(frozen=True)
class Schedule:
    seed: int
    runs: tuple[RunPlan, ...]
    faults: tuple[Fault, ...]
    # The Harness's model for the whole seed: each answer to a pick reaches it this late,
    # and a Submission answered `over: true` (or aborted) runs on this long before it settles.
    answer_latency: float = 0.0
    run_on: float = 0.0

    def describe(self) -> str:
        lines = [f"seed {self.seed}: {len(self.runs)} runs, {len(self.faults)} faults, answers take "
                 f"{self.answer_latency * 1000:.0f} ms, Submissions run on {self.run_on * 1000:.0f} ms"]
        lines += [f"  run#{i} {r.run_id} {r.shape}" for i, r in enumerate(self.runs)]
        lines += [f"  {f.describe()}" for f in self.faults]
        return "\n".join(lines)


# -- the scripted model's actions, as plain tuples (the runner turns them into the fake Harness's) --------

def say(text: str) -> tuple[str, str]:
    return ("say", text)


def pick(name: str) -> tuple[str, str]:
    return ("pick", name)


def guard_kill(peak: str) -> tuple[str, str]:
    return ("guard-kill", peak)


# -- the workflows ----------------------------------------------------------------------------------

def _agent(name: str, workspace: str | None, access: str = "write") -> dict[str, Any]:
    doc: dict[str, Any] = {"instructions": f"You are {name}.", "access": access}
    if workspace is not None:
        doc["workspace"] = workspace
    return doc


def _state(holds: list[str], agent: str, prompt: str, on: dict[str, str], name: str) -> dict[str, Any]:
    # Every fault the schedule draws comes back to the state that met it (see the module docstring).
    return {"holds": holds, "turn": {"agent": agent, "prompt": prompt},
            "on": {**on, "workspace.lost": name, "agent.fault": name}}


def _workspace() -> dict[str, Any]:
    return {"size": {"cpu": "250m", "memory": "1Gi"}}


def workflow(shape: WorkflowShape, index: int) -> dict[str, Any]:
    """The §5 document of one shape; agent names carry the run's index, so each run's scripts are its own."""
    a, b = f"a{index}", f"b{index}"
    if shape == "same-agent":  # one Agent in consecutive states
        return {"name": "same-agent", "workspaces": {"W": _workspace()}, "agents": {a: _agent(a, "W")},
                "start": "first",
                "states": {"first": _state(["W"], a, "Step one.", {"next": "second"}, "first"),
                           "second": _state(["W"], a, "Step two.", {"finish": "done"}, "second"),
                           "done": {"final": "done"}}}
    if shape == "self-loop":  # a state that re-enters itself (`retry: code`)
        return {"name": "self-loop", "workspaces": {"W": _workspace()}, "agents": {a: _agent(a, "W")},
                "start": "code",
                "states": {"code": _state(["W"], a, "Code.", {"finish": "done", "retry": "code"}, "code"),
                           "done": {"final": "done"}}}
    if shape == "review":  # two Agents in one Workspace; the review sends the work back
        return {"name": "review", "workspaces": {"W": _workspace()},
                "agents": {a: _agent(a, "W"), b: _agent(b, "W", "read")}, "start": "code",
                "states": {"code": _state(["W"], a, "Fix it.", {"finish": "review"}, "code"),
                           "review": _state(["W"], b, "Review it.", {"approve": "done", "reject": "code"}, "review"),
                           "done": {"final": "done"}}}
    # fan-out: two Workspaces held at once, a Turn in each in turn (a Pool-like shape)
    return {"name": "fan-out", "workspaces": {"A": _workspace(), "B": _workspace()},
            "agents": {a: _agent(a, "A"), b: _agent(b, "B")}, "start": "left",
            "states": {"left": _state(["A", "B"], a, "Left.", {"next": "right"}, "left"),
                       "right": _state(["A", "B"], b, "Right.", {"finish": "done"}, "right"),
                       "done": {"final": "done"}}}


def workspaces_of(shape: WorkflowShape) -> tuple[str, ...]:
    return ("A", "B") if shape == "fan-out" else ("W",)


def scripts_for(shape: WorkflowShape, index: int, rng: random.Random, peaks: list[str]) -> dict[str, tuple[
        tuple[Any, ...], ...]]:
    """What each Agent's first Turns do; past its script an Agent picks the first Allowed pick (the runner
    turns pick-first on), which always leads forward, so every run can end `done`."""
    a, b = f"a{index}", f"b{index}"

    def maybe_kill() -> tuple[Any, ...]:
        if rng.random() < 0.5:
            peak = peaks.pop(0)
            return (guard_kill(peak),)
        return ()

    if shape == "same-agent":
        return {a: ((say("one"), *maybe_kill(), pick("next")), (*maybe_kill(), pick("finish")))}
    if shape == "self-loop":
        return {a: ((*maybe_kill(), pick("retry")), (say("again"), pick("finish")))}
    if shape == "review":
        return {a: ((say("fixing"), *maybe_kill(), pick("finish")),), b: ((pick("reject"),),)}
    return {a: ((*maybe_kill(), pick("next")),), b: ((*maybe_kill(), pick("finish")),)}


def guard_peaks(more: bool = False) -> list[str]:
    """Distinct peak sizes in the guard's own form, one per guard kill of a schedule, so each kill on a
    `/memory-kills` list is told apart by its peak; `more` for a trial of many runs."""
    peaks = [f"1.{n}Gi" for n in range(1, 10)] + [f"{n}00Mi" for n in range(1, 10)]
    return peaks + [f"{n}0Mi" for n in range(10, 100)] if more else peaks


def draw(seed: int, *, runs: int | None = None, faults: int | None = None) -> Schedule:
    """The seed's schedule: 3-5 runs of the shapes (each shape at least once when there is room), 4-10
    faults spread over the first WINDOW_SECONDS."""
    rng = random.Random(seed)  # noqa: S311 - a simulation's schedule, not a secret
    n_runs = runs if runs is not None else rng.randint(3, 5)
    shapes = list(SHAPES)
    rng.shuffle(shapes)
    while len(shapes) < n_runs:
        shapes.append(rng.choice(SHAPES))
    shapes = shapes[:n_runs]
    # Two runs share a prefix of their ids (names are cut to 8 characters of the run's slug before the hash).
    prefix = f"r-{seed % 10000:04d}"
    peaks = guard_peaks()
    rng.shuffle(peaks)
    plans = []
    for i, shape in enumerate(shapes):
        run_id = f"{prefix}-s{i}" if i < 2 else f"{prefix}-{rng.randrange(16**6):06x}"
        before = list(peaks)
        scripts = scripts_for(shape, i, rng, peaks)
        used = tuple(p for p in before if p not in peaks)
        plans.append(RunPlan(run_id, shape, workflow(shape, i), scripts, used))
    n_faults = faults if faults is not None else rng.randint(4, 10)
    drawn = [_fault(rng, plans) for _ in range(n_faults)]
    drawn = [replace(f, peak=peaks.pop(0)) if f.kind == "list-kill" and peaks else f for f in drawn]
    lags = random.Random(f"watch-lag:{seed}")  # noqa: S311 - a simulation's schedule, not a secret
    drawn = [replace(f, lag=round(lags.uniform(-MAX_WATCH_LAG_SECONDS, MAX_WATCH_LAG_SECONDS), 2))
             if f.kind in RESTARTS else f for f in drawn]
    latency, run_on = rng.choice(HARNESS_MODELS)
    return Schedule(seed, tuple(plans), tuple(sorted(drawn, key=lambda f: f.at)), latency, run_on)


def _fault(rng: random.Random, plans: list[RunPlan]) -> Fault:
    kind = rng.choice(FAULT_KINDS)
    at = round(rng.uniform(0.0, WINDOW_SECONDS), 2)
    span = round(rng.uniform(0.2, MAX_SPAN_SECONDS), 2)
    if kind in TARGETED:
        run = rng.randrange(len(plans))
        workspace = rng.choice(workspaces_of(plans[run].shape))
        return Fault(at, kind, run, workspace, seconds=span if kind == "harness-draining" else 0.0)
    if kind == "watch-error":
        return Fault(at, kind, status=rng.choice((500, 504, 403)))
    if kind == "answers-refused":
        return Fault(at, kind, count=rng.randint(1, 3), status=503)
    if kind == "api-refuse":
        status = rng.choice((403, 429, 500, 503))
        return Fault(at, kind, count=rng.randint(1, 6), status=status)
    if kind in ("api-latency", "watch-stall", "control-plane-away", "quota", "store-unwritable"):
        return Fault(at, kind, seconds=span)
    return Fault(at, kind)


def parse_seeds(text: str) -> list[int]:
    """`1-500`, `7`, `1,5,9-12`: the seeds to run, in order, each once. Raises ValueError naming the part."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise ValueError(f"{part!r} is not a seed or a range of seeds (like 7 or 1-500)") from None
        if first < 0 or last < first:
            raise ValueError(f"{part!r} is not a range of seeds from low to high, from 0")
        if last - first >= 100_000:
            raise ValueError(f"{part!r} holds more than 100000 seeds")
        seeds.extend(range(first, last + 1))
    return list(dict.fromkeys(seeds))
