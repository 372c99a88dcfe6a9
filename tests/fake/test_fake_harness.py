"""The fake Harness, CONTRACTS.md §3 whole: auth first, attach, admissions, the long-poll, picks, kills."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import GuardKill, Hang, KernelKill, Pick, ProviderLimit, Say
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.watch.sandbox import view
from tests.support.harness_http import NAME, T0, admission, auth, poll, url
from tests.support.sandboxes import ready_sandbox
from tests.support.waiting import wait_until


@pytest.fixture
def harnessed() -> Iterator[FakeCluster]:
    clock = VirtualClock(wall=T0)
    with FakeCluster(clock=clock, start_seconds=1, long_poll=0.2) as cluster:
        ready_sandbox(cluster, clock, NAME)
        yield cluster


def admit(cluster: FakeCluster, conv: str = "c-1", **extra: Any) -> dict[str, Any]:
    resp = requests.post(url(cluster, f"/agents/coder/{conv}"), json=admission(**extra), headers=auth(cluster),
                         timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def test_healthz_is_open_and_everything_else_needs_the_token_first(harnessed: FakeCluster) -> None:
    assert requests.get(url(harnessed, "/healthz"), timeout=10).status_code == 200
    for headers in ({}, {"Authorization": "Bearer wrong"}, auth(harnessed, "ws-other"),
                    {"Authorization": f"Basic {harnessed.harness_token(NAME)}"}):
        resp = requests.post(url(harnessed, "/attach"), data=b"{not json", headers=headers, timeout=10)
        assert resp.status_code == 401
        assert resp.json() == {"error": "unauthorized"}


def test_attach_answers_each_slot_and_refuses_bad_input(harnessed: FakeCluster) -> None:
    body = {"slots": [{"slot": "app", "url": "https://example.test/app.git", "identity": "jr2", "key": "k1",
                       "ref": "main"}], "branch": "feat/fix"}
    resp = requests.post(url(harnessed, "/attach"), json=body, headers=auth(harnessed), timeout=10)
    assert resp.json() == {"repos": {"app": "/work/app/feat-fix"}}
    bad = requests.post(url(harnessed, "/attach"), json={"slots": [{"slot": "../x", "url": "u", "identity": "i",
                                                                     "key": "k"}], "branch": "b"},
                        headers=auth(harnessed), timeout=10)
    assert bad.status_code == 400 and bad.json()["slot"] == "../x"
    garbage = requests.post(url(harnessed, "/attach"), data=b"[[[", headers=auth(harnessed), timeout=10)
    assert garbage.status_code == 400


def test_admission_streams_a_turn_and_the_long_poll_ends_in_204(harnessed: FakeCluster) -> None:
    harnessed.script("coder", [Say("I fixed it.")])
    answer = admit(harnessed)
    assert answer["offset"] == "0" and answer["submissionId"]
    resp = poll(harnessed, answer["streamUrl"], answer["offset"])
    assert resp.status_code == 200
    events = resp.json()
    assert [e["type"] for e in events] == ["message-appended", "submission-settled"]
    assert events[1]["outcome"] == "completed" and events[1]["submissionId"] == answer["submissionId"]
    assert [e["position"] for e in events] == [{"batch": 1, "index": 0}, {"batch": 1, "index": 1}]
    assert resp.headers["stream-next-offset"] == "2"
    assert resp.headers["stream-up-to-date"] == "true"
    idle = poll(harnessed, answer["streamUrl"], resp.headers["stream-next-offset"])
    assert idle.status_code == 204


def test_admissions_are_recorded_exactly_as_sent(harnessed: FakeCluster) -> None:
    admit(harnessed, notices=[{"kind": "memory-kill", "text": "x"}])
    (record,) = harnessed.admissions()
    assert record["body"] == admission(notices=[{"kind": "memory-kill", "text": "x"}])
    assert (record["sandbox"], record["agent"], record["conversationId"]) == (NAME, "coder", "c-1")


def test_a_pick_waits_for_its_answer(harnessed: FakeCluster) -> None:
    harnessed.script("coder", [Pick("finish", {"summary": "done"}), Say("thanks")])
    answer = admit(harnessed)
    (pick,) = poll(harnessed, answer["streamUrl"], "0").json()
    assert (pick["type"], pick["pick"], pick["args"]) == ("pick", "finish", {"summary": "done"})
    wrong = requests.post(url(harnessed, "/agents/coder/c-1/answers"),
                          json={"callId": "nope", "over": False, "answer": "x"}, headers=auth(harnessed), timeout=10)
    assert wrong.status_code == 409
    ok = requests.post(url(harnessed, "/agents/coder/c-1/answers"),
                       json={"callId": pick["callId"], "over": False, "answer": "accepted"}, headers=auth(harnessed),
                       timeout=10)
    assert ok.status_code == 200
    rest = poll(harnessed, answer["streamUrl"], "1").json()
    assert [e["type"] for e in rest] == ["message-appended", "submission-settled"]


def test_provider_limit_settles_failed_with_its_type(harnessed: FakeCluster) -> None:
    harnessed.script("coder", [ProviderLimit("retries exhausted")])
    answer = admit(harnessed)
    (settled,) = poll(harnessed, answer["streamUrl"], "0").json()
    assert settled["outcome"] == "failed"
    assert settled["error"] == {"type": "provider_limit", "message": "retries exhausted"}


def test_guard_kill_is_on_the_stream_and_on_memory_kills(harnessed: FakeCluster) -> None:
    harnessed.script("coder", [GuardKill(peak="1.9Gi", limit="2Gi")])
    answer = admit(harnessed, conv="c-9")
    events = poll(harnessed, answer["streamUrl"], "0").json()
    assert [e["type"] for e in events] == ["memory-limit", "submission-settled"]
    kills = requests.get(url(harnessed, "/memory-kills"), headers=auth(harnessed), timeout=10).json()["kills"]
    assert len(kills) == 1
    assert kills[0]["id"] == events[0]["id"]
    assert (kills[0]["peak"], kills[0]["limit"], kills[0]["told"]) == ("1.9Gi", "2Gi", ["c-9"])


def test_kernel_kill_marks_oomkilled_and_loses_the_conversation(harnessed: FakeCluster) -> None:
    harnessed.script("coder", [KernelKill("node: heap grew past the container limit\nKilled")])
    answer = admit(harnessed)
    assert poll(harnessed, answer["streamUrl"], "0").status_code == 404
    status = view(harnessed.client().get(SANDBOX, NAME) or {})
    assert status.last_terminated is not None
    assert (status.last_terminated.reason, status.last_terminated.exit_code) == ("OOMKilled", 137)
    assert status.restart_count == 1


def test_kept_for_an_unknown_conversation_is_a_404_saying_so(harnessed: FakeCluster) -> None:
    resp = requests.post(url(harnessed, "/agents/coder/c-new"), json=admission(kept=True), headers=auth(harnessed),
                         timeout=10)
    assert resp.status_code == 404
    assert resp.json()["kept"] is False


def test_draining_answers_503(harnessed: FakeCluster) -> None:
    harnessed.harness(lambda core: core.set_draining(NAME, True))
    resp = requests.post(url(harnessed, "/agents/coder/c-1"), json=admission(), headers=auth(harnessed), timeout=10)
    assert resp.status_code == 503


def test_a_hung_turn_can_be_aborted(harnessed: FakeCluster) -> None:
    harnessed.script("coder", [Hang()])
    answer = admit(harnessed)
    assert poll(harnessed, answer["streamUrl"], "0").status_code == 204
    aborted = requests.post(url(harnessed, "/agents/coder/c-1/abort"), headers=auth(harnessed), timeout=10)
    assert aborted.json() == {"aborted": True}
    (settled,) = poll(harnessed, answer["streamUrl"], "0").json()
    assert settled["outcome"] == "aborted"


def test_bad_admissions_are_400(harnessed: FakeCluster) -> None:
    for body in ({"message": "x"}, {**admission(), "allowed": "finish"}, {**admission(), "kept": "yes"}):
        resp = requests.post(url(harnessed, "/agents/coder/c-1"), json=body, headers=auth(harnessed), timeout=10)
        assert resp.status_code == 400
    big = requests.post(url(harnessed, "/agents/coder/c-1"), data=b"x" * (1024 * 1024 + 1), headers=auth(harnessed),
                        timeout=10)
    assert big.status_code == 413


def test_a_sandbox_that_is_not_ready_has_no_harness(harnessed: FakeCluster) -> None:
    harnessed.client().apply(SANDBOX, "ws-pending", {"spec": {"env": harnessed.harness_env("ws-pending")}})
    resp = requests.post(f"{harnessed.harness_url}/ws-pending/attach", json={"slots": [], "branch": "b"},
                         headers=auth(harnessed, "ws-pending"), timeout=10)
    assert resp.status_code == 503


def test_the_instance_harness_takes_its_own_token(harnessed: FakeCluster) -> None:
    from jr2_actors.harness.tokens import INSTANCE_HARNESS

    base = harnessed.instance_harness_url
    refused = requests.post(f"{base}/agents/triage/c-1", json=admission("triage"), headers=auth(harnessed), timeout=10)
    assert refused.status_code == 401
    ok = requests.post(f"{base}/agents/triage/c-1", json=admission("triage"),
                       headers=auth(harnessed, INSTANCE_HARNESS), timeout=10)
    assert ok.status_code == 200
    assert ok.json()["streamUrl"].startswith(base + "/streams/")


def test_hostile_memory_kill_bytes_are_served_as_written(harnessed: FakeCluster) -> None:
    raw = b'{"kills": [{"id": "' + b"x" * 100 + b'"}]}'
    harnessed.harness(lambda core: core.set_raw_memory_kills(NAME, raw))
    assert requests.get(url(harnessed, "/memory-kills"), headers=auth(harnessed), timeout=10).content == raw


def post(cluster: FakeCluster, path: str, body: Any = None) -> requests.Response:
    return requests.post(url(cluster, path), json=body, headers=auth(cluster), timeout=10)


def test_a_submission_runs_on_after_an_over_true_answer_and_a_second_admission_is_409_until_it_settles(
        harnessed: FakeCluster) -> None:
    """CONTRACTS.md §3: one Submission at a time per conversation; the run-on lever is a real model's tail."""
    clock: VirtualClock = harnessed.clock  # type: ignore[assignment]
    harnessed.harness(lambda core: core.set_run_on(3.0))
    harnessed.script("coder", [Pick("finish")], [Say("next")])
    first = admit(harnessed)
    (pick,) = poll(harnessed, first["streamUrl"], first["offset"]).json()
    assert post(harnessed, "/agents/coder/c-1/answers", {"callId": pick["callId"], "over": True,
                                                         "answer": "ok"}).status_code == 200
    busy = post(harnessed, "/agents/coder/c-1", admission(kept=True))
    assert (busy.status_code, busy.json()) == (409, {"error": "a submission is still running in this conversation"})
    clock.advance(3.0)

    def settled() -> bool:
        resp = poll(harnessed, first["streamUrl"], "1")
        return resp.status_code == 200 and any(e["type"] == "submission-settled" for e in resp.json())

    wait_until(settled, what="the run-on's settle")
    assert admit(harnessed, kept=True)["submissionId"]


