"""`jr2-actors top`'s view (commands/top.py has its flags): one `/metrics` scrape read, its sections
(console/top.py, shared with the Console) rendered with `rich`.
It loads only when `top` runs, with `rich`, requests and prometheus_client."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

import requests
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from jr2_actors.api.app import METRICS_PATH
from jr2_actors.commands.common import EXIT_INTERRUPTED, UsageError, interruptible, secret_from
from jr2_actors.commands.top import PLAIN_WIDTH, TIMEOUT
from jr2_actors.console.top import NotMetrics, Scrape, Section, sections
from jr2_actors.console.top import states_of as runs_by_state

RUNS_PATH = "/runs"  # the live runs, behind the token (api/app.py's ROUTES)


def fetch(session: requests.Session, url: str, token: str = "") -> Scrape:
    """One scrape of `/metrics`; with a token, the live runs by state from `GET /runs` beside it."""
    scrape = _scrape(_get(session, url).text)
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


def _scrape(text: str) -> Scrape:
    try:
        return Scrape.parse(text, time.monotonic())
    except NotMetrics as e:
        raise UsageError(str(e)) from None


def states_of(body: bytes) -> dict[str, float]:
    """`GET /runs`'s answer (CONTRACTS.md §4: `{"runs": [listing line, …]}`) as live runs by state."""
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise UsageError(f"GET /runs answered what is not JSON ({e})") from None
    listed = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(listed, list) or not all(isinstance(r, dict) for r in listed):
        raise UsageError("GET /runs answered what is not a list of runs")
    return runs_by_state(listed)


# -- the view: the sections console/top.py reads off the scrapes, as rich tables -----------------------

def render(now: Scrape, before: Scrape | None = None, *, server: str = "", problem: str = "") -> Group:
    parts: list[Table | Text] = []
    title = f"jr2 orchestrator {server}".rstrip() + f" — {time.strftime('%H:%M:%S')}"
    parts.append(Text(title, style="bold"))
    if problem:
        parts.append(Text(f"last refresh failed: {problem} (showing the one before)", style="red"))
    parts.extend(_table(section) for section in sections(now, before))
    return Group(*parts)


def _table(section: Section) -> Table:
    table = Table(title=section.title, title_justify="left", show_header=bool(section.headers))
    for i, header in enumerate(section.headers or ("what", "value")):
        table.add_column(header, justify="right" if section.headers and i and header != "name" else "left")
    for row in section.rows:
        if section.headers:
            table.add_row(*row.cells, style="bold red" if row.alert else None)
        else:  # `what: value`: the value alone is coloured, as a state
            style = "red bold" if row.alert else "green" if row.good else ""
            table.add_row(row.cells[0], Text(row.cells[1], style=style))
    return table


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

    def scrape_now() -> Scrape:  # on a thread of its own: a server that never answers never holds Ctrl-C
        return interruptible(lambda: fetch(session, url, token), stop)

    try:
        scrape = scrape_now()
        if args.once:
            console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else PLAIN_WIDTH)
            console.print(render(scrape, server=args.server))
            return 0
        before: Scrape | None = None
        with Live(render(scrape, server=args.server), console=Console(), auto_refresh=False) as live:
            while not stop.wait(args.interval):
                try:
                    before, scrape = scrape, scrape_now()
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
