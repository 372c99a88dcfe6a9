"""The Console in a real browser (Debian's chromium, headless, driven by Playwright) against `serve
--fake-cluster` as a process: the runs list updates as a run is submitted; a run's page lights `placing`
while its Workspace waits for capacity and moves on once it is placed (ADR-0064); cancel; resubmit; the feed
survives a restart of `serve`; the token stays in the tab; every text from a run (a state's, an agent's or a
workflow's name, the scheduler's words, what an agent said) is shown as text and no script runs; the
orchestrator page shows what `top` shows. The pages' screenshots are saved (`shots`). Without chromium or
playwright every test here skips, with one line."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiServer
from jr2_actors.run.feed.hub import FeedRead
from jr2_actors.run.feed.lines import FeedEvent, SaidLine, StartedLine, TurnFaultLine, TurnLine
from jr2_actors.values.timefmt import rfc3339_ms
from jr2_actors.values.workflow import read_document
from tests.support.api_on_fake import api_on_fake
from tests.support.console_browser import CHROMIUM, TOKEN, Serve, browser_missing, open_console
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]
MISSING = browser_missing()
if MISSING and os.environ.get("CI") != "true":  # in CI (.ci/run installs it) a missing browser fails instead
    pytest.skip(f"browser tests: {MISSING}", allow_module_level=True)

# Two 4-CPU Workspaces fill both of the fake cluster's 4-CPU nodes, for an hour unless cancelled.
HOG = """
name: hog
workspaces:
  H-1: {size: {cpu: "4", memory: "1Gi"}}
  H-2: {size: {cpu: "4", memory: "1Gi"}}
start: hold
states:
  hold:
    holds: [H-1, H-2]
    after: {seconds: 3600, to: done}
  done: {final: done}
"""
# A 3-CPU Workspace: no node has room while the hog holds them.
WAITER = """
name: waiter
workspaces:
  W-1: {size: {cpu: "3", memory: "1Gi"}}
agents:
  worker: {instructions: "You work.", workspace: W-1, access: write}
start: work
states:
  work:
    holds: [W-1]
    turn: {agent: worker, prompt: "Work."}
    on: {finish: done, retry: work}
  done: {final: done}
"""
QUICK = """
name: quick
workspaces:
  Q-1: {size: {cpu: "1", memory: "1Gi"}}
agents:
  coder: {instructions: "You fix bugs.", workspace: Q-1, access: write}
start: code
states:
  code:
    holds: [Q-1]
    turn: {agent: coder, prompt: "Fix it."}
    on: {finish: done, dispute: failed}
  done: {final: done}
  failed: {final: failed}
