"""A stop ends whatever is in flight (issue 16 item 9): an attach retrying a Harness that refuses every
connection used to hold `Orchestrator.stop()` — and `serve` past its SIGTERM budget — for the attach's whole
90 s window. Each test asserts the stop returned within the budget, never how long it took."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.run.actor import RunActor
from jr2_actors.shell.stopping import Stops
from jr2_actors.shell.watchdog import past_budget
from jr2_actors.values.constants import SERVE_STOP_SECONDS, STORE_STOP_FLOOR_SECONDS
from jr2_actors.values.workflow import read_document
from tests.support.serving import KEY, Serve
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
WORKFLOW = one_state("refused")


@pytest.fixture
def refusing() -> Iterator[str]:
    """A loopback port that is bound and never listens: every connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def cluster(refusing: str) -> Iterator[FakeCluster]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None, signing_key=KEY.encode()) as c:
        c.operate(lambda core, now: setattr(core, "endpoint", refusing))  # each Sandbox's Harness refuses
        yield c


def attaching(status: dict[str, Any] | None) -> bool:
    return bool(status) and any(c["phase"] == "attaching" for c in (status or {}).get("children", []))


def test_orchestrator_stop_returns_within_its_budget_while_an_attach_retries(cluster: FakeCluster,
                                                                             tmp_path: Path) -> None:
    orch = Orchestrator(cluster.client(), state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key)
    orch.start()
    stopped = threading.Event()

    def stop() -> None:
        orch.stop()
        stopped.set()

    try:
        run_id = orch.submit(read_document(WORKFLOW))
        wait_until(lambda: attaching(orch.status(run_id)), timeout=30, what="the attach under way")
    finally:
        stopper = threading.Thread(target=stop, name="test-stop", daemon=True)
        stopper.start()
        stopper.join(SERVE_STOP_SECONDS)
    assert stopped.is_set(), "Orchestrator.stop() was still waiting for the attach's retries"
    assert not [t.name for t in threading.enumerate() if t.name.startswith("jr2-attach")]


def test_serve_exits_within_its_sigterm_budget_while_an_attach_retries(cluster: FakeCluster, tmp_path: Path) -> None:
    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    served = Serve(kubeconfig, tmp_path / "state")
    try:
        run_id = served.call("POST", "/runs", json={"workflow": read_document(WORKFLOW)}).json()["runId"]
        wait_until(lambda: attaching(served.call("GET", f"/runs/{run_id}").json()), timeout=30,
                   what="the attach under way")
    finally:
        served.proc.send_signal(signal.SIGTERM)
        try:
            code = served.proc.wait(SERVE_STOP_SECONDS)
        finally:
            if served.proc.poll() is None:
                served.proc.kill()
    assert code == 0, "".join(served.lines)


def test_the_runs_are_asked_to_stop_together_not_one_after_another(cluster: FakeCluster, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run's stop waits for its actor's message in hand; asked one after another, N busy runs cost N
    stops of the budget. Each run here cleans up only once both are stopping: one after another, the first
    waits for a second that is never asked."""
    together = threading.Barrier(2)
    apart: list[str] = []

    class Paired(RunActor):
        def cleanup(self) -> None:
            try:
                together.wait(timeout=SERVE_STOP_SECONDS / 2)
            except threading.BrokenBarrierError:
                apart.append(self.core.run_id)
            super().cleanup()

    monkeypatch.setattr("jr2_actors.orchestrator.RunActor", Paired)
    orch = Orchestrator(cluster.client(), state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key)
    orch.start()
    try:
        runs = [orch.submit(read_document(WORKFLOW)) for _ in range(2)]
        wait_until(lambda: all(attaching(orch.status(r)) for r in runs), timeout=30, what="both runs under way")
    finally:
        orch.stop()
    assert apart == []


def test_orchestrator_stop_returns_within_its_budget_while_the_api_server_hangs(tmp_path: Path) -> None:
    """A write in flight to an API server that does not answer (here: a minute's latency) held the kube
    pool's shutdown, and the stop, for its 30 s read timeout; the stop cuts what its stopped actors left."""
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None) as cluster:
        orch = Orchestrator(cluster.client(), state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key)
        orch.start()
        stopped = threading.Event()

        def stop() -> None:
            orch.stop()
            stopped.set()

        try:
            cluster.set_latency(60)
            orch.submit(read_document(WORKFLOW))  # its Sandbox's create leaves, and waits a minute for an answer
            wait_until(lambda: orch.client.writes.in_flight == 1, timeout=30, what="the create in flight")
        finally:
            stopper = threading.Thread(target=stop, name="test-stop", daemon=True)
            stopper.start()
            stopper.join(SERVE_STOP_SECONDS)
            cluster.set_latency(0)
        assert stopped.is_set(), "Orchestrator.stop() was still waiting for a write the API server held"
        stopper.join(90)  # the cluster stops only after the orchestrator (a failed stop above ends late)


def test_the_runs_share_of_the_stop_ends_a_floor_before_its_budget_so_the_store_fits_in_it(
        cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that does not stop used the whole budget, and the store's stop (the persists asked before it) then
    took its floor past it: 5,000 runs mid-Turn exited in 10.14 s. The runs' wait now ends a floor early."""
    release = threading.Event()
    deadlines: list[float] = []
    wait = Stops.wait

    class Stuck(RunActor):
        def cleanup(self) -> None:
            release.wait(SERVE_STOP_SECONDS)
            super().cleanup()

    def recorded(self: Stops, deadline: float) -> list[str]:
        deadlines.append(deadline)
        return wait(self, deadline)

    monkeypatch.setattr("jr2_actors.orchestrator.RunActor", Stuck)
    monkeypatch.setattr(Stops, "wait", recorded)
    orch = Orchestrator(cluster.client(), state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key)
    orch.start()
    budget = 4.0
    try:
        run_id = orch.submit(read_document(WORKFLOW))
        wait_until(lambda: attaching(orch.status(run_id)), timeout=30, what="the run under way")
    finally:
        asked = time.monotonic()
        orch.stop(budget)
        release.set()
    runs, store = deadlines[0], deadlines[-1]
    assert runs <= asked + budget - STORE_STOP_FLOOR_SECONDS / 2, "the runs' wait took the store's share"
    assert store >= runs + STORE_STOP_FLOOR_SECONDS - 0.01, "the store still gets its floor after the runs"


def test_a_stop_past_its_budget_ends_the_process_with_one_line_exit_0(caplog: pytest.LogCaptureFixture) -> None:
    """Under thousands of runnable threads the stopping thread waited 46 s for the interpreter lock between its
    own bounded waits (5,000 runs mid-Turn). The watchdog ends the process at the budget, exit 0."""
    ended = threading.Event()
    codes: list[int] = []

    def exit_(code: int) -> None:
        codes.append(code)
        ended.set()

    with caplog.at_level("ERROR", logger="jr2_actors.shell.stopping"):
        past_budget(0.6, exit=exit_)  # fires STOP_WATCHDOG_MARGIN_SECONDS before: at 0.1 s
        assert ended.wait(SERVE_STOP_SECONDS)
    assert codes == [0]
    assert [r.getMessage() for r in caplog.records] == [
        "the stop passed its 0.6s budget: ending the process now; every accepted run restores from its last saved "
        "step at the next start"]


def test_a_stop_within_its_budget_cancels_the_watchdog() -> None:
    codes: list[int] = []
    watchdog = past_budget(0.6, exit=codes.append)
    watchdog.cancel()
    watchdog.join(SERVE_STOP_SECONDS)
    assert codes == [] and not watchdog.is_alive()
