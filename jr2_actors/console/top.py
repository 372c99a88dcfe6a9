"""What `jr2-actors top` and the Console's orchestrator page show, read off one `/metrics` answer.

One model for both: `sections` turns a scrape (and the one before, for rates) into titled tables of text —
the actors by mailbox depth, the busiest actors, the one watch, the runs and their waits by reason, the
store, the cluster client and the Harness. `commands/topview.py` draws them with `rich`, the Console as an
HTML table (each cell as text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from jr2_actors.agent import metrics as harness_m
from jr2_actors.kube import metrics as kube_m
from jr2_actors.run import metrics as run_m
from jr2_actors.run.listing.render import duration
from jr2_actors.shell import metrics as shell_m
from jr2_actors.store import metrics as store_m
from jr2_actors.watch import metrics as watch_m
from jr2_actors.workspace import metrics as workspace_m

Labels = tuple[tuple[str, str], ...]


class NotMetrics(ValueError):
    """The text is not a jr2 orchestrator's `/metrics`."""


@dataclass
class Scrape:
    """Every sample of one `/metrics` answer, by name and labels."""

    at: float
    samples: dict[str, dict[Labels, float]] = field(default_factory=dict)
    states: dict[str, float] | None = None  # live runs by workflow state, from `GET /runs` (None: no token)

    @classmethod
    def parse(cls, text: str, at: float) -> Scrape:
        scrape = cls(at)
        try:
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    scrape.samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
        except (ValueError, TypeError, IndexError) as e:
            raise NotMetrics(f"the answer is not Prometheus text ({e})") from None
        if not any(name.startswith("jr2_") for name in scrape.samples):
            raise NotMetrics("the answer holds no jr2 metrics: is this a jr2 orchestrator?")
        return scrape

    def value(self, metric: str, /, **labels: str) -> float | None:
        return self.samples.get(metric, {}).get(tuple(sorted(labels.items())))

    def by(self, metric: str, label: str, /, **fixed: str) -> dict[str, float]:
        """`{label value: sample}` of one family, the other labels fixed."""
        out: dict[str, float] = {}
        for labels, v in self.samples.get(metric, {}).items():
            d = dict(labels)
            if label in d and all(d.get(k) == want for k, want in fixed.items()) and len(d) == len(fixed) + 1:
                out[d[label]] = v
        return out

    def histogram(self, metric: str, /, **labels: str) -> tuple[list[tuple[float, float]], float, float]:
        """(cumulative buckets by upper bound, count, sum) of one histogram series."""
        buckets = sorted((float(le), v) for le, v in self.by(f"{metric}_bucket", "le", **labels).items())
        return (buckets, self.value(f"{metric}_count", **labels) or 0.0,
                self.value(f"{metric}_sum", **labels) or 0.0)


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]
    alert: bool = False  # something falls behind or is degraded: drawn in red
    good: bool = False  # drawn in green


@dataclass(frozen=True)
class Section:
    title: str
    headers: tuple[str, ...]  # none: a table of `what: value` lines
    rows: tuple[Row, ...]

    def doc(self) -> dict[str, Any]:
        return {"title": self.title, "headers": list(self.headers),
                "rows": [{"cells": list(r.cells), "alert": r.alert, "good": r.good} for r in self.rows]}


def quantile(buckets: list[tuple[float, float]], count: float, q: float) -> float | None:
    """The upper bound of the bucket the q-quantile falls in (what a histogram can say), None when empty."""
    if count <= 0:
        return None
    for bound, cumulative in buckets:
        if cumulative >= q * count:
            return bound
    return float("inf")


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    if value == float("inf"):
        return "> 10 s"
    if value < 1.0:
        return f"{value * 1000:.3g} ms"
    return duration(value) if value >= 60 else f"{value:.1f} s"


