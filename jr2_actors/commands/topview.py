"""`jr2-actors top`'s view (commands/top.py has its flags): one `/metrics` scrape read, and rendered with `rich`.
It loads only when `top` runs, with `rich`, requests and prometheus_client (issue 19 item 8)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import requests
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from jr2_actors.api.app import METRICS_PATH
from jr2_actors.commands.common import EXIT_INTERRUPTED, UsageError, secret_from
from jr2_actors.commands.top import PLAIN_WIDTH, TIMEOUT
from jr2_actors.harness import metrics as harness_m
from jr2_actors.kube import metrics as kube_m
from jr2_actors.run import metrics as run_m
from jr2_actors.run.render import duration
from jr2_actors.shell import metrics as shell_m
from jr2_actors.store import metrics as store_m
from jr2_actors.watch import metrics as watch_m
from jr2_actors.workspace import metrics as workspace_m

Labels = tuple[tuple[str, str], ...]
RUNS_PATH = "/runs"  # the live runs, behind the token (api/app.py's ROUTES)


# -- one scrape --------------------------------------------------------------------------------------

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
            raise UsageError(f"the answer is not Prometheus text ({e})") from None
        if not any(name.startswith("jr2_") for name in scrape.samples):
            raise UsageError("the answer holds no jr2 metrics: is this a jr2 orchestrator?")
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


def quantile(buckets: list[tuple[float, float]], count: float, q: float) -> float | None:
    """The upper bound of the bucket the q-quantile falls in (what a histogram can say), None when empty."""
    if count <= 0:
        return None
    for bound, cumulative in buckets:
        if cumulative >= q * count:
            return bound
    return float("inf")


def fetch(session: requests.Session, url: str, token: str = "") -> Scrape:
    """One scrape of `/metrics`; with a token, the live runs by state from `GET /runs` beside it."""
    scrape = Scrape.parse(_get(session, url).text, time.monotonic())
    if token:
        scrape.states = states_of(_get(session, runs_url(url), token).content)
    return scrape


def _get(session: requests.Session, url: str, token: str = "") -> requests.Response:
    try:
        resp = session.get(url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"} if token else {})
    except requests.exceptions.RequestException as e:
        raise UsageError(f"cannot reach {url}: {_why(e)}") from None
    if resp.status_code == 401:
        raise UsageError(f"{url} refused the token (check $JR2_INSTANCE_TOKEN or --token-file)")
    if resp.status_code != 200:
        raise UsageError(f"{url} answered {resp.status_code}")
    return resp


def states_of(body: bytes) -> dict[str, float]:
    """`GET /runs`'s answer (CONTRACTS.md §4: `{"runs": [listing line, …]}`) as live runs by state."""
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise UsageError(f"GET /runs answered what is not JSON ({e})") from None
    listed = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(listed, list) or not all(isinstance(r, dict) for r in listed):
        raise UsageError("GET /runs answered what is not a list of runs")
    states: dict[str, float] = {}
    for r in listed:
        state = str(r.get("state", "?"))
        states[state] = states.get(state, 0.0) + 1
    return states


# -- the view ----------------------------------------------------------------------------------------

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


def render(now: Scrape, before: Scrape | None = None, *, server: str = "", problem: str = "") -> Group:
    parts: list[Table | Text] = []
    title = f"jr2 orchestrator {server}".rstrip() + f" — {time.strftime('%H:%M:%S')}"
    parts.append(Text(title, style="bold"))
    if problem:
        parts.append(Text(f"last refresh failed: {problem} (showing the one before)", style="red"))
    parts.append(_actors(now, before))
    busiest = _busiest(now)
    if busiest is not None:
        parts.append(busiest)
    parts.append(_watch(now))
    parts.append(_runs(now))
    parts.append(_store_and_cluster(now))
    return Group(*parts)


def _rate(now: Scrape, before: Scrape | None, metric: str, /, **labels: str) -> str:
    if before is None or now.at <= before.at:
        return ""
    a, b = before.value(metric, **labels), now.value(metric, **labels)
    if a is None or b is None or b < a:
        return ""
    return f"{(b - a) / (now.at - before.at):,.1f}/s"


