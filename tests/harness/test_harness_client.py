"""HarnessClient: the contract's calls against the fake Harness, its resend rules on single calls, the
memory-kill read's total deadline against a real slow peer, cuts, foreign stream URLs, one session each."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
import responses
import urllib3.exceptions

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import GuardKill, Hang, Pick, Say
from jr2_actors.harness.client import HarnessClient, HarnessClients
from jr2_actors.harness.errors import ConversationNotKept, HarnessError, HarnessProtocolError, HarnessUnreachable
from jr2_actors.harness.memory_kills import MemoryKillListError
from jr2_actors.net.cut import Cut, mount_cuts
from jr2_actors.shell import Timers
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.constants import (
    ADMISSION_BUSY_SECONDS,
    ADMISSION_PROBE_MISSES,
    PROVISION_BUDGET_SECONDS,
    READ_TIMEOUT_SECONDS,
)
from tests.support import admissions
from tests.support.paths import FIXTURES
from tests.support.sandboxes import ready_sandbox
from tests.support.slow_server import Mode, SlowServer
from tests.support.waiting import wait_until

NAME = "ws-client-f-1-abc123"
BASE = "http://harness.test/ws-1"


@pytest.fixture
def live() -> Iterator[tuple[FakeCluster, HarnessClient]]:
    clock = VirtualClock()
    with FakeCluster(clock=clock, start_seconds=1, long_poll=0.2) as cluster:
        endpoint = ready_sandbox(cluster, clock, NAME)
        client = HarnessClient(endpoint, cluster.harness_token(NAME))
        yield cluster, client
        client.close()


def test_attach_admit_and_read_updates(live: tuple[FakeCluster, HarnessClient]) -> None:
    cluster, harness = live
    assert harness.healthz()
    repos = harness.attach([{"slot": "app", "url": "https://example.test/app.git", "identity": "jr2", "key": "k"}],
                           "feat/x")
    assert repos == {"app": "/work/app/feat-x"}
    cluster.script("coder", [Pick("finish", {"why": "tests pass"}), Say("ok")])
    admission = harness.admit("coder", "c-1", admissions.admission())
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
    with pytest.raises(ConversationNotKept) as err:
        harness.admit("coder", "c-unknown", admissions.admission(kept=True))
    assert err.value.status == 404 and err.value.body["kept"] is False
    stranger = HarnessClient(harness.base_url, "not-the-token")
    with pytest.raises(HarnessError) as denied:
        stranger.attach([], "b")
    assert (denied.value.status, denied.value.error) == (401, "unauthorized")
    assert "not-the-token" not in repr(stranger)
    stranger.close()


def test_abort_and_memory_kills(live: tuple[FakeCluster, HarnessClient]) -> None:
    cluster, harness = live
    cluster.script("coder", [Hang()], [GuardKill("1.9Gi", "2Gi")])
    harness.admit("coder", "c-1", admissions.admission())
    assert harness.abort("coder", "c-1") is True
    harness.admit("coder", "c-2", admissions.admission())
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


@pytest.fixture
def clients() -> Iterator[list[HarnessClient]]:
    made: list[HarnessClient] = []
    yield made
    for client in made:
        client.close()


@pytest.fixture
def client_with_clock(clients: list[HarnessClient]) -> Any:
    def make(base: str = BASE) -> tuple[HarnessClient, VirtualClock, list[float]]:
        clock = VirtualClock()
        waits: list[float] = []

        def wait(seconds: float) -> None:
            waits.append(seconds)
            clock.advance(seconds)

        client = HarnessClient(base, "t0k3n", clock=clock, wait=wait)
        clients.append(client)
        return client, clock, waits

    return make


@responses.activate
def test_a_request_that_never_reached_is_sent_again_with_backoff(client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/attach", body=NEVER_REACHED)
    responses.post(f"{BASE}/attach", body=NEVER_REACHED)
    responses.post(f"{BASE}/attach", json={"repos": {}})
    assert harness.attach([], "b") == {}
    assert len(responses.calls) == 3
    assert waits == [0.25, 0.5]


@responses.activate
def test_an_attach_waits_the_provisioning_budget_for_its_answer_and_other_calls_30_s(client_with_clock: Any) -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/attach", json={"repos": {}})
    responses.post(f"{BASE}/agents/coder/c-1/abort", json={"aborted": False})
    harness.attach([], "b")
    harness.abort("coder", "c-1")
    read_timeouts = [call.request.req_kwargs["timeout"][1] for call in responses.calls]  # type: ignore[attr-defined]
    assert read_timeouts == [PROVISION_BUDGET_SECONDS, READ_TIMEOUT_SECONDS]


@responses.activate
def test_never_reached_for_ninety_seconds_gives_up(client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/attach", body=NEVER_REACHED)
    with pytest.raises(HarnessUnreachable) as err:
        harness.attach([], "b")
    assert err.value.reached is False
    assert sum(waits) <= 90
    assert max(waits) == 5.0


@responses.activate
@pytest.mark.parametrize("status", [400, 403, 404, 500, 501])
def test_an_answer_that_is_not_2xx_is_never_resent(status: int, client_with_clock: Any) -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", status=status, json={"error": "no"})
    with pytest.raises(HarnessError) as err:
        harness.admit("coder", "c-1", admissions.admission())
    assert err.value.status == status
    assert len(responses.calls) == 1


@responses.activate
def test_a_request_that_may_have_arrived_is_not_resent(client_with_clock: Any) -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", body=RESET)
    with pytest.raises(HarnessUnreachable) as err:
        harness.admit("coder", "c-1", admissions.admission())
    assert err.value.reached is True
    assert len(responses.calls) == 1


@responses.activate
def test_memory_kill_read_asks_a_draining_harness_again_within_five_seconds(client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.get(f"{BASE}/memory-kills", status=503, json={"error": "draining"})
    responses.get(f"{BASE}/memory-kills", body=(FIXTURES / "memory-kills-valid.json").read_bytes())
    assert len(harness.memory_kills().kills) == 2
    assert waits == [0.25]


@responses.activate
def test_memory_kill_read_gives_up_at_its_limit(client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.get(f"{BASE}/memory-kills", status=503, json={"error": "draining"})
    with pytest.raises(HarnessError) as err:
        harness.memory_kills()
    assert err.value.status == 503
    assert sum(waits) <= 5.0


@responses.activate
@pytest.mark.parametrize("answer", [b"not json", b"[1]", b'{"streamUrl": 5}', b'{"offset": "0"}'])
def test_malformed_admission_answers_are_protocol_errors(answer: bytes, client_with_clock: Any) -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", body=answer)
    with pytest.raises(HarnessProtocolError):
        harness.admit("coder", "c-1", admissions.admission())


@responses.activate
def test_an_attach_answered_503_is_not_resent(client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/attach", status=503, json={"error": "draining"})
    with pytest.raises(HarnessError) as err:
        harness.attach([], "b")
    assert (err.value.status, len(responses.calls), waits) == (503, 1, [])


@responses.activate
def test_an_admission_answered_503_is_sent_again(client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", status=503, json={"error": "draining"})
    responses.post(f"{BASE}/agents/coder/c-1", status=503, json={"error": "draining"})
    responses.post(f"{BASE}/agents/coder/c-1", json={"streamUrl": f"{BASE}/streams/coder/c-1", "offset": "0",
                                                     "submissionId": "s-1"})
    admission = harness.admit("coder", "c-1", admissions.admission())
    assert (admission.submission_id, len(responses.calls), waits) == ("s-1", 3, [0.25, 0.5])


@responses.activate
def test_an_admission_answered_429_is_sent_again_after_its_retry_after(client_with_clock: Any) -> None:
    """CONTRACTS §3: a 429 is a refusal before anything ran: sent again once its `Retry-After` is over (an HTTP
    date or seconds; a longer wait than the backoff's), never a failed Turn."""
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", status=429, headers={"Retry-After": "7"}, json={"error": "busy"})
    responses.post(f"{BASE}/agents/coder/c-1", status=429, json={"error": "busy"})  # none: the backoff's
    responses.post(f"{BASE}/agents/coder/c-1", json={"streamUrl": f"{BASE}/streams/coder/c-1", "offset": "0",
                                                     "submissionId": "s-1"})
    admission = harness.admit("coder", "c-1", admissions.admission())
    assert (admission.submission_id, len(responses.calls), waits) == ("s-1", 3, [7.0, 0.5])


@responses.activate
def test_a_retry_after_past_thirty_seconds_is_waited_thirty_and_a_429_then_fails_with_its_status(
        client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", status=429, headers={"Retry-After": "45"}, json={"error": "busy"})
    with pytest.raises(HarnessError) as err:
        harness.admit("coder", "c-1", admissions.admission())
    assert err.value.status == 429 and waits == [30.0] and len(responses.calls) == 2


@responses.activate
def test_an_admission_draining_for_thirty_seconds_fails(client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", status=503, json={"error": "draining"})
    with pytest.raises(HarnessError) as err:
        harness.admit("coder", "c-1", admissions.admission())
    assert err.value.status == 503
    assert waits == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0]  # 27.75 s; one more would pass 30 s
    assert len(responses.calls) == len(waits) + 1


@responses.activate
def test_a_client_closed_while_it_waits_to_retry_gives_up_at_once(clients: list[HarnessClient]) -> None:
    """A seat that stops (its run ended) closes its client: an admission waiting out a draining Harness
    must not hold its pool thread — and the orchestrator's stop — for the rest of its 30 s."""
    clock = VirtualClock()  # never advanced: only the close can end the wait
    harness = HarnessClient(BASE, "t0k3n", clock=clock)
    clients.append(harness)
    responses.post(f"{BASE}/agents/coder/c-1", status=503, json={"error": "draining"})
    failed: list[HarnessUnreachable] = []
    done = threading.Event()

    def admit() -> None:
        try:
            harness.admit("coder", "c-1", admissions.admission())
        except HarnessUnreachable as e:
            failed.append(e)
        done.set()

    threading.Thread(target=admit, daemon=True).start()
    wait_until(lambda: len(responses.calls) == 1, what="the first admission answered 503")
    harness.close()
    assert done.wait(10), "the retry kept waiting after the close"
    assert len(failed) == 1 and "closed before its retry" in str(failed[0]) and not failed[0].reached
    assert len(responses.calls) == 1  # nothing sent after the close


@responses.activate
@pytest.mark.parametrize(("answer", "not_kept"), [
    ({"error": "conversation c-1 is not held here", "kept": False}, True),
    ({"error": "no route"}, False),
    ({"error": "gone", "kept": "false"}, False),
    ({"error": "gone", "kept": True}, False),
])
def test_only_a_404_saying_kept_false_is_the_refusal(answer: dict[str, Any], not_kept: bool,
                                                      client_with_clock: Any) -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", status=404, json=answer)
    with pytest.raises(HarnessError) as err:
        harness.admit("coder", "c-1", admissions.admission(kept=True))
    assert isinstance(err.value, ConversationNotKept) is not_kept
    assert err.value.status == 404


@responses.activate
@pytest.mark.parametrize("stream_url", [
    "http://evil.test/ws-1/streams/coder/c-1",
    "https://harness.test/ws-1/streams/coder/c-1",
    "http://harness.test:8080/ws-1/streams/coder/c-1",
    "http://harness.test/ws-2/streams/coder/c-1",
    "http://user:pw@harness.test/ws-1/streams/coder/c-1",
    "//evil.test/ws-1/streams",
    "http://harness.test:notaport/ws-1/x",
])
def test_a_stream_url_off_the_harness_is_refused(stream_url: str, client_with_clock: Any) -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", json={"streamUrl": stream_url, "offset": "0", "submissionId": "s"})
    with pytest.raises(HarnessProtocolError) as err:
        harness.admit("coder", "c-1", admissions.admission())
    assert "not on the Harness" in str(err.value)
    with pytest.raises(HarnessProtocolError):
        harness.updates(stream_url, "0")
    assert len(responses.calls) == 1  # the updates request never left


@responses.activate
def test_a_relative_stream_url_is_resolved_on_the_harness(client_with_clock: Any) -> None:
    harness, _, _ = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", json={"streamUrl": "/ws-1/streams/coder/c-1", "offset": "0",
                                                     "submissionId": "s"})
    assert harness.admit("coder", "c-1", admissions.admission()).stream_url == f"{BASE}/streams/coder/c-1"


