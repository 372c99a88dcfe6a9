"""The Console without a browser: the graph's layout (a pure core), its answers on the API's port (the page, its
script and style from the package, each with a strict Content-Security-Policy; the graph behind the token; what
`top` shows), and the page's own files held to their rules (no markup from data, nothing inline, no outside
origin). The browser tests are test_console_browser.py."""

from __future__ import annotations

import configparser
import json
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import requests

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiServer
from jr2_actors.console.core import Layout, Node, columns, layout
from jr2_actors.console.http import CSP
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.workflow import edges, parse_workflow, read_document
from tests.support.backends import QuietBackend

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "jr2_actors" / "examples" / "fix-and-review.yaml"
TOKEN = "console-unit-token-0123456789"
STATIC = resources.files("jr2_actors.console").joinpath("static")


def _layout(doc: Any) -> Layout:
    return layout(parse_workflow(doc))


def _chain(n: int) -> dict[str, Any]:
    states: dict[str, Any] = {f"s{i}": {"after": {"seconds": 1, "to": f"s{i + 1}"}} for i in range(n - 1)}
    states[f"s{n - 1}"] = {"final": "done"}
    return {"name": "chain", "start": "s0", "states": states}


def _boxes_overlap(a: Node, b: Node) -> bool:
    return a.x < b.x + b.width and b.x < a.x + a.width and a.y < b.y + b.height and b.y < a.y + a.height


# -- the layout --------------------------------------------------------------------------------------

def test_the_example_is_laid_out_left_to_right_from_start_each_state_once_none_overlapping() -> None:
    workflow = parse_workflow(read_document(EXAMPLE.read_text()))
    drawn = layout(workflow)
    nodes = {n.name: n for n in drawn.nodes}
    assert set(nodes) == set(workflow.states) and len(drawn.nodes) == len(workflow.states)
    assert nodes["code"].start and not nodes["review"].start
    assert nodes["done"].final == "done" and nodes["code"].holds == ("F-1",)
    assert nodes["code"].x < nodes["review"].x < nodes["done"].x  # a column per step from start
    for a in drawn.nodes:
        assert a.x > 0 and a.x + a.width < drawn.width and a.y > 0 and a.y + a.height < drawn.height
        assert all(a is b or not _boxes_overlap(a, b) for b in drawn.nodes)
    ways = sorted((e.source, e.label, e.target) for e in drawn.edges)
    assert ways == sorted((name, label, target) for name, state in workflow.states.items()
                          for label, target in edges(state))  # every way out, as `graph` draws them
    assert layout(workflow) == drawn  # the same document, the same drawing


def test_a_way_forward_runs_right_a_way_back_bends_and_a_way_to_itself_loops_over() -> None:
    drawn = _layout({"name": "w", "start": "a", "states": {
        "a": {"after": {"seconds": 5, "to": "b"}},
        "b": {"after": {"seconds": 5, "to": "c"}},
        "c": {"turn": {"agent": "x", "prompt": "p"}, "on": {"again": "a", "stay": "c", "end": "d"}},
        "d": {"final": "done"}}, "agents": {"x": {"instructions": "i", "access": "none"}}})
    nodes = {n.name: n for n in drawn.nodes}
    by = {e.label: e for e in drawn.edges}

    def ends(path: str) -> tuple[float, float, float, float]:
        numbers = [float(v) for v in re.findall(r"-?[0-9]+(?:\.[0-9]+)?", path)]
        return numbers[0], numbers[1], numbers[-2], numbers[-1]

    x1, _, x2, _ = ends(by["after 5s"].path)
    assert x1 <= x2  # forward: out of the right side, into the left
    bx1, by1, bx2, _ = ends(by["again"].path)  # back from c to a: out of c, into a, past the states between
    assert bx1 == pytest.approx(nodes["c"].x + nodes["c"].width / 2)
    assert bx2 == pytest.approx(nodes["a"].x + nodes["a"].width / 2)
    assert by1 in (nodes["c"].y, nodes["c"].y + nodes["c"].height)
    lx1, ly1, lx2, ly2 = ends(by["stay"].path)
    assert ly1 == ly2 == nodes["c"].y and nodes["c"].x < lx2 < lx1 < nodes["c"].x + nodes["c"].width
    assert by["stay"].label_y < nodes["c"].y  # its label over it
    assert all(e.label_y > 0 for e in drawn.edges)


def test_columns_are_distances_from_start_and_what_nothing_reaches_stands_last() -> None:
    ways = {"a": [("x", "b"), ("y", "c")], "b": [("z", "c")], "c": [], "lost": [("w", "a")]}
    assert columns("a", ways) == [["a"], ["b", "c"], ["lost"]]
    assert columns("a", {"a": []}) == [["a"]]


def test_a_workflow_at_the_bound_of_states_is_laid_out() -> None:
    drawn = _layout(_chain(256))  # MAX_WORKFLOW_STATES
    assert len(drawn.nodes) == 256 and len(drawn.edges) == 255
    assert [n.name for n in sorted(drawn.nodes, key=lambda n: n.x)] == [f"s{i}" for i in range(256)]


def test_names_are_data_to_the_layout_whatever_they_hold() -> None:
    hostile = "<script>alert(1)</script>"
    drawn = _layout({"name": "w", "start": hostile, "states": {hostile: {"after": {"seconds": 1, "to": "e\"nd"}},
                                                                "e\"nd": {"final": "failed"}}})
    doc = json.loads(json.dumps(drawn.doc()))
    assert [n["name"] for n in doc["nodes"]] == [hostile, 'e"nd']
    assert doc["edges"][0]["from"] == hostile and doc["edges"][0]["to"] == 'e"nd'
    assert all(set(e["path"]) <= set("MC0123456789.,- ") for e in doc["edges"])  # numbers only, never a name