def count(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def sections(now: Scrape, before: Scrape | None = None) -> list[Section]:
    busiest = _busiest(now)
    return [_actors(now, before), *([busiest] if busiest else []), _watch(now), _runs(now),
            _store_and_cluster(now)]


def _rate(now: Scrape, before: Scrape | None, metric: str, /, **labels: str) -> str:
    if before is None or now.at <= before.at:
        return ""
    a, b = before.value(metric, **labels), now.value(metric, **labels)
    if a is None or b is None or b < a:
        return ""
    return f"{(b - a) / (now.at - before.at):,.1f}/s"


def _actors(now: Scrape, before: Scrape | None) -> Section:
    headers = ["kind", "live", "depth", "max", "high water", "oldest message", "processed", "rate", "failures",
               "mean", "p99"]
    if before is None:
        headers.remove("rate")  # a rate needs two scrapes
    kinds = now.by(shell_m.ACTOR_INSTANCES, "kind")
    found = []
    for kind in kinds:
        buckets, n, total = now.histogram(shell_m.ACTOR_PROCESSING_SECONDS, kind=kind)
        found.append((now.value(shell_m.ACTOR_MAILBOX_DEPTH, kind=kind) or 0.0,
                      now.value(shell_m.ACTOR_OLDEST_MESSAGE_AGE, kind=kind) or 0.0, kind, buckets, n, total))
    processed = shell_m.ACTOR_MESSAGES_PROCESSED
    rows = []
    for depth, oldest, kind, buckets, n, total in sorted(found, key=lambda r: (-r[0], -r[1], r[2])):
        cells = [kind, count(kinds[kind]), count(depth), count(now.value(shell_m.ACTOR_MAILBOX_DEPTH_MAX, kind=kind)),
                 count(now.value(shell_m.ACTOR_MAILBOX_HIGH_WATER, kind=kind)), seconds(oldest) if depth else "–",
                 count(now.value(processed, kind=kind)), _rate(now, before, processed, kind=kind),
                 count(now.value(shell_m.ACTOR_MESSAGE_FAILURES, kind=kind)),
                 seconds(total / n) if n else "–", seconds(quantile(buckets, n, 0.99))]
        if before is None:
            del cells[7]
        rows.append(Row(tuple(cells), alert=bool(depth)))
    if not rows:
        rows.append(Row(("(no actors yet)", *[""] * (len(headers) - 1))))
    return Section("Actors, by mailbox depth", tuple(headers), tuple(rows))


def _busiest(now: Scrape) -> Section | None:
    depths = now.samples.get(shell_m.ACTOR_BUSIEST_DEPTH, {})
    if not depths:
        return None
    rows = []
    for labels, depth in sorted(depths.items(), key=lambda kv: -kv[1]):
        d = dict(labels)
        rows.append(Row((d.get("kind", ""), d.get("name", ""), count(depth),
                         seconds(now.value(shell_m.ACTOR_BUSIEST_AGE, **d)))))
    return Section("Busiest actors", ("kind", "name", "depth", "oldest message"), tuple(rows))


def _watch(now: Scrape) -> Section:
    phases = now.by(watch_m.WATCH_PHASE, "phase")
    phase = next((p for p, v in phases.items() if v == 1), None)
    if phase is None:
        return Section("Sandbox watch", (), (Row(("state", "not started")),))
    degraded = now.value(watch_m.WATCH_DEGRADED) == 1
    rows = [Row(("state", f"{phase}, DEGRADED (blind, re-listing)" if degraded else f"{phase}, up"),
                alert=degraded, good=not degraded),
            Row(("failures in a row", count(now.value(watch_m.WATCH_FAILURES)))),
            Row(("last frame", f"{seconds(now.value(watch_m.WATCH_LAST_FRAME_AGE))} ago")),
            Row(("resume version age", seconds(now.value(watch_m.WATCH_VERSION_AGE)))),
            Row(("Sandboxes", f"{count(now.value(watch_m.WATCH_TRACKED))} followed, "
                              f"{count(now.value(watch_m.WATCH_WAITERS))} with a recipient")),
            Row(("reconnects", count(now.value(watch_m.WATCH_RECONNECTS)))),
            Row(("re-lists", _nonzero(now.by(watch_m.WATCH_RELISTS, "cause")) or "none")),
            Row(("events", _nonzero(now.by(watch_m.WATCH_EVENTS, "type")) or "none"))]
    buckets, n, _ = now.histogram(workspace_m.WATCH_DELIVERY_LATENCY)
    rows.append(Row(("delivery latency", f"p50 {seconds(quantile(buckets, n, 0.5))}, "
                                         f"p99 {seconds(quantile(buckets, n, 0.99))} ({count(n)} measured)"
                     if n else "– (the server stamps no writes)")))
    return Section("Sandbox watch", (), tuple(rows))


def _runs(now: Scrape) -> Section:
    live, states = now.value(run_m.RUNS_LIVE), now.states
    by_state = "" if not states else f" — {_nonzero(states)}"
    waits: dict[str, dict[str, float]] = {}  # on → reason → open waits
    for labels, n in now.samples.get(run_m.RUN_WAITS_OPEN, {}).items():
        d = dict(labels)
        if n and "on" in d:
            waits.setdefault(d["on"], {})[d.get("reason", "")] = n
    open_waits = [f"{int(sum(by.values()))} waiting on {on}: {_nonzero(by)} (the oldest for "
                  f"{seconds(now.value(run_m.RUN_WAIT_OLDEST, on=on))})" for on, by in sorted(waits.items())]
    return Section("Runs and their waits", (), (
        Row(("live runs", f"{count(live)}{by_state}")),
        Row(("Workspaces", _nonzero(now.by(run_m.WORKSPACES, "phase")) or "none")),
        Row(("open waits", "; ".join(open_waits) or "none"))))


def _store_and_cluster(now: Scrape) -> Section:
    buckets, n, _ = now.histogram(store_m.STORE_PERSIST_SECONDS)
    codes: dict[str, float] = {}
    for labels, v in now.samples.get(kube_m.KUBE_REQUESTS, {}).items():
        code = dict(labels).get("code", "")
        codes[code] = codes.get(code, 0.0) + v
    return Section("Store, cluster, Harness", (), (
        Row(("persists", f"{count(n)}, p99 {seconds(quantile(buckets, n, 0.99))}, "
                         f"failed {count(now.value(store_m.STORE_PERSIST_FAILURES))}")),
        Row(("rows", _nonzero(now.by(store_m.STORE_ROWS, "status")) or "none")),
        Row(("writes in flight", f"{count(now.value(kube_m.KUBE_WRITES_IN_FLIGHT))} of "
                                 f"{count(now.value(kube_m.KUBE_WRITE_CAP))}, "
                                 f"{count(now.value(kube_m.KUBE_WRITES_WAITING))} waiting")),
        Row(("API requests", _nonzero(codes) or "none")),
        Row(("admissions", _nonzero(now.by(harness_m.HARNESS_ADMISSIONS, "outcome")) or "none")),
        Row(("memory-kill reads", _nonzero(now.by(harness_m.HARNESS_MEMORY_KILL_READS, "outcome")) or "none")),
        Row(("notices told", _nonzero(now.by(run_m.HARNESS_NOTICES, "kind")) or "none"))))


def _nonzero(values: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:,.0f}" for k, v in sorted(values.items(), key=lambda kv: (-kv[1], kv[0])) if v)


def states_of(lines: Iterable[Mapping[str, Any] | bytes]) -> dict[str, float]:
    """Live runs by workflow state, from the run table's listing lines (a document, or its JSON encoded)."""
    states: dict[str, float] = {}
    for line in lines:
        doc = json.loads(line) if isinstance(line, bytes) else line
        state = str(doc.get("state", "?")) if isinstance(doc, Mapping) else "?"
        states[state] = states.get(state, 0.0) + 1
    return states