"""
WAIT_MS = 30_000


@pytest.fixture
def browser() -> Iterator[Any]:
    """Per test: conftest ends every process a test started (Playwright's driver too) when the test ends."""
    if MISSING:  # only in CI: elsewhere the module skipped itself
        pytest.fail(f"browser tests in CI: {MISSING} (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh tab whose script errors and dialogs fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    tab = context.new_page()
    tab.problems = []
    tab.on("pageerror", lambda e: tab.problems.append(f"page error: {e}"))
    tab.on("dialog", lambda d: (tab.problems.append(f"a dialog: {d.message}"), d.dismiss()))
    try:
        yield tab
    finally:
        context.close()


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests save their screenshots: a temp folder (JR2_CONSOLE_SHOTS names another, e.g. to
    refresh docs/console/)."""
    chosen = os.environ.get("JR2_CONSOLE_SHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("console-shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder




@pytest.fixture
def serve(tmp_path: Path) -> Any:
    server = Serve(tmp_path / "state").start()
    try:
        yield server
    finally:
        server.stop()


def _status_of(page: Any, run_id: str) -> str:
    return str(page.text_content(f'#runs tr[data-run="{run_id}"] td:nth-child(3)'))


def test_the_runs_list_updates_as_runs_are_submitted_and_filters(page: Any, serve: Serve, shots: Path) -> None:
    open_console(page, serve.url)
    page.wait_for_selector("#runs-count:has-text('0 of 0')", timeout=WAIT_MS)
    quick = serve.submit(QUICK)
    page.wait_for_selector(f'#runs tr[data-run="{quick}"]', timeout=WAIT_MS)  # no reload: the list follows
    page.wait_for_selector(f'#runs tr[data-run="{quick}"] .badge.done', timeout=WAIT_MS)
    hog = serve.submit(HOG)
    page.wait_for_selector(f'#runs tr[data-run="{hog}"]', timeout=WAIT_MS)
    rows = page.eval_on_selector_all("#runs tbody tr[data-run]", "trs => trs.map(t => t.dataset.run)")
    assert rows == [hog, quick]  # newest first
    assert page.text_content(f'#runs tr[data-run="{hog}"] td:nth-child(2)') == "hog"
    page.select_option("#filter-workflow", "quick")
    page.wait_for_selector(f'#runs tr[data-run="{hog}"]', state="detached")
    assert page.eval_on_selector_all("#runs tbody tr[data-run]", "trs => trs.length") == 1
    page.select_option("#filter-workflow", "")
    page.select_option("#filter-status", "running")
    page.wait_for_selector(f'#runs tr[data-run="{quick}"]', state="detached")
    assert _status_of(page, hog) == "running"
    page.select_option("#filter-status", "")
    page.wait_for_selector(f'#runs tr[data-run="{quick}"]')
    page.screenshot(path=str(shots / "runs.png"), full_page=True)
    assert page.problems == []


def test_a_run_page_lights_placing_then_moves_on_once_placed(page: Any, tmp_path: Path, shots: Path) -> None:
    """In this process (the same Api and listener `serve` builds), so the test holds the cluster's capacity:
    one node too small for the Workspace, then a node that fits it (docs/fake-cluster.md)."""
    from jr2_actors.fake.operator.core import Node

    with api_on_fake(tmp_path, TOKEN, nodes=[Node("small", 2000, 4 * 2**30)],
                     before=lambda c: c.harness(lambda core: core.pick_first_allowed(True))) as (url, cluster, orch):
        waiter = orch.submit(read_document(WAITER), None)
        open_console(page, url)
        # The runs list marks the run whose Workspace waits.
        page.wait_for_selector(f'#runs tr[data-run="{waiter}"] .badge.placing:has-text("W-1")', timeout=WAIT_MS)
        page.screenshot(path=str(shots / "runs-placing.png"))
        page.click(f'#runs tr[data-run="{waiter}"] a')
        # Its graph lights the state it stands in as `placing`, not as a state it runs in.
        page.wait_for_selector('#graph g.node.placing[data-state="work"]', timeout=WAIT_MS)
        assert page.eval_on_selector_all("#graph g.node.current", "gs => gs.length") == 0
        row = page.wait_for_selector('#workspaces tr.placing[data-child="W-1"]', timeout=WAIT_MS)
        assert row is not None
        words = row.text_content() or ""
        assert "node (capacity)" in words and "0/1 nodes are available: 1 Insufficient cpu." in words, words
        page.wait_for_selector("#feed div:has-text('placing')", timeout=WAIT_MS)
        page.screenshot(path=str(shots / "run-placing.png"), full_page=True)

        cluster.add_node(Node("big", 4000, 8 * 2**30))  # room: it is placed, and the run moves on
        page.wait_for_selector("#run-status:has-text('done')", timeout=60_000)
        page.wait_for_selector('#graph g.node.current[data-state="done"]', timeout=WAIT_MS)
        assert page.eval_on_selector_all("#graph g.node.placing", "gs => gs.length") == 0
        assert page.eval_on_selector_all("#graph path.way.taken", "ps => ps.length") == 1  # work → done
        page.wait_for_selector("#feed div:has-text('placed')", timeout=WAIT_MS)
        turns = page.text_content("#turns") or ""
        assert "worker" in turns and "finish → done" in turns
        page.wait_for_selector("#feed-state:has-text('ended')", timeout=WAIT_MS)
        page.screenshot(path=str(shots / "run.png"), full_page=True)
    assert page.problems == []


def test_cancel_from_a_run_page(page: Any, serve: Serve) -> None:
    hog = serve.submit(HOG)
    open_console(page, serve.url, f"#/run/{hog}")
    page.wait_for_selector('#graph g.node.current[data-state="hold"]', timeout=WAIT_MS)
    page.wait_for_selector("#run-status:has-text('running')", timeout=WAIT_MS)
    page.click("#cancel")
    page.wait_for_selector("#run-status:has-text('cancelled')", timeout=WAIT_MS)
    assert serve.status(hog)["status"] == "cancelled"
    assert page.is_disabled("#cancel")
    page.wait_for_selector("#feed-state:has-text('ended')", timeout=WAIT_MS)
    assert page.problems == []


def test_resubmit_starts_a_new_run_of_the_same_document(page: Any, serve: Serve) -> None:
    quick = serve.submit(QUICK)
    wait_until(lambda: serve.status(quick)["status"] == "done", 60, "the run to end")
    open_console(page, serve.url, f"#/run/{quick}")
    page.wait_for_selector("#run-status:has-text('done')", timeout=WAIT_MS)
    page.click("#resubmit")
    page.wait_for_function("id => location.hash.startsWith('#/run/') && !location.hash.endsWith(id)", arg=quick,
                           timeout=WAIT_MS)
    again = page.evaluate("decodeURIComponent(location.hash.slice(6))")
    assert again != quick and serve.status(again)["workflow"] == "quick"
    page.wait_for_selector("#run-workflow:has-text('quick')", timeout=WAIT_MS)


def test_the_feed_resumes_after_serve_restarts(page: Any, serve: Serve) -> None:
    hog = serve.submit(HOG)
    wait_until(lambda: [c["phase"] for c in serve.status(hog)["children"]] == ["running", "running"], 60, "the hog")
    open_console(page, serve.url, f"#/run/{hog}")
    page.wait_for_selector("#feed-state:has-text('live')", timeout=WAIT_MS)
    page.wait_for_selector("#feed div:has-text('running')", timeout=WAIT_MS)
    before = page.eval_on_selector_all("#feed div[data-id]", "ds => ds.map(d => Number(d.dataset.id))")
    serve.stop()
    page.wait_for_selector("#feed-state:has-text('reconnecting')", timeout=WAIT_MS)
    serve.start()  # the same port, state folder and token: the run is restored (its fake cluster is new)
    page.wait_for_function(f"() => [...document.querySelectorAll('#feed div[data-id]')].length > {len(before)}",
                           timeout=60_000)
    after = page.eval_on_selector_all("#feed div[data-id]", "ds => ds.map(d => Number(d.dataset.id))")
    assert after[:len(before)] == before
    assert after == sorted(set(after)), after  # resumed after its last line: none twice, none out of order
    assert after[len(before)] > before[-1]
    assert page.problems == []


def test_the_orchestrator_page_shows_what_top_shows_live(page: Any, serve: Serve, shots: Path) -> None:
    serve.submit(HOG)
    open_console(page, serve.url, "#/orchestrator")
    page.wait_for_selector('#top table[data-section="Actors, by mailbox depth"] td:has-text("RunActor")',
                           timeout=WAIT_MS)
    page.wait_for_selector('#top table[data-section="Sandbox watch"] td.good:has-text("watching, up")',
                           timeout=WAIT_MS)
    page.wait_for_selector('#top table[data-section="Runs and their waits"] td:has-text("hold 1")', timeout=WAIT_MS)
    serve.submit(WAITER)  # live: its wait shows without a reload, by reason
    page.wait_for_selector('#top table[data-section="Runs and their waits"] '
                           'td:has-text("1 waiting on node: capacity 1")', timeout=WAIT_MS)
    page.screenshot(path=str(shots / "orchestrator.png"), full_page=True)
    assert page.problems == []


def test_the_token_stays_in_the_tab_never_in_a_url_or_a_cookie(browser: Any, page: Any, serve: Serve) -> None:
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    open_console(page, serve.url)
    page.wait_for_selector("#runs-count", timeout=WAIT_MS)
    assert page.evaluate("sessionStorage.getItem('jr2.instanceToken')") == TOKEN
    assert page.evaluate("localStorage.length") == 0
    assert page.evaluate("document.cookie") == "" and page.context.cookies() == []
    assert urls and not any(TOKEN in u for u in urls)
    assert TOKEN not in page.content()  # the field was emptied
    other = browser.new_context().new_page()  # another tab (and so another session) asks again
    other.goto(f"{serve.url}/console/")
    other.wait_for_selector("form#login:not([hidden])")
    page.click("#forget")
    page.wait_for_selector("form#login:not([hidden])")
    assert page.evaluate("sessionStorage.length") == 0
    wrong = browser.new_context().new_page()
    wrong.goto(f"{serve.url}/console/")
    wrong.fill("#token", "not-the-token-at-all")
    wrong.click("form#login button[type=submit]")
    wrong.wait_for_selector("#login-error:has-text('refused')")
    assert wrong.evaluate("sessionStorage.length") == 0


# -- hostile strings --------------------------------------------------------------------------------

SCRIPT = "<script>window.__pwned = 'state'</script>"
IMG = '<img src=x onerror="window.__pwned = 1">'
AGENT = "<b onmouseover=alert(1)>agent</b>"  # the workflow parser takes each of these as a name
WORDS = "0/1 nodes: <script>window.__pwned = 'words'</script><iframe src=javascript:alert(1)></iframe>"
SAID = "</div><img src=x onerror=alert('said')><svg onload=alert(1)>&amp;"
HOSTILE_DOC = {"name": "hostile", "workspaces": {"W-1": {"size": {"cpu": "1", "memory": "1Gi"}}},
               "agents": {AGENT: {"instructions": "x", "workspace": "W-1", "access": "write"}}, "start": SCRIPT,
               "states": {SCRIPT: {"holds": ["W-1"], "turn": {"agent": AGENT, "prompt": "p"}, "on": {"finish": IMG}},
                          IMG: {"final": "done"}}}


class HostileBackend:
    """An orchestrator whose every text is markup: names, the scheduler's words, what an agent said."""

    RUN = "r-hostile"

    def __init__(self) -> None:
        self.stopped = threading.Event()
        now = time.time()
        self.since = rfc3339_ms(now - 65)
        self.lines = [FeedEvent(1, now, StartedLine(IMG, SCRIPT)), FeedEvent(2, now, TurnLine(AGENT, 1, SCRIPT)),
                      FeedEvent(3, now, SaidLine(AGENT, 1, SAID)), FeedEvent(4, now, TurnFaultLine(AGENT, 1, SAID))]

    def _doc(self) -> dict[str, Any]:
        return {"runId": self.RUN, "workflow": IMG, "status": "running", "state": SCRIPT, "fault": SAID,
                "children": [{"child": "W-1", "phase": "placing"}], "path": [SCRIPT], "startedAt": self.since,
                "waiting": [{"child": "W-1", "on": IMG, "reason": SCRIPT, "message": WORDS, "since": self.since}]}

    def submit(self, document: object, run_input: Any, *, keyed: Any = None) -> str:
        raise AssertionError("the test submits nothing")

    def made_by(self, key: str) -> None:
        return None

    def status(self, run_id: str) -> dict[str, Any] | None:
        return self._doc() if run_id == self.RUN else None

    def runs_encoded(self, prefix: str = "") -> list[dict[str, Any]]:
        row = {k: v for k, v in self._doc().items() if k in ("runId", "workflow", "status", "state", "startedAt")}
        return [{**row, "placing": [IMG]}]

    def finished_runs(self, prefix: str = "", limit: int = 0) -> list[dict[str, Any]]:
        return []

    def document(self, run_id: str) -> dict[str, Any] | None:
        return HOSTILE_DOC if run_id == self.RUN else None

    def cancel(self, run_id: str) -> dict[str, Any] | None:
        return self.status(run_id)

    def feed(self, run_id: str, after: int, wait: float) -> FeedRead | None:
        if run_id != self.RUN:
            return None
        events = [e for e in self.lines if e.id > after]
        if not events:
            self.stopped.wait(wait)
        return FeedRead(events, False)

    def health(self) -> tuple[bool, str]:
        return True, ""

    def metrics(self) -> str:
        return ""

    def interrupt_feeds(self) -> None:
        self.stopped.set()


NOT_TEXT = "main img, main script, main iframe, main svg svg"  # what the Console never makes itself
ON_ATTRIBUTES = "[...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => /^on/i.test(a.name)))"


def test_every_text_from_a_run_is_shown_as_text_and_no_script_runs(page: Any, shots: Path) -> None:
    server = ApiServer(Api(HostileBackend(), TOKEN))
    server.start()
    try:
        open_console(page, server.url)
        row = f'#runs tr[data-run="{HostileBackend.RUN}"]'
        page.wait_for_selector(row, timeout=WAIT_MS)
        assert page.text_content(f"{row} td:nth-child(2)") == IMG
        assert page.text_content(f"{row} td:nth-child(4)") == SCRIPT
        assert page.text_content(f"{row} td:nth-child(5)") == f"placing {IMG}"
        assert page.eval_on_selector_all(NOT_TEXT, "found => found.length") == 0
        assert page.evaluate(f"{ON_ATTRIBUTES}.length") == 0

        page.click(f"{row} a")
        page.wait_for_selector("#feed div[data-id='4']", timeout=WAIT_MS)
        page.wait_for_selector("#graph g.node.placing", timeout=WAIT_MS)
        assert page.text_content("#run-workflow") == IMG and page.text_content("#run-state") == SCRIPT
        assert page.text_content("#run-note") == f"fault: {SAID}"
        names = page.eval_on_selector_all("#graph g.node text", "ts => ts.map(t => t.textContent)")
        assert sorted(names) == sorted([SCRIPT, IMG])
        assert page.get_attribute("#graph g.node.placing", "data-state") == SCRIPT
        waiting = page.text_content('#workspaces tr[data-child="W-1"]') or ""
        assert WORDS in waiting and IMG in waiting and SCRIPT in waiting
        said = page.text_content("#feed div[data-id='3']") or ""
        assert f"{AGENT}: {SAID}" in said
        assert AGENT in (page.text_content("#turns") or "")
        assert page.eval_on_selector_all(NOT_TEXT, "found => found.length") == 0
        assert page.evaluate(f"{ON_ATTRIBUTES}.length") == 0
        page.hover("#turns")  # an onmouseover, had it been markup
        assert page.evaluate("window.__pwned") is None
        assert page.problems == []
        page.screenshot(path=str(shots / "hostile.png"), full_page=True)
    finally:
        server.stop()
