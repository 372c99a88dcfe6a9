"""The whole demo, observed as an operator would (issue 11's "done when"): `demo --metrics-port N` serves
`/metrics` while it runs, `top --once` prints its table from it, and the demo's DEBUG JSON logs hold none
of the tokens and keys the run used.

One demo run serves every test here. It runs in process through `cli.main` (so the test knows each secret
it made: every token and key comes from `secrets`, recorded as it is drawn, and the ones derived from the
signing key are derived again from it), on a thread; `top` runs through `cli.main` on the test's thread
meanwhile. The demo bound its output stream when it started, so the two never mix.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import secrets
import sys
import threading
from dataclasses import dataclass, field

import pytest
import requests

from jr2_actors import cli
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.harness.tokens import INSTANCE_HARNESS, harness_token
from jr2_actors.workspace.manifest import sandbox_token
from tests.support.metrics_text import samples, value
from tests.support.serving import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


@dataclass
class DemoRun:
    rc: int | None = None
    out: str = ""
    logs: str = ""
    top_rc: int | None = None
    top_out: str = ""
    top_logs: str = ""
    scrapes: list[str] = field(default_factory=list)
    drawn: list[str | bytes] = field(default_factory=list)
    sandboxes: set[str] = field(default_factory=set)


def scrape(url: str) -> str | None:
    try:
        resp = requests.get(url + "/metrics", timeout=5)
    except requests.exceptions.RequestException:
        return None
    return resp.text if resp.status_code == 200 else None


@pytest.fixture(scope="module")
def demo() -> DemoRun:
    got = DemoRun()
    with pytest.MonkeyPatch.context() as mp:
        # Every token and key the demo makes comes from `secrets`: each is noted as it is drawn. (token_hex
        # makes run ids, which are no secret: it is given its own randomness, not the noted token_bytes.)
        token_bytes = secrets.token_bytes

        def key(nbytes: int | None = None) -> bytes:
            drawn = token_bytes(nbytes)
            got.drawn.append(drawn)
            return drawn

        def token(nbytes: int | None = None) -> str:
            drawn = base64.urlsafe_b64encode(os.urandom(nbytes or 32)).rstrip(b"=").decode()
            got.drawn.append(drawn)
            return drawn

        mp.setattr(secrets, "token_bytes", key)
        mp.setattr(secrets, "token_urlsafe", token)
        mp.setattr(secrets, "token_hex", lambda nbytes=None: os.urandom(nbytes or 32).hex())
        stop = FakeCluster.stop

        def stop_and_note(self: FakeCluster) -> None:  # which Sandboxes it held, before it forgets them
            if self._actor is not None:
                for r in self.requests():
                    hit = re.search(r"/(?:sandboxes|secrets)/([a-z0-9-]+?)(?:-token)?(?:/|$)", r["path"])
                    if hit:
                        got.sandboxes.add(hit.group(1))
            stop(self)

        mp.setattr(FakeCluster, "stop", stop_and_note)
        url = f"http://127.0.0.1:{free_port()}"
        out, err, top_out, top_err = io.StringIO(), io.StringIO(), io.StringIO(), io.StringIO()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            argv = ["--log-level", "debug", "--log-format", "json", "demo", "--metrics-port", url.rsplit(":", 1)[1]]
            thread = threading.Thread(target=lambda: setattr(got, "rc", cli.main(argv)), name="demo")
            thread.start()

            def running() -> bool:
                text = scrape(url)
                if text is not None:
                    got.scrapes.append(text)
                return text is not None and (value(text, "jr2_workspaces", phase="running") or 0) >= 1

            wait_until(running, timeout=60, what="the demo's neighbour run in /metrics")
            sys.stdout, sys.stderr = top_out, top_err
            got.top_rc = cli.main(["--log-level", "debug", "--log-format", "json", "top", "--once", "--server", url])
            sys.stdout, sys.stderr = out, err

            def waited_on_a_node() -> bool:  # the example's Workspace waits for the neighbour's node
                text = scrape(url)
                if text is not None:
                    got.scrapes.append(text)
                return text is not None and value(text, "jr2_run_waits_open", on="node", reason="capacity") == 1

            wait_until(waited_on_a_node, timeout=60, what="a wait on a node in /metrics")
            thread.join(120)
            assert not thread.is_alive(), "the demo did not end"
        finally:
            sys.stdout, sys.stderr = saved
    got.out, got.logs, got.top_out, got.top_logs = out.getvalue(), err.getvalue(), top_out.getvalue(), \
        top_err.getvalue()
    return got


def test_demo_serves_metrics_while_it_runs_and_top_prints_the_table(demo: DemoRun) -> None:
    assert demo.rc == 0 and "ended done" in demo.out
    assert demo.top_rc == 0
    table = demo.top_out
    for words in ("Actors, by mailbox depth", "StoreActor", "WatchActor", "RunActor", "Sandbox watch",
                  "watching, up", "Runs and their waits", "live runs", "Store, cluster, Harness"):
        assert words in table, words
    first, last = samples(demo.scrapes[0]), samples(demo.scrapes[-1])
    assert value(first, "jr2_actor_instances", kind="StoreActor") == 1
    assert value(last, "jr2_run_waits_open", on="node", reason="capacity") == 1
    assert value(last, "jr2_workspaces", phase="placing") == 1
    assert (value(last, "jr2_actor_messages_processed_total", kind="RunActor") or 0) > 0
    assert (value(last, "jr2_store_persist_seconds_count") or 0) > 0
    assert (value(last, "jr2_kube_requests_total", verb="apply", code="200") or 0) + \
        (value(last, "jr2_kube_requests_total", verb="create", code="201") or 0) > 0
    assert (value(last, "jr2_watch_events_total", type="ADDED") or 0) > 0
    assert (value(last, "jr2_watch_delivery_latency_seconds_count") or 0) > 0  # the fake stamps its writes


def test_debug_json_logs_of_the_whole_demo_hold_no_token_or_key(demo: DemoRun) -> None:
    lines = [json.loads(line) for line in demo.logs.splitlines()]  # every line is one JSON object
    assert len(lines) > 50 and any(r["level"] == "DEBUG" for r in lines)
    assert any(r.get("run") and r.get("workspace") and r.get("actor") == "WorkspaceActor" for r in lines)
    assert any(r.get("run") and r.get("agent") and r.get("actor") == "AgentActor" for r in lines)
    assert any(r.get("run") and r.get("actor") == "RunActor" for r in lines)

    keys = [d for d in demo.drawn if isinstance(d, bytes)]
    tokens = [d for d in demo.drawn if isinstance(d, str)]
    assert keys and tokens and demo.sandboxes  # the signing key, the API and Instance tokens, the Workspaces
    derived = [harness_token(k, n) for k in keys for n in (*demo.sandboxes, INSTANCE_HARNESS)]
    derived += [sandbox_token(k, n) for k in keys for n in demo.sandboxes]
    derived += [base64.b64encode(t.encode()).decode() for t in derived]  # as a Secret holds it
    forms = [*tokens, *derived]
    for k in keys:
        forms += [k.hex(), base64.b64encode(k).decode(), base64.urlsafe_b64encode(k).decode().rstrip("="),
                  repr(k)[2:-1]]
    everything = demo.logs + demo.top_logs + demo.out + demo.top_out
    leaked = [f for f in forms if f in everything]
    assert not leaked, f"{len(leaked)} secret(s) in the demo's logs or output"
