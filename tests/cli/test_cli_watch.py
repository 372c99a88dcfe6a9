"""`jr2-actors watch` against the fake cluster: each fault knob's termination line, then deliveries."""

from __future__ import annotations

import io
import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jr2_actors.cli import JsonLines
from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.values.backoff import Backoff
from jr2_actors.watch.actor import WatchActor
from jr2_actors.watch.identity import annotations_for, labels_for, sandbox_name
from tests.support.cli_process import jr2
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


class Lines:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        assert proc.stdout is not None
        stdout = proc.stdout

        def pump() -> None:
            for line in stdout:
                self.queue.put(json.loads(line))

        threading.Thread(target=pump, daemon=True).start()

    def until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
        while True:
            try:
                doc = self.queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no matching line; seen: {self.seen}") from None
            self.seen.append(doc)
            if predicate(doc):
                return doc


@pytest.fixture
def watch_cli(cluster: FakeCluster, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Lines]]:
    cfg = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", "watch", "--namespace", "jr2", "--kubeconfig", cfg,
                             "--stall-seconds", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc, Lines(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def apply(cluster: FakeCluster, run: str, phase: str) -> None:
    name = sandbox_name(run, "F-1")

    def write(s: ClusterState) -> None:
        try:
            s.get(SANDBOX, "jr2", name)
        except Exception:
            s.create(SANDBOX, "jr2", {"metadata": {"name": name, "labels": labels_for(run, "wf"),
                                                   "annotations": annotations_for(run, "F-1")}}, now=0)
        s.merge_patch(SANDBOX, "jr2", name, {"status": {"phase": phase}}, subresource="status")

    cluster.call(write)


def seen(run: str, phase: str) -> Callable[[dict[str, Any]], bool]:
    name = sandbox_name(run, "F-1")
    return lambda d: d.get("delivery") == "seen" and d["name"] == name and d["phase"] == phase


def test_each_fault_knob_prints_its_termination_and_the_deliveries_follow(
        cluster: FakeCluster, watch_cli: tuple[subprocess.Popen[str], Lines]) -> None:
    proc, lines = watch_cli
    apply(cluster, "run-a", "Pending")
    lines.until(seen("run-a", "Pending"))
    wait_until(lambda: cluster.watch_stats()["open"] == 1)

    cluster.end_watches()  # drop
    assert lines.until(lambda d: "termination" in d)["termination"] == "transport"
    apply(cluster, "run-a", "Ready")
    lines.until(seen("run-a", "Ready"))

    wait_until(lambda: cluster.watch_stats()["open"] == 1)
    cluster.stall_watches()  # silence
    term = lines.until(lambda d: "termination" in d)
    assert (term["termination"], term["action"], term["resourceVersion"]) == ("silence", "relist", None)
    apply(cluster, "run-b", "Pending")
    lines.until(seen("run-b", "Pending"))

    wait_until(lambda: cluster.watch_stats()["open"] == 1)
    cluster.fail_next(1, 503, watch_only=True)  # transient
    cluster.end_watches()
    lines.until(lambda d: d.get("termination") == "transient")
    apply(cluster, "run-b", "Ready")
    lines.until(seen("run-b", "Ready"))

    wait_until(lambda: cluster.watch_stats()["open"] == 1)
    apply(cluster, "run-c", "Pending")
    lines.until(seen("run-c", "Pending"))
    cluster.set_latency(1.0)  # the resume reaches the server after the change and the compaction: a 410
    # (1 s: under the 2 s stall bound, which would otherwise abandon the delayed open first)
    cluster.end_watches()
    apply(cluster, "run-c", "Ready")
    cluster.compact()
    cluster.set_latency(0)
    expired = lines.until(lambda d: d.get("termination") == "expired")
    assert (expired["action"], expired["resourceVersion"]) == ("relist", None)
    lines.until(seen("run-c", "Ready"))

    wait_until(lambda: cluster.watch_stats()["open"] == 1)
    cluster.restart()
    restart = lines.until(lambda d: "termination" in d)
    assert (restart["termination"], restart["action"]) == ("transport", "resume")
    cluster.call(lambda s: s.delete(SANDBOX, "jr2", sandbox_name("run-a", "F-1")))
    gone = lines.until(lambda d: d.get("delivery") == "gone")
    assert gone["name"] == sandbox_name("run-a", "F-1")

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert cluster.watch_stats()["maxOpen"] == 1


def test_watch_refuses_a_missing_kubeconfig_by_name(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    result = jr2("watch", "--namespace", "jr2", "--kubeconfig", missing)
    assert result.returncode == 2
    assert missing in result.stderr


def test_past_the_failure_bound_a_degraded_line_is_printed_and_the_watch_goes_on(cluster: FakeCluster) -> None:
    """What `jr2-actors watch` prints (its JsonLines), with a bound and a backoff a test can reach."""
    out = io.StringIO()

    def printed() -> list[dict[str, Any]]:
        return [json.loads(line) for line in out.getvalue().splitlines()]

    ref = WatchActor.start(cluster.client(), stall_bound=2.0, max_failures=2, seed=1, tap=JsonLines(out),
                           backoff=Backoff(initial=0.01, cap=0.05, immediate_first=True))
    try:
        apply(cluster, "run-a", "Pending")
        wait_until(lambda: any(seen("run-a", "Pending")(d) for d in printed()))
        wait_until(lambda: cluster.watch_stats()["open"] == 1)
        cluster.fail_next(5, 503)
        cluster.end_watches()
        wait_until(lambda: any(d.get("action") == "degraded" for d in printed()), what="the degraded line")
        apply(cluster, "run-a", "Ready")
        wait_until(lambda: any(seen("run-a", "Ready")(d) for d in printed()), what="deliveries after it")
    finally:
        ref.stop(block=True, timeout=5)
    lines = printed()
    (degraded,) = [d for d in lines if d.get("action") == "degraded"]
    assert (degraded["termination"], degraded["resourceVersion"]) == ("transient", None)
    assert "503" in degraded["detail"]
    (failed,) = [d for d in lines if d.get("delivery") == "failed"]
    assert (failed["name"], failed["termination"]) == (None, "transient")
    back = next(i for i, d in enumerate(lines) if seen("run-a", "Ready")(d))
    blind = lines[lines.index(degraded) + 1:back]
    assert {d.get("action") for d in blind if "termination" in d} <= {"relist"}  # never a resume while blind


def test_watch_says_where_it_watches_and_when_its_first_list_answers(cluster: FakeCluster, tmp_path: Path) -> None:
    apply(cluster, "run-a", "Pending")
    cfg = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", "watch", "--namespace", "jr2", "--kubeconfig", cfg],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines = [proc.stderr.readline(), proc.stderr.readline()]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(10) == 130
    assert f"watching Sandboxes in namespace jr2 of {cluster.url} (--kubeconfig={cfg})" in lines[0], lines
    assert "the first list answered with 1 Sandbox(es)" in lines[1], lines


@given(st.text(), st.text(), st.text(), st.text())
def test_the_taps_seen_line_is_json_dumps_text_for_any_strings(name: str, uid: str, rv: str, phase: str) -> None:
    # Issue 18: the per-event line is built without an encoder per call; it must stay json.dumps's own text.
    from jr2_actors.watch.deliveries import SandboxSeen
    from jr2_actors.watch.identity import SandboxKey
    from jr2_actors.watch.sandbox import SandboxView

    out = io.StringIO()
    sandbox = SandboxView(name, uid, rv, phase, "", "", "", 0, None, (), ())
    JsonLines(out).tell(SandboxSeen(SandboxKey("r", "F"), sandbox, {}))
    assert out.getvalue() == json.dumps({"delivery": "seen", "name": name, "uid": uid, "resourceVersion": rv,
                                         "phase": phase}) + "\n"
