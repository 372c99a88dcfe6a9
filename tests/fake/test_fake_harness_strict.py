"""The fake Harness's boot id and its two modes: the strict one does only what CONTRACTS.md §3 promises of a
restart (conversations kept, the old container's Submissions never settle, an abort of one settles nothing),
the lenient one loses the conversations; the watch's view of a restart lags the new process, or leads it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.faults import Faults, FaultScheduleError
from jr2_actors.fake.harness.core import Hang, HarnessCore, KernelKill
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.watch.sandbox import view
from tests.support.cli_process import jr2
from tests.support.harness_http import NAME, T0, admission, auth, poll, url
from tests.support.sandboxes import ready_sandbox
from tests.support.waiting import wait_until


@pytest.fixture(params=["lenient", "strict"])
def moded(request: pytest.FixtureRequest) -> Iterator[tuple[FakeCluster, VirtualClock]]:
    clock = VirtualClock(wall=T0)
    with FakeCluster(clock=clock, start_seconds=1, long_poll=0.2, harness_mode=request.param) as cluster:
        ready_sandbox(cluster, clock, NAME)
        yield cluster, clock


def post(cluster: FakeCluster, conv: str = "c-1", **extra: Any) -> requests.Response:
    return requests.post(url(cluster, f"/agents/coder/{conv}"), json=admission(**extra), headers=auth(cluster),
                         timeout=10)


def healthz(cluster: FakeCluster) -> requests.Response:
    return requests.get(url(cluster, "/healthz"), timeout=10)


def restarts(cluster: FakeCluster) -> int:
    return view(cluster.client().get(SANDBOX, NAME) or {}).restart_count


def test_every_process_has_a_boot_id_its_admissions_and_healthz_say_and_a_restart_makes_anew(
        moded: tuple[FakeCluster, VirtualClock]) -> None:
    cluster, _ = moded
    cluster.script("coder", [Hang()])
    first = post(cluster).json()
    boot = healthz(cluster).json()
    assert boot["ok"] is True and isinstance(boot["bootId"], str) and boot["bootId"]
    assert first["bootId"] == boot["bootId"]
    cluster.faults.harness_restart(NAME)
    again = healthz(cluster).json()["bootId"]
    assert again != boot["bootId"]
    second = post(cluster, "c-2").json()
    assert second["bootId"] == again
    (a, b) = cluster.admissions()
    assert (a["status"], a["bootId"], b["status"], b["bootId"]) == (200, boot["bootId"], 200, again)
    boots = cluster.harness_read(lambda core: list(core.boots))
    assert [x["bootId"] for x in boots if x["sandbox"] == NAME] == [boot["bootId"], again]


def test_a_strict_restart_keeps_the_conversation_and_never_settles_its_submission(
        moded: tuple[FakeCluster, VirtualClock]) -> None:
    cluster, _ = moded
    cluster.script("coder", [Hang()])
    answer = post(cluster).json()
    cluster.faults.harness_restart(NAME)
    polled = poll(cluster, answer["streamUrl"], "0")
    aborted = requests.post(url(cluster, "/agents/coder/c-1/abort"), headers=auth(cluster), timeout=10)
    assert aborted.status_code == 200 and aborted.json() == {"aborted": False}
    after_abort = poll(cluster, answer["streamUrl"], "0")
    kept = post(cluster, kept=True)
    (cut,) = cluster.harness_read(lambda core: list(core.cut))
    assert (cut["conversationId"], cut["submissionId"]) == ("c-1", answer["submissionId"])
    if cluster.harness_mode == "lenient":
        assert polled.status_code == 404  # the conversation went with the process
        assert kept.status_code == 404 and kept.json()["kept"] is False
        return
    assert polled.status_code == 204  # the record is kept; the Submission it ran never settles
    assert after_abort.status_code == 204  # nor does the abort settle it
    assert kept.status_code == 200 and kept.json()["submissionId"] != answer["submissionId"]
    types = [e["type"] for e in poll(cluster, answer["streamUrl"], "0").json()]
    assert types.count("submission-settled") == 1  # the new Submission's ("Done."), never the old one's


def test_a_scripted_kernel_kill_in_strict_mode_keeps_the_conversation_and_marks_oomkilled(
        moded: tuple[FakeCluster, VirtualClock]) -> None:
    cluster, _ = moded
    cluster.script("coder", [KernelKill()])
    answer = post(cluster).json()
    assert restarts(cluster) == 1
    assert healthz(cluster).json()["bootId"] != answer["bootId"]
    assert poll(cluster, answer["streamUrl"], "0").status_code == (204 if cluster.harness_mode == "strict" else 404)


def test_an_admission_not_kept_into_a_held_conversation_is_flagged_and_a_kept_one_is_not(
        moded: tuple[FakeCluster, VirtualClock]) -> None:
    cluster, _ = moded
    assert post(cluster).status_code == 200
    assert post(cluster, kept=True).status_code == 200
    assert post(cluster).status_code == 200  # the Harness continues it; the record says it was not kept
    assert post(cluster, "c-2").status_code == 200
    assert [bool(a.get("heldUnkept")) for a in cluster.admissions()] == [False, False, True, False]


def test_the_watch_shows_a_restart_after_the_new_process_answers_when_it_lags(
        moded: tuple[FakeCluster, VirtualClock]) -> None:
    cluster, clock = moded
    before = healthz(cluster).json()["bootId"]
    cluster.faults.harness_restart(NAME, watch_lag=1.5)
    assert healthz(cluster).json()["bootId"] != before  # the new process answers now …
    assert restarts(cluster) == 0  # … and the watch does not show its restart yet
    clock.advance(1.0)
    assert restarts(cluster) == 0
    clock.advance(0.6)
    # The timer tells the operator, whose status write reaches the API server on its own thread: wait for it.
    wait_until(lambda: restarts(cluster) == 1, what="the restart on the Sandbox's status")
    (call,) = cluster.faults.log
    assert dict(call.params) == {"sandbox": NAME, "watch_lag": 1.5}


def test_the_watch_shows_a_restart_before_the_new_process_answers_when_it_leads(
        moded: tuple[FakeCluster, VirtualClock]) -> None:
    cluster, clock = moded
    before = healthz(cluster).json()["bootId"]
    cluster.faults.kernel_oom(NAME, watch_lag=-1.0)
    assert restarts(cluster) == 1  # the watch shows the end …
    assert healthz(cluster).status_code == 503 and post(cluster).status_code == 503  # … and nothing answers yet
    clock.advance(1.1)
    assert healthz(cluster).status_code == 200 and healthz(cluster).json()["bootId"] != before
    assert post(cluster).status_code == 200


def test_a_restart_aimed_at_a_sandbox_that_is_not_there_is_skipped_whatever_its_lag() -> None:
    with FakeCluster(bookmark_interval=None) as cluster:
        for lag in (0.0, 1.0, -1.0):
            cluster.faults.harness_restart("ws-nobody", watch_lag=lag)
        assert [bool(c.skipped) for c in cluster.faults.log] == [True, True, True]


@pytest.mark.parametrize("lag", ["soon", True, 61, -61, None, [1]])
def test_a_schedule_with_a_watch_lag_that_is_not_seconds_is_refused_by_its_entry(lag: object) -> None:
    with pytest.raises(FaultScheduleError, match="watch_lag"):
        Faults.load([{"at": 0, "fault": "harness_restart", "sandbox": "ws-a", "watch_lag": lag}])
    assert Faults.load([{"at": 0, "fault": "kernel_oom", "sandbox": "ws-a", "watch_lag": -2}])[0].params[
        "watch_lag"] == -2


def test_a_mode_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="strict"):
        FakeCluster(harness_mode="kind")
    with pytest.raises(ValueError, match="strict"):
        HarnessCore("kind")


def test_fake_cluster_refuses_a_harness_mode_that_is_not_one_in_one_line_and_exit_2(tmp_path: Any) -> None:
    done = jr2("fake-cluster", "--kubeconfig-out", str(tmp_path / "k"), "--harness-mode", "kind")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "harness-mode" in done.stderr and "Traceback" not in done.stderr
