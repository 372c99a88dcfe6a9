"""The fake Harness's long-poll wakes on its own conversation's changes only. One signal for every Sandbox
answered each parked long-poll at every event anywhere (and its client polled again at once): work a real
Harness does not make, and that grew with the live runs — in a release of thousands, the fake's and serve's CPU
went there. One signal a Sandbox did the same on the Instance Harness, which holds every Menu-only Agent's
conversations: 5,000 of them held serve's seats in a storm of 204s and re-polls, 2 admissions a second."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
import requests

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import INSTANCE, Hang
from jr2_actors.fake.harness.messages import HarnessReply, HarnessRequest
from jr2_actors.harness.tokens import INSTANCE_HARNESS
from jr2_actors.testing.clock import VirtualClock
from tests.support import admissions
from tests.support.sandboxes import ready_sandbox

A, B = "ws-wake-f-1-aaaaaa", "ws-wake-f-2-bbbbbb"


@pytest.fixture
def two() -> Iterator[tuple[FakeCluster, dict[str, str]]]:
    clock = VirtualClock(wall=1_790_000_000.0)
    with FakeCluster(clock=clock, start_seconds=1, long_poll=0.2) as cluster:
        endpoints = {name: ready_sandbox(cluster, clock, name) for name in (A, B)}
        cluster.script("coder", [Hang()], [Hang()])  # a lever: set before any long-poll parks
        yield cluster, endpoints


def admit(cluster: FakeCluster, endpoint: str, name: str) -> dict[str, Any]:
    resp = requests.post(f"{endpoint}/agents/coder/c-1", json=admissions.body(), timeout=10,
                         headers={"Authorization": f"Bearer {cluster.harness_token(name)}"})
    assert resp.status_code == 200, resp.text
    return cast(dict[str, Any], resp.json())


def parked(cluster: FakeCluster, name: str, offset: str, conversation: str = "c-1",
           token: str | None = None) -> HarnessReply:
    """What a long-poll of `name`'s conversation finds with nothing new: a 204 and the signal it waits on."""
    auth = f"Bearer {token or cluster.harness_token(name)}"
    while True:
        reply = cast(HarnessReply, cluster._harness.ask(  # type: ignore[union-attr]
            HarnessRequest(name, "GET", ("streams", "coder", conversation), {"offset": offset}, auth, b""),
            timeout=10))
        if reply.answer.code == 204:
            return reply
        offset = dict(reply.answer.headers)["stream-next-offset"]


def test_a_long_poll_is_woken_by_its_own_sandboxs_change_and_not_by_anothers(
        two: tuple[FakeCluster, dict[str, str]]) -> None:
    cluster, endpoints = two
    first = admit(cluster, endpoints[A], A)
    waiting = parked(cluster, A, first["offset"])
    assert waiting.changed is not None and not waiting.changed.is_set()
    admit(cluster, endpoints[B], B)  # another Sandbox's admission, its Turn begun
    cluster._harness.ask(HarnessRequest(B, "POST", ("agents", "coder", "c-1", "abort"), {},  # type: ignore[union-attr]
                                        f"Bearer {cluster.harness_token(B)}", b""), timeout=10)
    assert not waiting.changed.is_set(), "a change to another Sandbox's Harness woke this long-poll"
    requests.post(f"{endpoints[A]}/agents/coder/c-1/abort", timeout=10,
                  headers={"Authorization": f"Bearer {cluster.harness_token(A)}"})
    assert waiting.changed.wait(10), "its own Sandbox's change did not wake it"


def test_a_lever_that_may_change_any_sandbox_wakes_every_long_poll(two: tuple[FakeCluster, dict[str, str]]) -> None:
    cluster, endpoints = two
    replies = [parked(cluster, name, admit(cluster, endpoints[name], name)["offset"]) for name in (A, B)]
    cluster.harness(lambda core: None)
    assert all(r.changed is not None and r.changed.wait(10) for r in replies)


def test_on_the_instance_harness_a_long_poll_is_woken_by_its_own_conversation_and_not_by_anothers(
        two: tuple[FakeCluster, dict[str, str]]) -> None:
    cluster, _ = two
    token = cluster.harness_token(INSTANCE_HARNESS)
    headers = {"Authorization": f"Bearer {token}"}

    def admit_menu(conversation: str) -> dict[str, Any]:
        resp = requests.post(f"{cluster.instance_harness_url}/agents/coder/{conversation}", json=admissions.body(),
                             headers=headers, timeout=10)
        assert resp.status_code == 200, resp.text
        return cast(dict[str, Any], resp.json())

    waiting = parked(cluster, INSTANCE, admit_menu("c-1")["offset"], "c-1", token)
    assert waiting.changed is not None and not waiting.changed.is_set()
    admit_menu("c-2")  # another Menu-only Agent's conversation on the same Harness, its Turn begun
    requests.post(f"{cluster.instance_harness_url}/agents/coder/c-2/abort", headers=headers, timeout=10)
    assert not waiting.changed.is_set(), "another conversation's admission and abort woke this long-poll"
    requests.post(f"{cluster.instance_harness_url}/agents/coder/c-1/abort", headers=headers, timeout=10)
    assert waiting.changed.wait(10), "its own conversation's abort did not wake it"


def test_the_attach_changes_no_stream_and_wakes_no_long_poll(two: tuple[FakeCluster, dict[str, str]]) -> None:
    cluster, endpoints = two
    waiting = parked(cluster, A, admit(cluster, endpoints[A], A)["offset"])
    resp = requests.post(f"{endpoints[A]}/attach", json={"slots": [], "branch": "b"}, timeout=10,
                         headers={"Authorization": f"Bearer {cluster.harness_token(A)}"})
    assert resp.status_code == 200, resp.text
    assert waiting.changed is not None and not waiting.changed.is_set(), "the attach woke a parked long-poll"


def test_a_read_of_the_harnesss_records_wakes_no_long_poll(two: tuple[FakeCluster, dict[str, str]]) -> None:
    """A bench polling `admissions()` every half second woke each of 5,000 seats' long-polls each time."""
    cluster, endpoints = two
    waiting = parked(cluster, A, admit(cluster, endpoints[A], A)["offset"])
    assert [a["conversationId"] for a in cluster.admissions()] == ["c-1"]
    assert cluster.harness_read(lambda core: len(core.admissions)) == 1
    assert waiting.changed is not None and not waiting.changed.is_set(), "a read woke a parked long-poll"
    cluster.harness(lambda core: None)  # a lever still wakes it
    assert waiting.changed.wait(10)