def _actors(now: Scrape, before: Scrape | None) -> Table:
    table = Table(title="Actors, by mailbox depth", title_justify="left", expand=False)
    headers = ["kind", "live", "depth", "max", "high water", "oldest message", "processed", "rate", "failures",
               "mean", "p99"]
    if before is None:
        headers.remove("rate")  # a rate needs two scrapes
    for header in headers:
        table.add_column(header, justify="left" if header == "kind" else "right")
    kinds = now.by(shell_m.ACTOR_INSTANCES, "kind")
    rows = []
    for kind in kinds:
        buckets, n, total = now.histogram(shell_m.ACTOR_PROCESSING_SECONDS, kind=kind)
        rows.append((now.value(shell_m.ACTOR_MAILBOX_DEPTH, kind=kind) or 0.0,
                     now.value(shell_m.ACTOR_OLDEST_MESSAGE_AGE, kind=kind) or 0.0, kind, buckets, n, total))
    processed = shell_m.ACTOR_MESSAGES_PROCESSED
    for depth, oldest, kind, buckets, n, total in sorted(rows, key=lambda r: (-r[0], -r[1], r[2])):
        cells = [kind, count(kinds[kind]), count(depth), count(now.value(shell_m.ACTOR_MAILBOX_DEPTH_MAX, kind=kind)),
                 count(now.value(shell_m.ACTOR_MAILBOX_HIGH_WATER, kind=kind)), seconds(oldest) if depth else "–",
                 count(now.value(processed, kind=kind)), _rate(now, before, processed, kind=kind),
                 count(now.value(shell_m.ACTOR_MESSAGE_FAILURES, kind=kind)),
                 seconds(total / n) if n else "–", seconds(quantile(buckets, n, 0.99))]
        if before is None:
            del cells[7]
        table.add_row(*cells, style="bold red" if depth else None)
    if not rows:
        table.add_row("(no actors yet)", *[""] * (len(headers) - 1))
    return table


def _busiest(now: Scrape) -> Table | None:
    depths = now.samples.get(shell_m.ACTOR_BUSIEST_DEPTH, {})
    if not depths:
        return None
    table = Table(title="Busiest actors", title_justify="left")
    for header in ("kind", "name", "depth", "oldest message"):
        table.add_column(header, justify="right" if header in ("depth", "oldest message") else "left")
    for labels, depth in sorted(depths.items(), key=lambda kv: -kv[1]):
        d = dict(labels)
        table.add_row(d.get("kind", ""), d.get("name", ""), count(depth),
                      seconds(now.value(shell_m.ACTOR_BUSIEST_AGE, **d)))
    return table