# -- its answers -------------------------------------------------------------------------------------

class _Backend(QuietBackend):
    def __init__(self, metrics: str = "") -> None:
        self.exposition = metrics

    def document(self, run_id: str) -> dict[str, Any] | None:
        return read_document(EXAMPLE.read_text()) if run_id == "r-1" else None  # type: ignore[return-value]

    def metrics(self) -> str:
        return self.exposition

    def runs_encoded(self, prefix: str = "") -> list[dict[str, Any]]:
        return [{"runId": "r-1", "state": "review"}]


@pytest.fixture
def served() -> Iterator[tuple[str, _Backend]]:
    backend = _Backend(Telemetry(clock=VirtualClock()).exposition().decode())
    server = ApiServer(Api(backend, TOKEN))
    server.start()
    try:
        yield server.url, backend
    finally:
        server.stop()


def _get(url: str, token: str | None = None, **kw: Any) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(url, headers=headers, allow_redirects=False, timeout=10, **kw)


def test_the_console_is_served_from_the_package_with_a_strict_policy(served: tuple[str, _Backend]) -> None:
    url, _ = served
    root = _get(f"{url}/")
    assert root.status_code == 302 and root.headers["Location"] == "/console/"
    for path, ctype, name in (("/console/", "text/html", "index.html"), ("/console/console.js", "text/javascript",
                              "console.js"), ("/console/console.css", "text/css", "console.css")):
        resp = _get(url + path)
        assert resp.status_code == 200 and resp.headers["Content-Type"].startswith(ctype), path
        assert resp.content == STATIC.joinpath(name).read_bytes()
        assert resp.headers["Content-Security-Policy"] == CSP and resp.headers["X-Content-Type-Options"] == "nosniff"
        assert "Set-Cookie" not in resp.headers
    assert "default-src 'none'" in CSP and "script-src 'self';" in CSP and "style-src 'self';" in CSP
    assert "unsafe" not in CSP and "http" not in CSP and "frame-ancestors 'none'" in CSP
    for path in ("/console/nothing", "/console/static/console.js", "/console/..%2f..%2fsetup.cfg", "/console/graph/",
                 "/console/index.html/"):
        resp = _get(url + path)
        assert resp.status_code == 404 and resp.headers["Content-Security-Policy"] == CSP, path
    assert requests.post(f"{url}/console/", timeout=10).status_code == 405


def test_the_graph_is_behind_the_token_and_is_the_runs_own(served: tuple[str, _Backend]) -> None:
    url, _ = served
    assert _get(f"{url}/console/graph/r-1").status_code == 401
    assert _get(f"{url}/console/graph/r-1", "wrong-token-0123456789").status_code == 401
    assert _get(f"{url}/console/graph/r-2", TOKEN).status_code == 404
    assert _get(f"{url}/console/graph/%3Cscript%3E", TOKEN).status_code == 404
    doc = _get(f"{url}/console/graph/r-1", TOKEN).json()
    assert doc["workflow"] == "fix-and-review" and doc == {"workflow": "fix-and-review",
                                                           **layout(parse_workflow(read_document(EXAMPLE.read_text()))).doc()}


def test_the_orchestrator_page_reads_what_top_shows_off_metrics(served: tuple[str, _Backend]) -> None:
    url, backend = served
    assert _get(f"{url}/console/top").status_code == 401  # it counts the runs by their authors' state names
    resp = _get(f"{url}/console/top", TOKEN)
    assert resp.status_code == 200 and resp.headers["Content-Security-Policy"] == CSP
    titles = [s["title"] for s in resp.json()["sections"]]
    assert titles == ["Actors, by mailbox depth", "Sandbox watch", "Runs and their waits", "Store, cluster, Harness"]
    runs = next(s for s in resp.json()["sections"] if s["title"] == "Runs and their waits")
    assert any("live runs" in row["cells"][0] and "review 1" in row["cells"][1] for row in runs["rows"]), runs
    backend.exposition = "<html>not metrics</html>"
    refused = _get(f"{url}/console/top", TOKEN)
    assert refused.status_code == 503 and "not Prometheus text" in refused.json()["error"]


# -- the page's own files ------------------------------------------------------------------------------

def test_the_script_never_writes_markup_keeps_the_token_in_the_tab_and_calls_only_its_origin() -> None:
    script = STATIC.joinpath("console.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "setTimeout('", "localStorage", "document.cookie", "new EventSource", "console.log"):
        assert sink not in script, sink
    assert "sessionStorage" in script and "'Authorization'" not in script.replace("Authorization: ", "")
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", script)  # the SVG namespace is a name, not a fetch


def test_the_page_has_nothing_inline_and_nothing_from_elsewhere() -> None:
    page = STATIC.joinpath("index.html").read_text()
    assert re.findall(r"<script\b[^>]*>", page) == ['<script src="/console/console.js" defer>']
    assert "<style" not in page and " style=" not in page and not re.search(r"\son[a-z]+=", page)
    for name in ("index.html", "console.css"):
        assert not re.search(r"(https?:)?//[a-z]", STATIC.joinpath(name).read_text()), name


def test_a_non_editable_install_has_the_pages() -> None:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    data = setup["options.package_data"]["jr2_actors.console"]
    assert "static/*" in [p.strip() for p in data.split(",")]
    assert sorted(p.name for p in STATIC.iterdir()) == ["console.css", "console.js", "index.html"]
