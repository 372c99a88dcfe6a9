"""What the Console's browser tests share: Debian's chromium (never a downloaded browser) and whether it is here,
and `serve --fake-cluster` as a process on a port of its own, restartable on the same state folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

from tests.support.waiting import wait_until

CHROMIUM = os.environ.get("JR2_CHROMIUM", "/usr/bin/chromium")
TOKEN = "console-test-token-0123456789"
KEY = "console-test-signing-key-0123456789abcdef"


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        return f"no chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "no playwright (pip install -e '.[test]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """`jr2-actors serve --fake-cluster` as a process, on one port and one state folder across restarts."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers["Authorization"] = f"Bearer {TOKEN}"

    def start(self) -> Serve:
        env = {**os.environ, "JR2_INSTANCE_TOKEN": TOKEN, "JR2_SIGNING_KEY": KEY}
        log = open(self.state_dir.parent / f"serve-{self.port}.log", "ab")  # noqa: SIM115 - the process keeps it
        proc = self.proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", "serve", "--fake-cluster",
                                             "--state-dir", str(self.state_dir), "--listen", f"127.0.0.1:{self.port}"],
                                            stdout=log, stderr=log, env=env)
        log.close()
        wait_until(lambda: (self.state_dir / "env").exists() or proc.poll() is not None, 60, "serve to serve")
        assert proc.poll() is None, "serve stopped at its start"
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def submit(self, workflow: str) -> str:
        from jr2_actors.values.workflow import read_document

        resp = self.session.post(f"{self.url}/runs", json={"workflow": read_document(workflow)}, timeout=10)
        assert resp.status_code == 201, resp.text
        return str(resp.json()["runId"])

    def status(self, run_id: str) -> dict[str, Any]:
        doc = self.session.get(f"{self.url}/runs/{run_id}", timeout=10).json()
        assert isinstance(doc, dict)
        return doc


def open_console(page: Any, url: str, where: str = "#/runs") -> None:
    """The Console as a person opens it: the URL, the token once, then the page."""
    page.goto(f"{url}/")
    page.fill("#token", TOKEN)
    page.click("form#login button[type=submit]")
    page.wait_for_selector("#nav-runs.here, #nav-orchestrator.here")
    if where != "#/runs":
        page.evaluate("where => { location.hash = where; }", where)


def dump(value: Any) -> str:
    return json.dumps(value, indent=1)[:2000]