def _watch(now: Scrape) -> Table:
    table = Table(title="Sandbox watch", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    phases = now.by(watch_m.WATCH_PHASE, "phase")
    phase = next((p for p, v in phases.items() if v == 1), None)
    if phase is None:
        table.add_row("state", "not started")
        return table
    degraded = now.value(watch_m.WATCH_DEGRADED) == 1
    table.add_row("state", Text(f"{phase}, DEGRADED (blind, re-listing)" if degraded else f"{phase}, up",
                                style="red bold" if degraded else "green"))
    table.add_row("failures in a row", count(now.value(watch_m.WATCH_FAILURES)))
    table.add_row("last frame", f"{seconds(now.value(watch_m.WATCH_LAST_FRAME_AGE))} ago")
    table.add_row("resume version age", seconds(now.value(watch_m.WATCH_VERSION_AGE)))
    table.add_row("Sandboxes", f"{count(now.value(watch_m.WATCH_TRACKED))} followed, "
                               f"{count(now.value(watch_m.WATCH_WAITERS))} with a recipient")
    table.add_row("reconnects", count(now.value(watch_m.WATCH_RECONNECTS)))
    table.add_row("re-lists", _nonzero(now.by(watch_m.WATCH_RELISTS, "cause")) or "none")
    table.add_row("events", _nonzero(now.by(watch_m.WATCH_EVENTS, "type")) or "none")
    buckets, n, _ = now.histogram(workspace_m.WATCH_DELIVERY_LATENCY)
    table.add_row("delivery latency", f"p50 {seconds(quantile(buckets, n, 0.5))}, "
                                      f"p99 {seconds(quantile(buckets, n, 0.99))} ({count(n)} measured)"
                  if n else "– (the server stamps no writes)")
    return table


def _runs(now: Scrape) -> Table:
    table = Table(title="Runs and their waits", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    live, states = now.value(run_m.RUNS_LIVE), now.states
    by_state = "" if states is None else f" — {_nonzero(states)}" if states else ""
    table.add_row("live runs", f"{count(live)}{by_state}")
    table.add_row("Workspaces", _nonzero(now.by(run_m.WORKSPACES, "phase")) or "none")
    waits: dict[str, dict[str, float]] = {}  # on → reason → open waits
    for labels, n in now.samples.get(run_m.RUN_WAITS_OPEN, {}).items():
        d = dict(labels)
        if n and "on" in d:
            waits.setdefault(d["on"], {})[d.get("reason", "")] = n
    open_waits = [f"{int(sum(by.values()))} waiting on {on}: {_nonzero(by)} (the oldest for "
                  f"{seconds(now.value(run_m.RUN_WAIT_OLDEST, on=on))})" for on, by in sorted(waits.items())]
    table.add_row("open waits", "; ".join(open_waits) or "none")
    return table


def _store_and_cluster(now: Scrape) -> Table:
    table = Table(title="Store, cluster, Harness", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    buckets, n, _ = now.histogram(store_m.STORE_PERSIST_SECONDS)
    table.add_row("persists", f"{count(n)}, p99 {seconds(quantile(buckets, n, 0.99))}, "
                              f"failed {count(now.value(store_m.STORE_PERSIST_FAILURES))}")
    table.add_row("rows", _nonzero(now.by(store_m.STORE_ROWS, "status")) or "none")
    table.add_row("writes in flight", f"{count(now.value(kube_m.KUBE_WRITES_IN_FLIGHT))} of "
                                      f"{count(now.value(kube_m.KUBE_WRITE_CAP))}, "
                                      f"{count(now.value(kube_m.KUBE_WRITES_WAITING))} waiting")
    codes: dict[str, float] = {}
    for labels, v in now.samples.get(kube_m.KUBE_REQUESTS, {}).items():
        code = dict(labels).get("code", "")
        codes[code] = codes.get(code, 0.0) + v
    table.add_row("API requests", _nonzero(codes) or "none")
    table.add_row("admissions", _nonzero(now.by(harness_m.HARNESS_ADMISSIONS, "outcome")) or "none")
    table.add_row("memory-kill reads", _nonzero(now.by(harness_m.HARNESS_MEMORY_KILL_READS, "outcome")) or "none")
    table.add_row("notices told", _nonzero(now.by(run_m.HARNESS_NOTICES, "kind")) or "none")
    return table


def _nonzero(values: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:,.0f}" for k, v in sorted(values.items(), key=lambda kv: (-kv[1], kv[0])) if v)


# -- the command -------------------------------------------------------------------------------------

def metrics_url(server: str) -> str:
    if not server.startswith(("http://", "https://")):
        raise UsageError(f"--server {server}: not an http(s) URL")
    return server.rstrip("/") + METRICS_PATH


def runs_url(metrics: str) -> str:
    return metrics.removesuffix(METRICS_PATH) + RUNS_PATH


def token_of(args: argparse.Namespace) -> str:
    """The Instance token when one is given (`--token-file`, else `$JR2_INSTANCE_TOKEN`), else ""."""
    if not args.token_file and not os.environ.get("JR2_INSTANCE_TOKEN", "").strip():
        return ""
    return secret_from("JR2_INSTANCE_TOKEN", args.token_file, "the Instance token").decode("utf-8", "replace")


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    url = metrics_url(args.server)
    token = token_of(args)
    session = requests.Session()
    session.trust_env = False
    try:
        scrape = fetch(session, url, token)
        if args.once:
            console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else PLAIN_WIDTH)
            console.print(render(scrape, server=args.server))
            return 0
        before: Scrape | None = None
        with Live(render(scrape, server=args.server), console=Console(), auto_refresh=False) as live:
            while not stop.wait(args.interval):
                try:
                    before, scrape = scrape, fetch(session, url, token)
                    live.update(render(scrape, before, server=args.server), refresh=True)
                except UsageError as e:
                    live.update(render(scrape, before, server=args.server, problem=str(e)), refresh=True)
        return EXIT_INTERRUPTED  # it runs until Ctrl-C, which ends every command with 130
    finally:
        session.close()


def _why(e: requests.exceptions.RequestException) -> str:
    """What went wrong, in a few words (requests' own text runs to several lines of pool internals)."""
    text = str(e)
    if isinstance(e, requests.exceptions.ConnectTimeout | requests.exceptions.ReadTimeout):
        return "no answer in time"
    if "Connection refused" in text:
        return "connection refused (is the orchestrator serving there?)"
    if "NameResolutionError" in text or "Name or service not known" in text:
        return "the host name does not resolve"
    if isinstance(e, requests.exceptions.SSLError):
        return "TLS failed"
    return type(e).__name__
