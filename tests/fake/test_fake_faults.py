"""`cluster.faults` (issue 20, item 7): every fault by name, each call recorded, a schedule saved, loaded,
drawn from a seed and played again; a schedule file that is not one is refused by its entry."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.faults import LEVERS, FaultCall, Faults, FaultScheduleError
from jr2_actors.kube.frames import ErrorFrame
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.values.errors import KubeError
from tests.support.waiting import wait_until


def test_the_control_plane_away_for_a_while_comes_back_by_itself(cluster: FakeCluster) -> None:
    client = cluster.client()
    cluster.faults.away(seconds=0.3)
    with pytest.raises(KubeError) as err:
        client.list(SANDBOX)
    assert err.value.status == 503

    def back() -> bool:
        try:
            client.list(SANDBOX)
        except KubeError:
            return False
        return True

    wait_until(back, what="the control plane back")
    (call,) = cluster.faults.log
    assert (call.name, dict(call.params)) == ("away", {"seconds": 0.3, "status": 503})


def test_an_in_stream_error_reaches_an_open_watch_as_its_status_then_the_stream_ends(cluster: FakeCluster) -> None:
    client = cluster.client()
    got: list[Any] = []
    done = threading.Event()
    with client.watch(SANDBOX, timeout_seconds=60, allow_bookmarks=False) as stream:
        def read() -> None:
            got.extend(stream)
            done.set()
        threading.Thread(target=read, daemon=True).start()
        wait_until(lambda: cluster.watch_stats()["open"] == 1, what="the watch open")
        cluster.faults.stream_error(status=504, message="Too large resource version")
        assert done.wait(10), "the stream did not end after its ERROR frame"
    (frame,) = got
    assert isinstance(frame, ErrorFrame) and frame.status.code == 504
    assert "Too large resource version" in frame.status.message


def test_a_fault_aimed_at_a_sandbox_that_is_not_there_is_recorded_as_skipped() -> None:
    with FakeCluster(bookmark_interval=None) as cluster:  # with its operator: an eviction is its
        cluster.faults.evict("ws-nobody")
        (call,) = cluster.faults.log
        assert call.name == "evict" and call.skipped and "ws-nobody" in call.describe()


def test_the_log_is_a_schedule_that_loads_back_and_plays_again(cluster: FakeCluster) -> None:
    cluster.faults.refuse(2, status=429, retry_after=1)
    cluster.faults.rotate_token()
    cluster.faults.harness_latency(0.05)
    schedule = Faults.load(json.loads(cluster.faults.schedule_json()))
    assert [c.name for c in schedule] == ["refuse", "rotate_token", "harness_latency"]
    assert dict(schedule[0].params) == {"count": 2, "status": 429, "retry_after": 1, "watch_only": False}
    with FakeCluster(bookmark_interval=None) as other:
        other.faults.play(schedule).join(10)
        assert [c.name for c in other.faults.log] == ["refuse", "rotate_token", "harness_latency"]
        with pytest.raises(KubeError) as err:
            other.client().list(SANDBOX)
        assert err.value.status == 429 and err.value.retry_after == 1


def test_a_seed_draws_one_schedule_and_aims_only_when_it_knows_a_sandbox() -> None:
    assert Faults.draw(5) == Faults.draw(5) and Faults.draw(5) != Faults.draw(6)
    wide = [c for seed in range(50) for c in Faults.draw(seed)]
    assert wide and all("sandbox" not in c.params for c in wide)
    aimed = [c for seed in range(50) for c in Faults.draw(seed, sandboxes=["ws-a"])]
    assert any(c.params.get("sandbox") == "ws-a" for c in aimed)
    assert {c.name for c in aimed} <= set(LEVERS)
    for c in aimed:
        Faults.load([c.json()])  # every drawn call is a valid schedule entry


@pytest.mark.parametrize(("doc", "says"), [
    ({"at": 1}, "a list"),
    (["away"], "entry 0: not a mapping"),
    ([{"at": 1, "fault": "explode"}], "no fault named 'explode'"),
    ([{"at": 1, "fault": "away", "forever": True}], "away takes no forever"),
    ([{"at": -1, "fault": "away"}], "'at' must be seconds"),
    ([{"at": "soon", "fault": "away"}], "'at' must be seconds"),
    ([{"at": 0, "fault": "away", "seconds": "x"}], "seconds='x' is not seconds"),
    ([{"at": 0, "fault": "refuse", "count": 2, "status": 99}], "is not an HTTP status"),
    ([{"at": 0, "fault": "evict", "sandbox": ["x"]}], "sandbox=['x'] is not a short text"),
    ([{"at": 0, "fault": "refuse", "count": True}], "is not a count"),
])
def test_a_schedule_that_is_not_one_is_refused_by_its_entry(doc: object, says: str) -> None:
    with pytest.raises(FaultScheduleError, match=None) as err:
        Faults.load(doc)
    assert says in str(err.value)


def test_a_fault_call_describes_itself_in_one_line() -> None:
    text = FaultCall(1.5, "draining", {"sandbox": "ws-a", "seconds": 2.0}).describe()
    assert text == "t=1.50s draining(sandbox='ws-a', seconds=2.0)"


def test_a_failing_test_with_the_marker_prints_the_faults_it_met_as_a_schedule(tmp_path: Any) -> None:
    import subprocess
    import sys

    (tmp_path / "test_on_purpose.py").write_text(
        "import pytest\n"
        "@pytest.mark.jr2_faults(schedule=[{'at': 0, 'fault': 'refuse', 'count': 1, 'status': 503}])\n"
        "def test_fails(jr2_fake_cluster):\n"
        "    import threading\n"
        "    while not jr2_fake_cluster.faults.log:\n"
        "        threading.Event().wait(0.01)\n"
        "    assert False, 'on purpose'\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert "the faults it met" in done.stdout and '"fault": "refuse"' in done.stdout


@pytest.mark.parametrize(("content", "says"), [
    (None, "cannot read it"), ("[{at: 1, fault: explode}]", "no fault named 'explode'"),
    ("{{{", "not JSON or YAML"), ('{"at": 1}', "a list")])
def test_fake_cluster_refuses_a_bad_faults_file_in_one_line(tmp_path: Any, content: str | None, says: str) -> None:
    from tests.support.cli_process import jr2

    path = tmp_path / "faults.yaml"
    if content is not None:
        path.write_text(content)
    done = jr2("fake-cluster", "--kubeconfig-out", str(tmp_path / "kc"), "--faults", str(path))
    assert done.returncode == 2 and says in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "kc").exists()
