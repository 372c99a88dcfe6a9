"""The probes' own listener (`jr2_actors/api/probe.py`): a process apart that answers `GET /healthz` from the
finding serve publishes once a second, so a probe never waits for serve's interpreter lock; a finding that has
aged past its bound is a 503 (serve stopped making progress); it never outlives serve."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from jr2_actors import __version__
from jr2_actors.api.probe import LINE_LIMIT, Finding, ProbeProcess, answer, decode, encode
from tests.support.waiting import wait_until

# -- the answer (pure) ---------------------------------------------------------------------------------


def test_a_fresh_good_finding_is_200_and_a_bad_one_503_with_its_reason() -> None:
    assert answer(Finding(100.0, True, ""), 105.0, stale=10) == (200, {"ok": True, "version": __version__})
    assert answer(Finding(100.0, False, "the store cannot write: disk full"), 105.0, stale=10) == \
        (503, {"ok": False, "reason": "the store cannot write: disk full"})


def test_a_finding_past_its_bound_is_503_even_when_it_said_ok() -> None:
    assert answer(Finding(100.0, True, ""), 112.0, stale=10) == \
        (503, {"ok": False, "reason": "serve has not published its health for 12s"})
    assert answer(None, 0.0) == (503, {"ok": False, "reason": "serve has not published its health yet"})


@pytest.mark.parametrize("line", [
    b"not json\n", b"[1, 2]\n", b'{"ok": true, "reason": ""}\n', b'{"at": true, "ok": true}\n',
    b'{"at": 1.5, "ok": "yes"}\n', b'{"at": 1.5, "ok": true, "reason": 7}\n', b"\xff\xfe\n",
    b'{"at": 1, "ok": true, "reason": "' + b"x" * LINE_LIMIT + b'"}\n',
])
def test_a_finding_that_is_not_one_is_refused_with_a_reason(line: bytes) -> None:
    with pytest.raises(ValueError, match=r".+"):
        decode(line)


def test_a_finding_reads_back_as_it_was_written() -> None:
    finding = Finding(123.25, False, "the Sandbox watch is degraded (12 failures in a row)")
    assert decode(encode(finding)) == finding


# -- the process -----------------------------------------------------------------------------------------


class Health:
    """What serve's `Orchestrator.health` would say, set by the test; `hold` keeps the publisher from reading."""

    def __init__(self) -> None:
        self.now: tuple[bool, str] = (True, "")
        self.free = threading.Event()
        self.free.set()

    def __call__(self) -> tuple[bool, str]:
        self.free.wait(30)
        return self.now


def get(address: str) -> tuple[int, dict[str, object]]:
    r = requests.get(f"http://{address}/healthz", timeout=10)
    return r.status_code, r.json()


@pytest.fixture
def health() -> Health:
    return Health()


@pytest.fixture
def probes(health: Health) -> Iterator[ProbeProcess]:
    process = ProbeProcess(("127.0.0.1", 0), health, every=0.05, stale=1.0)
    try:
        yield process
    finally:
        health.free.set()
        process.close()


def test_the_listener_answers_what_serve_last_published(probes: ProbeProcess, health: Health) -> None:
    wait_until(lambda: get(probes.address)[0] == 200, what="the first finding answered")
    health.now = (False, "the store cannot write: OperationalError: disk I/O error")
    wait_until(lambda: get(probes.address) == (503, {"ok": False, "reason": health.now[1]}),
               what="the new finding answered")
    assert requests.get(f"http://{probes.address}/runs", timeout=10).status_code == 404


def test_a_serve_that_stops_publishing_is_503_once_its_finding_ages_past_the_bound(probes: ProbeProcess,
                                                                                   health: Health) -> None:
    wait_until(lambda: get(probes.address)[0] == 200, what="the first finding answered")
    health.free.clear()  # serve's publisher cannot read its health any more: no progress
    wait_until(lambda: get(probes.address)[0] == 503, what="the aged finding refused")
    assert str(get(probes.address)[1]["reason"]).startswith("serve has not published its health for")
    health.free.set()
    wait_until(lambda: get(probes.address)[0] == 200, what="ready again once serve publishes")


def test_a_request_too_long_or_never_finished_holds_no_probe_back(probes: ProbeProcess) -> None:
    host, port = probes.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as silent:  # connects, sends nothing
        long = requests.get(f"http://{probes.address}/healthz?" + "x" * 70_000, timeout=10)
        assert long.status_code == 414
        wait_until(lambda: get(probes.address)[0] == 200, what="a probe answered beside them")
        silent.settimeout(10)
        assert silent.recv(1) == b""  # cut once its bound passed, not held open


def test_an_unreadable_line_from_serve_keeps_the_last_good_finding() -> None:
    child = subprocess.Popen([sys.executable, "-m", "jr2_actors.api.probe", "--listen", "127.0.0.1:0",
                              "--stale", "60"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    try:
        address = child.stdout.readline().decode().removeprefix("listening ").strip()
        child.stdin.write(encode(Finding(time.monotonic(), True, "")))
        child.stdin.write(b"{not a finding}\n" + b"y" * (LINE_LIMIT * 2) + b"\n")
        child.stdin.flush()
        said = child.stderr
        wait_until(lambda: b"unreadable" in said.readline(), what="the bad line said")
        assert get(address)[0] == 200
    finally:
        child.stdin.close()
        assert child.wait(10) == 0  # its stdin closed: it ends, and cleanly


def test_the_listener_ends_with_serve_even_when_serve_is_killed(tmp_path: Path) -> None:
    """serve SIGKILLed cannot close the listener's pipe itself: the kernel does, and the listener ends."""
    script = tmp_path / "serve_like.py"
    script.write_text("import sys, threading\n"
                      "from jr2_actors.api.probe import ProbeProcess\n"
                      "p = ProbeProcess(('127.0.0.1', 0), lambda: (True, ''), every=0.05)\n"
                      "print(p.address, p.pid, flush=True)\n"
                      "threading.Event().wait()\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    address, pid = parent.stdout.readline().split()
    # Listening comes before the first finding (a 503 "not published yet" until then, as in serve's first second).
    wait_until(lambda: get(address)[0] == 200, what="the first finding answered")
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    wait_until(lambda: not _alive(int(pid)), what="the listener ended with its serve")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # reaped by init (its parent is gone) or a zombie a moment before that
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_serve_says_in_one_line_that_its_probe_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")}
        r = subprocess.run([sys.executable, "-m", "jr2_actors", "serve", "--fake-cluster", "--state-dir",
                            str(tmp_path / "state"), "--probe-listen", f"127.0.0.1:{port}"],
                           capture_output=True, text=True, timeout=60, env=env, check=False)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"jr2-actors: --probe-listen 127.0.0.1:{port}: cannot listen there: Address already in use"]
    assert json.dumps(r.stderr).count("Traceback") == 0
