"""The Console's answers, served by `serve` on the API's port (`api/app.py` routes `/` and `/console…` here).

- `GET /` → the Console (302 to `/console/`); `GET /console/` its page, `console.js` and `console.css`:
  package data (`console/static/`), nothing from another origin — many clusters have no internet.
- `GET /console/graph/{run}` → the run's workflow graph laid out (`console/core.py`), behind the Instance
  token as the document it is drawn from is (`GET /runs/{id}/workflow`).
- `GET /console/top` → what `jr2-actors top` shows (`console/top.py`), read off `/metrics`, with the live runs
  by workflow state from the run table (behind the token, as `GET /runs` is: `/metrics` holds no author's words).

The page asks for the token once and keeps it in the tab's sessionStorage; it sends it as a bearer header on
each call (the feed too: read with fetch(), as EventSource cannot send one), never in a URL or a cookie.
Every answer here carries a Content-Security-Policy that lets the page load only its own script and style,
and connect only to its own origin; the script writes every text from a run as text (`textContent`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from jr2_actors.console.core import layout
from jr2_actors.console.top import NotMetrics, Scrape, sections, states_of
from jr2_actors.values.workflow import WorkflowError, parse_workflow

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SAFE_HEADERS = [("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"),
                ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"),
                ("Cross-Origin-Opener-Policy", "same-origin"), ("Cache-Control", "no-store")]
ASSETS = {"": ("index.html", "text/html; charset=utf-8"),
          "console.js": ("console.js", "text/javascript; charset=utf-8"),
          "console.css": ("console.css", "text/css; charset=utf-8")}
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # as api/app.py's
RATE_MIN_SECONDS = 1.0  # the scrape rates are measured from is replaced at most this often (tabs share it)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class Console:
    def __init__(self, *, document: Callable[[str], dict[str, Any] | None], metrics: Callable[[], str],
                 runs: Callable[[], Sequence[Mapping[str, Any] | bytes]]) -> None:
        self._document = document
        self._metrics = metrics
        self._runs = runs
        self._assets: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._before: Scrape | None = None  # the last scrape, for the rates (any tab's: the server has one)

    def answer(self, path: str, authorize: Callable[[], None]) -> Answer:
        """`path` is under `/console` (or `/`); `authorize` raises when the request's token is not the
        Instance's."""
        if path in ("/", "/console"):
            return Answer(302, [("Location", "/console/"), ("Content-Length", "0"), *SAFE_HEADERS], b"")
        rest = path.removeprefix("/console/")
        if rest in ASSETS:
            name, ctype = ASSETS[rest]
            return _answer(200, ctype, self._asset(name))
        if rest == "top":  # behind the token: it counts the live runs by their workflows' states
            authorize()
            return self._top()
        if rest.startswith("graph/") and _RUN_ID.fullmatch(rest[6:]):
            authorize()
            return self._graph(rest[6:])
        return _json(404, {"error": "not found"})

    def _asset(self, name: str) -> bytes:
        with self._lock:
            if name not in self._assets:
                self._assets[name] = resources.files("jr2_actors.console").joinpath("static", name).read_bytes()
            return self._assets[name]

    def _graph(self, run: str) -> Answer:
        document = self._document(run)
        if document is None:
            return _json(404, {"error": f"no run {run}"})
        try:
            workflow = parse_workflow(document)
        except WorkflowError as e:  # the run was taken with it, so only a rule made stricter since
            return _json(422, {"error": f"its workflow cannot be drawn: {e}"})
        return _json(200, {"workflow": workflow.name, **layout(workflow).doc()})

    def _top(self) -> Answer:
        try:
            now = Scrape.parse(self._metrics(), time.monotonic())
        except NotMetrics as e:
            return _json(503, {"error": str(e)})
        now.states = states_of(self._runs())
        with self._lock:
            before = self._before
            if before is None or now.at - before.at >= RATE_MIN_SECONDS:
                self._before = now
        return _json(200, {"sections": [s.doc() for s in sections(now, before)]})


def _answer(status: int, ctype: str, body: bytes) -> Answer:
    return Answer(status, [("Content-Type", ctype), ("Content-Length", str(len(body))), *SAFE_HEADERS], body)


def _json(status: int, doc: Any) -> Answer:
    return _answer(status, "application/json", json.dumps(doc, separators=(",", ":")).encode())