@responses.activate
def test_a_redirect_is_never_followed(client_with_clock: Any) -> None:
    harness, _, _ = client_with_clock()
    url = f"{BASE}/streams/coder/c-1"
    responses.get(url, status=302, headers={"Location": "http://evil.test/steal"})
    responses.get("http://evil.test/steal", json=[])
    with pytest.raises(HarnessError) as err:
        harness.updates(url, "0")
    assert err.value.status == 302
    assert [str(c.request.url).split("?")[0] for c in responses.calls] == [url]


# -- the memory-kill read's total deadline, against a real slow peer ---------------------------------

@pytest.fixture
def slow() -> Iterator[Any]:
    servers: list[SlowServer] = []
    timers: list[Timers] = []
    clients: list[HarnessClient] = []

    def make(mode: Mode) -> tuple[SlowServer, HarnessClient, VirtualClock, Timers]:
        server = SlowServer(mode)
        clock = VirtualClock()
        timer = Timers(clock)
        client = HarnessClient(server.url, "t0k3n", clock=clock, timers=timer)
        servers.append(server)
        timers.append(timer)
        clients.append(client)
        return server, client, clock, timer

    yield make
    for client in clients:
        client.close()
    for timer in timers:
        timer.stop()
    for server in servers:
        server.close()


def in_thread(call: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except Exception as e:
            out["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


@pytest.mark.parametrize("mode", ["trickle-headers", "trickle-body"])
def test_the_memory_kill_read_ends_at_five_seconds_in_total_however_the_harness_trickles(
        slow: Any, mode: Mode) -> None:
    server, client, clock, timers = slow(mode)
    thread, out = in_thread(client.memory_kills)
    assert server.trickling.wait(10), "the peer never started its answer"
    clock.advance(4.9)
    timers.poke()
    assert not server.closed.wait(0.3) and thread.is_alive()  # within the limit the read goes on
    clock.advance(0.1)
    timers.poke()
    thread.join(10)
    assert not thread.is_alive(), "the read outlived its deadline"
    error = out["error"]
    assert isinstance(error, HarnessUnreachable) and "no whole answer within 5s" in str(error)
    assert server.closed.wait(10)  # the connection was ended, not left to trickle on


def test_a_cut_ends_a_long_poll_in_flight(slow: Any) -> None:
    server, client, _, _ = slow("hold")
    cut = Cut()
    thread, out = in_thread(lambda: client.updates(f"{server.url}/streams/coder/c-1", "0", cut=cut))
    assert server.got_request.wait(10)
    cut.fire()
    thread.join(10)
    assert not thread.is_alive() and isinstance(out["error"], HarnessUnreachable)
    assert server.closed.wait(10)
    with pytest.raises(HarnessUnreachable, match="cut before it was sent"):
        client.updates(f"{server.url}/streams/coder/c-1", "0", cut=cut)


@pytest.mark.parametrize("mode", ["hold", "trickle-body"])
def test_a_client_closed_ends_its_request_in_flight_at_once(slow: Any, mode: Mode) -> None:
    """Issue 16 item 9: a stopping Workspace closes its attach's client. An attach whose Harness holds its
    answer (or trickles it) would otherwise hold the attach lane, and the orchestrator's stop, for the read
    timeout's 30 s — or for as long as the trickle lasts."""
    server, client, _, _ = slow(mode)
    thread, out = in_thread(lambda: client.attach([], "main"))
    assert (server.trickling if mode == "trickle-body" else server.got_request).wait(10)
    client.close()
    thread.join(10)
    assert not thread.is_alive(), "the attach outlived its client's close"
    assert isinstance(out.get("error"), (HarnessUnreachable, HarnessProtocolError)), out
    assert server.closed.wait(10)  # the connection was ended, not left to the read timeout
    with pytest.raises(HarnessUnreachable, match="closed"):
        client.attach([], "main")  # a closed client sends nothing more


class _Watched(Timers):
    """Timers that say when something was first scheduled on them (a client's wait before a retry)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.scheduled = threading.Event()

    def schedule(self, when: float, callback: Callable[[], object], label: str = "", *,
                 keepalive: bool = False, kept: bool = False) -> int:
        handle = super().schedule(when, callback, label, keepalive=keepalive, kept=kept)
        self.scheduled.set()
        return handle


def test_a_closed_clients_retries_at_a_refusing_harness_end_at_once() -> None:
    """Connections refused: the attach waits to retry (250 ms doubling, within 90 s) on a clock that never
    moves here; only the close can end it."""
    with socket.socket() as refusing:
        refusing.bind(("127.0.0.1", 0))  # bound, never listening: every connect is refused
        clock = VirtualClock()
        timers = _Watched(clock)
        client = HarnessClient(f"http://127.0.0.1:{refusing.getsockname()[1]}", "t0k3n", clock=clock, timers=timers)
        try:
            thread, out = in_thread(lambda: client.attach([], "main"))
            assert timers.scheduled.wait(10), "the attach never waited to retry"
            client.close()
            thread.join(10)
            assert not thread.is_alive(), "the attach kept retrying after its client's close"
            error = out.get("error")
            assert isinstance(error, HarnessUnreachable) and not error.reached, out
        finally:
            client.close()
            timers.stop()


class _KeepAlive(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    release = threading.Event()
    peers: list[tuple[str, int]] = []  # noqa: RUF012 - one test's record

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.peers.append(self.client_address)
        if self.path.startswith("/slow"):
            self.release.wait(10)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def test_a_late_fire_never_shuts_a_connection_another_request_took_over() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAlive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    session = requests.Session()
    mount_cuts(session)
    try:
        first = Cut()
        with first.active():
            assert session.get(f"{url}/fast", timeout=10).content == b"ok"
        thread, out = in_thread(lambda: session.get(f"{url}/slow", timeout=10).content)
        wait_until(lambda: len(_KeepAlive.peers) == 2, what="the second request")
        first.fire()  # the first request's connection now serves the second
        _KeepAlive.release.set()
        thread.join(10)
        assert out.get("value") == b"ok", out
        assert _KeepAlive.peers[0] == _KeepAlive.peers[1]  # one kept-alive connection served both
    finally:
        session.close()
        server.shutdown()
        server.server_close()


def test_one_client_per_harness_and_each_closed() -> None:
    registry = HarnessClients()
    a = registry.get("http://h.test/ws-1/", "t1")
    assert registry.get("http://h.test/ws-1", "t1") is a
    b = registry.get("http://h.test/ws-2", "t1")
    assert b is not a
    replaced = registry.get("http://h.test/ws-1", "t2")  # the Sandbox's token changed: a new client
    assert replaced is not a and replaced.holds_token("t2") and not replaced.holds_token("t1")
    closed: list[str] = []
    for client in (replaced, b):
        original = client._session.close

        def spy(original: Any = original, client: HarnessClient = client) -> None:
            closed.append(client.base_url)
            original()

        client._session.close = spy  # type: ignore[method-assign]
    registry.close()
    assert sorted(closed) == ["http://h.test/ws-1", "http://h.test/ws-2"]
    with pytest.raises(RuntimeError):
        registry.get("http://h.test/ws-1", "t1")
    a.close()


# -- an admission into a held conversation, and one the Harness takes long to answer (issue 16) ----------

ADMITTED = {"streamUrl": f"{BASE}/streams/coder/c-1", "offset": "0", "submissionId": "s-1"}
BUSY = {"error": "a submission is still running in this conversation"}


@responses.activate
def test_a_409_to_an_admission_into_a_held_conversation_is_not_yet_and_sent_again(client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", status=409, json=BUSY)
    responses.post(f"{BASE}/agents/coder/c-1", status=409, json=BUSY)
    responses.post(f"{BASE}/agents/coder/c-1", json=ADMITTED)
    admission = harness.admit("coder", "c-1", admissions.admission(kept=True), retry_busy=True)
    assert (admission.submission_id, len(responses.calls), waits) == ("s-1", 3, [0.25, 0.5])


@responses.activate
def test_a_409_is_not_yet_only_for_a_held_conversation_and_only_for_a_while(client_with_clock: Any) -> None:
    harness, _, waits = client_with_clock()
    responses.post(f"{BASE}/agents/coder/c-1", status=409, json=BUSY)
    with pytest.raises(HarnessError) as err:
        harness.admit("coder", "c-1", admissions.admission())  # a new conversation: a 409 is the Harness's refusal
    assert (err.value.status, len(responses.calls), waits) == (409, 1, [])
    with pytest.raises(HarnessError) as busy:
        harness.admit("coder", "c-1", admissions.admission(kept=True), retry_busy=True)
    assert busy.value.status == 409 and 55 < sum(waits) <= ADMISSION_BUSY_SECONDS


class _SlowAdmission(BaseHTTPRequestHandler):
    """Holds each admission until `release`; answers /healthz 200 while `alive`, else 503."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()
    alive = threading.Event()
    probes: list[int] = []  # noqa: RUF012 - one test's record

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        code = 200 if self.alive.is_set() else 503
        self.probes.append(code)
        self._answer(code, b'{"ok": true}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.release.wait(30):
            url = f"http://127.0.0.1:{self.server.server_port}/streams/coder/c-1"  # type: ignore[attr-defined]
            self._answer(200, f'{{"streamUrl": "{url}", "offset": "0", "submissionId": "s-9"}}'.encode())

    def _answer(self, code: int, raw: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def slow_admission() -> Iterator[tuple[HarnessClient, VirtualClock, Timers]]:
    _SlowAdmission.release.clear()
    _SlowAdmission.alive.clear()
    _SlowAdmission.probes.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowAdmission)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    clock = VirtualClock()
    timers = Timers(clock)
    client = HarnessClient(f"http://127.0.0.1:{server.server_address[1]}", "t0k3n", clock=clock, timers=timers)
    try:
        yield client, clock, timers
    finally:
        _SlowAdmission.release.set()
        client.close()
        timers.stop()
        server.shutdown()
        server.server_close()


def advance_until(clock: VirtualClock, timers: Timers, done: Any, what: str) -> None:
    def moved() -> bool:
        if done():
            return True
        clock.advance(0.5)
        timers.poke()
        return False

    wait_until(moved, what=what)


def test_an_admission_waits_for_its_answer_as_long_as_the_harness_is_alive(
        slow_admission: tuple[HarnessClient, VirtualClock, Timers]) -> None:
    harness, clock, timers = slow_admission
    _SlowAdmission.alive.set()
    thread, out = in_thread(lambda: harness.admit("coder", "c-1", admissions.admission()))
    # Past the read timeout's 30 s of (virtual) waiting, and past the misses that would cut it: it is alive.
    advance_until(clock, timers, lambda: len(_SlowAdmission.probes) > ADMISSION_PROBE_MISSES + 3,
                  "the Harness asked whether it is alive")
    assert clock.monotonic() > 30 and "error" not in out and "value" not in out
    _SlowAdmission.release.set()
    thread.join(10)
    assert out["value"].submission_id == "s-9"


def test_an_admission_is_cut_once_the_harness_stops_answering(
        slow_admission: tuple[HarnessClient, VirtualClock, Timers]) -> None:
    harness, clock, timers = slow_admission
    thread, out = in_thread(lambda: harness.admit("coder", "c-1", admissions.admission()))
    advance_until(clock, timers, lambda: not thread.is_alive(), "the admission cut")
    error = out["error"]
    assert isinstance(error, HarnessUnreachable) and error.reached  # it may have arrived: the seat aborts
    assert "stopped answering /healthz" in str(error)
    assert _SlowAdmission.probes == [503] * ADMISSION_PROBE_MISSES