def test_an_abort_during_a_run_on_is_answered_at_once_and_settles_after_it(harnessed: FakeCluster) -> None:
    clock: VirtualClock = harnessed.clock  # type: ignore[assignment]
    harnessed.harness(lambda core: core.set_run_on(3.0))
    harnessed.script("coder", [Hang()])
    admit(harnessed)
    assert post(harnessed, "/agents/coder/c-1/abort").json() == {"aborted": True}
    assert post(harnessed, "/agents/coder/c-1", admission(kept=True)).status_code == 409
    clock.advance(3.0)
    wait_until(lambda: post(harnessed, "/agents/coder/c-1", admission(kept=True)).status_code == 200,
               what="the abort's settle")


def test_refused_answers_are_not_taken_and_the_call_still_waits(harnessed: FakeCluster) -> None:
    harnessed.harness(lambda core: core.refuse_answers(1, 503))
    harnessed.script("coder", [Pick("finish")])
    first = admit(harnessed)
    (pick,) = poll(harnessed, first["streamUrl"], first["offset"]).json()
    answer = {"callId": pick["callId"], "over": True, "answer": "ok"}
    assert post(harnessed, "/agents/coder/c-1/answers", answer).status_code == 503
    assert harnessed.harness_read(lambda core: list(core.answers)) == []
    assert post(harnessed, "/agents/coder/c-1/answers", answer).status_code == 200


def test_a_sandbox_made_again_under_its_name_has_a_harness_of_its_own(harnessed: FakeCluster) -> None:
    # Found by the simulation (seed 257): a Sandbox evicted, deleted and made again kept its old Harness, so
    # an orphan Submission of the gone pod refused every admission 409. A new pod is a new Harness.
    harnessed.script("coder", [GuardKill(peak="1.9Gi", limit="2Gi"), Hang()])
    admit(harnessed, conv="c-old")
    harnessed.client().delete(SANDBOX, NAME)
    wait_until(lambda: harnessed.harness_read(lambda core: core.kills_of(NAME) == []),
               what="the Harness gone with its pod")
    assert isinstance(harnessed.clock, VirtualClock)
    ready_sandbox(harnessed, harnessed.clock, NAME)
    kills = requests.get(url(harnessed, "/memory-kills"), headers=auth(harnessed), timeout=10).json()["kills"]
    assert kills == []  # the gone pod's list went with it
    again = admit(harnessed, conv="c-old")  # not 409: nothing of the old conversation runs here
    assert again["submissionId"]
    assert [k["peak"] for k in harnessed.harness_read(lambda core: core.kill_log())] == ["1.9Gi"]  # still in the log
