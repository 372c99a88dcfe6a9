"""HarnessClient: the contract's calls against the fake Harness, and its resend rules on single calls."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
import responses
import urllib3.exceptions

from jr2_actors.clock import VirtualClock
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import GuardKill, Hang, Pick, Say
from jr2_actors.harness.client import HarnessClient, HarnessError, HarnessProtocolError, HarnessUnreachable
from jr2_actors.harness.memory_kills import MemoryKillListError
from tests.sandboxes import FIXTURES, ready_sandbox

NAME = "ws-client-f-1-abc123"
BASE = "http://harness.test/ws-1"


@pytest.fixture
def live() -> Iterator[tuple[FakeCluster, HarnessClient]]:
    clock = VirtualClock()
    with FakeCluster(clock=clock, start_seconds=1, long_poll=0.2) as cluster:
        endpoint = ready_sandbox(cluster, clock, NAME)
        yield cluster, HarnessClient(endpoint, cluster.harness_token(NAME))


def body(agent: str = "coder", **extra: Any) -> dict[str, Any]:
    return {"definition": {"agent": agent, "instructions": "You fix bugs.", "access": "write", "menu": ["finish"]},
            "message": "Fix it.", "allowed": ["finish"], **extra}


def test_attach_admit_and_read_updates(live: tuple[FakeCluster, HarnessClient]) -> None:
    cluster, harness = live
    assert harness.healthz()
    repos = harness.attach([{"slot": "app", "url": "https://example.test/app.git", "identity": "jr2", "key": "k"}],
                           "feat/x")
    assert repos == {"app": "/work/app/feat-x"}
    cluster.script("coder", [Pick("finish", {"why": "tests pass"}), Say("ok")])
    admission = harness.admit("coder", "c-1", body())
    first = harness.updates(admission.stream_url, admission.offset)
    (pick,) = first.events
    assert pick["type"] == "pick" and first.next_offset == "1" and first.up_to_date
    harness.answer("coder", "c-1", pick["callId"], over=True, answer="accepted")
    rest = harness.updates(admission.stream_url, first.next_offset)
    assert [e["type"] for e in rest.events] == ["submission-settled"]
    idle = harness.updates(admission.stream_url, rest.next_offset)
    assert idle.events == []


def test_refusals_carry_the_harness_words(live: tuple[FakeCluster, HarnessClient]) -> None:
    _, harness = live
    with pytest.raises(HarnessError) as err:
        harness.admit("coder", "c-unknown", body(kept=True))
    assert err.value.status == 404 and err.value.body["kept"] is False
    stranger = HarnessClient(harness.base_url, "not-the-token")
    with pytest.raises(HarnessError) as denied:
        stranger.attach([], "b")
    assert (denied.value.status, denied.value.error) == (401, "unauthorized")
    assert "not-the-token" not in repr(stranger)


def test_abort_and_memory_kills(live: tuple[FakeCluster, HarnessClient]) -> None:
    cluster, harness = live
    cluster.script("coder", [Hang()], [GuardKill("1.9Gi", "2Gi")])
    harness.admit("coder", "c-1", body())
    assert harness.abort("coder", "c-1") is True
    harness.admit("coder", "c-2", body())
    read = harness.memory_kills()
    (kill,) = read.kills
    assert (kill.peak, kill.limit, kill.told) == ("1.9Gi", "2Gi", ("c-2",))


def test_hostile_memory_kills_are_parsed_as_untrusted(live: tuple[FakeCluster, HarnessClient]) -> None:
    cluster, harness = live
    raw = (FIXTURES / "memory-kills-hostile.json").read_bytes()
    cluster.harness(lambda core: core.set_raw_memory_kills(NAME, raw))
    assert {k.id for k in harness.memory_kills().kills} == {"k-bad-size", "k-told"}
    cluster.harness(lambda core: core.set_raw_memory_kills(NAME, b"garbage"))
    with pytest.raises(MemoryKillListError):
        harness.memory_kills()
    cluster.harness(lambda core: core.set_raw_memory_kills(NAME, b"[" * (300 * 1024)))
    with pytest.raises(HarnessProtocolError):
        harness.memory_kills()


# -- resend rules, one call at a time ----------------------------------------------------------------

NEVER_REACHED = requests.exceptions.ConnectionError(
    urllib3.exceptions.NewConnectionError(None, "connection refused"))  # type: ignore[arg-type]
RESET = requests.exceptions.ConnectionError("Connection aborted: reset by peer")


def client_with_clock() -> tuple[HarnessClient, VirtualClock, list[float]]:
    clock = VirtualClock()
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)

    return HarnessClient(BASE, "t0k3n", clock=clock, wait=wait), clock, waits


@responses.activate
def test_a_request_that_never_reached_is_sent_again_with_backoff() -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/attach", body=NEVER_REACHED)
    responses.post(f"{BASE}/attach", body=NEVER_REACHED)
    responses.post(f"{BASE}/attach", json={"repos": {}})
    assert harness.attach([], "b") == {}
    assert len(responses.calls) == 3
    assert waits == [0.25, 0.5]


@responses.activate
def test_never_reached_for_ninety_seconds_gives_up() -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/attach", body=NEVER_REACHED)
    with pytest.raises(HarnessUnreachable) as err:
        harness.attach([], "b")
    assert err.value.reached is False
    assert sum(waits) <= 90
    assert max(waits) == 5.0


@responses.activate
@pytest.mark.parametrize("status", [400, 403, 500, 501, 503])
def test_an_answer_that_is_not_2xx_is_never_resent(status: int) -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", status=status, json={"error": "no"})
    with pytest.raises(HarnessError) as err:
        harness.admit("coder", "c-1", body())
    assert err.value.status == status
    assert len(responses.calls) == 1


@responses.activate
def test_a_request_that_may_have_arrived_is_not_resent() -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", body=RESET)
    with pytest.raises(HarnessUnreachable) as err:
        harness.admit("coder", "c-1", body())
    assert err.value.reached is True
    assert len(responses.calls) == 1


@responses.activate
def test_memory_kill_read_asks_a_draining_harness_again_within_five_seconds() -> None:
    harness, _, waits = client_with_clock()
    responses.get(f"{BASE}/memory-kills", status=503, json={"error": "draining"})
    responses.get(f"{BASE}/memory-kills", body=(FIXTURES / "memory-kills-valid.json").read_bytes())
    assert len(harness.memory_kills().kills) == 2
    assert waits == [0.25]


@responses.activate
def test_memory_kill_read_gives_up_at_its_limit() -> None:
    harness, _, waits = client_with_clock()
    responses.get(f"{BASE}/memory-kills", status=503, json={"error": "draining"})
    with pytest.raises(HarnessError) as err:
        harness.memory_kills()
    assert err.value.status == 503
    assert sum(waits) <= 5.0


@responses.activate
@pytest.mark.parametrize("answer", [b"not json", b"[1]", b'{"streamUrl": 5}', b'{"offset": "0"}'])
def test_malformed_admission_answers_are_protocol_errors(answer: bytes) -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", body=answer)
    with pytest.raises(HarnessProtocolError):
        harness.admit("coder", "c-1", body())
