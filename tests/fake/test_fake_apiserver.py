"""The fake API server over HTTP: each fault knob as a client sees it, bad requests, bursts."""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any, cast

import pytest
import requests

from jr2_actors.fake.apiserver.actor import ApiApp
from jr2_actors.fake.apiserver.knobs import Published, WatchTicket
from jr2_actors.fake.apiserver.rest import WatchSpec
from jr2_actors.fake.apiserver.state import ClusterState
from jr2_actors.fake.apiserver.stream_items import Frames
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.frames import Bookmark, Decoded, ErrorFrame, WatchEvent
from jr2_actors.kube.kinds import SANDBOX, SECRET
from jr2_actors.shell.activity import Job
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.errors import KubeError, KubeTransportError
from tests.support.waiting import wait_until


def sandbox(name: str, run: str = "r1") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"jr2.dev/run": run}}, "spec": {"port": 8080}}


def raw(cluster: FakeCluster, method: str, path: str, **kw: Any) -> requests.Response:
    headers = {"Authorization": f"Bearer {cluster.token}", **kw.pop("headers", {})}
    assert cluster.tls is not None
    return requests.request(method, cluster.url + path, headers=headers, verify=cluster.tls.ca_file, timeout=10, **kw)


SBX_PATH = "/apis/core.jr2.dev/v1alpha1/namespaces/jr2/sandboxes"


def _read_until_ended(cluster: FakeCluster, client: KubeClient, **watch: Any) -> list[Decoded]:
    """Open a watch of Sandboxes, read it on a thread of its own until `end_watches` ends it: its frames."""
    got: list[Decoded] = []
    done = threading.Event()
    with client.watch(SANDBOX, timeout_seconds=60, **watch) as stream:
        def read() -> None:
            got.extend(stream)
            done.set()
        threading.Thread(target=read, daemon=True).start()
        _wait(lambda: cluster.watch_stats()["open"] == 1)
        cluster.end_watches()
        assert done.wait(10)
    return got


def test_end_watches_ends_the_stream_cleanly(cluster: FakeCluster) -> None:
    client = cluster.client()
    client.apply(SANDBOX, "a", sandbox("a"))
    got = _read_until_ended(cluster, client, allow_bookmarks=False)
    assert [type(f) for f in got] == [WatchEvent]


def test_watches_ended_cleanly_re_open_on_one_kept_tls_connection(cluster: FakeCluster) -> None:
    """The fake keeps a connection alive after a watch's last chunk (HTTP/1.1, as a real API server's Go
    server does), and the client gives it back to its pool: re-opens cost no TCP or TLS handshake."""
    client = cluster.client()
    client.apply(SANDBOX, "a", sandbox("a"))  # the first connection
    accepted = cluster._http.accepted if cluster._http is not None else -1
    for _ in range(3):
        got = _read_until_ended(cluster, client)
        assert [type(f) for f in got] == [WatchEvent]
        _wait(lambda: cluster.watch_stats()["open"] == 0)
    assert client.get(SANDBOX, "a") is not None
    assert cluster._http is not None and cluster._http.accepted == accepted == 1


def test_stalled_watch_keeps_socket_open_and_sends_nothing(cluster: FakeCluster) -> None:
    rv = cluster.resource_version
    assert cluster.tls is not None
    resp = requests.get(cluster.url + SBX_PATH, params={"watch": "true", "resourceVersion": str(rv),
                                                        "allowWatchBookmarks": "true"},
                        headers={"Authorization": f"Bearer {cluster.token}"}, verify=cluster.tls.ca_file,
                        stream=True, timeout=(5, 0.6))
    assert resp.status_code == 200
    _wait(lambda: cluster.watch_stats()["open"] == 1)
    cluster.stall_watches()
    cluster.client().apply(SANDBOX, "a", sandbox("a"))  # an event the stalled watch never sends
    with pytest.raises(requests.exceptions.ConnectionError) as err:
        for _ in resp.iter_lines():
            pass
    assert "timed out" in str(err.value).lower()
    resp.close()


def test_a_stall_that_lost_frames_ends_its_stream_when_the_link_comes_back(cluster: FakeCluster) -> None:
    # A TCP stream cannot skip what it lost and go on (found by the sim, seed 150): the stream ends, and the
    # client resumes from what it last saw, where the history still has the lost event.
    client = cluster.client()
    got: list[Decoded] = []
    done = threading.Event()
    with client.watch(SANDBOX, timeout_seconds=60, allow_bookmarks=False) as stream:
        def read() -> None:
            with contextlib.suppress(Exception):  # the cut connection's end is what is looked for
                got.extend(stream)
            done.set()
        threading.Thread(target=read, daemon=True).start()
        _wait(lambda: cluster.watch_stats()["open"] == 1)
        cluster.stall_watches()
        client.apply(SANDBOX, "a", sandbox("a"))  # lost on the blackholed link
        cluster.stall_watches(False)
        client.apply(SANDBOX, "b", sandbox("b"))  # never sent after the gap on this stream
        assert done.wait(10), "the stream went on after losing a frame"
    names = [f.object["metadata"]["name"] for f in got if isinstance(f, WatchEvent)]
    assert "b" not in names


def test_compacted_history_answers_a_resume_with_the_410_frame(cluster: FakeCluster) -> None:
    client = cluster.client()
    client.apply(SANDBOX, "a", sandbox("a"))
    old = str(cluster.resource_version)
    client.apply(SANDBOX, "b", sandbox("b"))
    cluster.compact()
    with client.watch(SANDBOX, resource_version=old, timeout_seconds=5) as stream:
        frames = list(stream)
    assert len(frames) == 1
    (frame,) = frames
    assert isinstance(frame, ErrorFrame)
    assert (frame.status.code, frame.status.reason) == (410, "Expired")
    assert frame.status.message.startswith(f"too old resource version: {old} (")


@pytest.mark.parametrize(("status", "retry_after"), [(403, None), (429, 2), (500, None), (503, 1)])
def test_fail_next_n_requests(cluster: FakeCluster, status: int, retry_after: int | None) -> None:
    client = cluster.client()
    cluster.fail_next(2, status, retry_after=retry_after)
    for _ in range(2):
        with pytest.raises(KubeError) as err:
            client.list(SANDBOX)
        assert err.value.status == status
        assert err.value.retry_after == retry_after
    assert client.list(SANDBOX).items == []


def test_fail_only_watch_opens(cluster: FakeCluster) -> None:
    client = cluster.client()
    cluster.fail_next(1, 503, watch_only=True)
    assert client.list(SANDBOX).items == []
    with pytest.raises(KubeError) as err:
        client.watch(SANDBOX)
    assert err.value.status == 503


def test_a_control_plane_away_refuses_every_request_until_it_is_back(cluster: FakeCluster) -> None:
    client = cluster.client()
    stream = client.watch(SANDBOX)
    cluster.away()
    assert list(stream) == []  # the open watch ends (the namespace holds nothing to replay)
    for _ in range(3):  # not a count of requests: every one, until it is back
        with pytest.raises(KubeError) as err:
            client.list(SANDBOX)
        assert err.value.status == 503 and "away" in err.value.message
    cluster.away(False)
    assert client.list(SANDBOX).items == []
    cluster.away(status=500)
    with pytest.raises(KubeError) as err:
        client.list(SANDBOX)
    assert err.value.status == 500
    cluster.restart()  # a restart brings it back too
    assert client.list(SANDBOX).items == []


def test_latency_longer_than_the_read_timeout_is_a_read_timeout(cluster: FakeCluster) -> None:
    cluster.set_latency(2.0)
    with pytest.raises(KubeTransportError) as err:
        cluster.client(read_timeout=0.3).list(SANDBOX)
    assert err.value.kind == "read-timeout"
    cluster.set_latency(0)
    assert cluster.client().list(SANDBOX).items == []


def test_restart_ends_watches_and_a_resume_from_current_loses_nothing(cluster: FakeCluster) -> None:
    client = cluster.client()
    client.apply(SANDBOX, "a", sandbox("a"))
    last_seen: list[str] = []
    with client.watch(SANDBOX, timeout_seconds=60) as stream:
        for frame in stream:
            if isinstance(frame, WatchEvent) and frame.resource_version:
                last_seen.append(frame.resource_version)
                cluster.restart()
    client.apply(SANDBOX, "b", sandbox("b"))
    client.merge_patch(SANDBOX, "a", {"status": {"phase": "Ready"}}, status=True)
    names: list[tuple[str, str]] = []
    with client.watch(SANDBOX, resource_version=last_seen[-1], timeout_seconds=1) as stream:
        for frame in stream:
            if isinstance(frame, WatchEvent):
                names.append((frame.type, frame.object["metadata"]["name"]))
    assert names == [("ADDED", "b"), ("MODIFIED", "a")]


def test_bookmarks_arrive_on_the_interval_and_before_the_timeout(cluster: FakeCluster) -> None:
    client = cluster.client()
    client.apply(SANDBOX, "a", sandbox("a"))
    with client.watch(SANDBOX, resource_version=str(cluster.resource_version), timeout_seconds=1) as stream:
        frames = list(stream)
    assert frames, "bookmarks were sent"
    assert all(f == Bookmark(str(cluster.resource_version)) for f in frames)


def test_request_log_records_method_path_query_and_content_type(cluster: FakeCluster) -> None:
    client = cluster.client()
    cluster.requests(clear=True)
    client.apply(SANDBOX, "a", sandbox("a"))
    client.merge_patch(SANDBOX, "a", {"metadata": {"annotations": {"jr2.dev/keepalive": "t"}}})
    log = cluster.requests()
    assert [(r["method"], r["path"], r["contentType"]) for r in log] == [
        ("PATCH", f"{SBX_PATH}/a", "application/apply-patch+yaml"),
        ("PATCH", f"{SBX_PATH}/a", "application/merge-patch+json")]
    assert log[0]["query"] == {"fieldManager": "jr2", "force": "true"}


def test_rotated_token_refuses_the_old_one_and_the_token_file_follows(cluster: FakeCluster) -> None:
    old = cluster.token
    new = cluster.rotate_token()
    assert new != old
    assert cluster.tls is not None
    refused = requests.get(cluster.url + SBX_PATH, headers={"Authorization": f"Bearer {old}"},
                           verify=cluster.tls.ca_file, timeout=10)
    assert refused.status_code == 401
    assert refused.json()["reason"] == "Unauthorized"
    assert cluster.client().list(SANDBOX).items == []  # reads the rotated file


def test_two_thousand_object_burst_reaches_a_watcher_complete_and_in_order(cluster: FakeCluster) -> None:
    client = cluster.client()
    start = str(cluster.resource_version)
    seen: list[str] = []
    done = threading.Event()
    with client.watch(SANDBOX, resource_version=start, timeout_seconds=60, allow_bookmarks=False) as stream:
        def read() -> None:
            for frame in stream:
                if isinstance(frame, WatchEvent):
                    seen.append(frame.object["metadata"]["name"])
                    if len(seen) == 2000:
                        done.set()
                        return
        threading.Thread(target=read, daemon=True).start()
        _wait(lambda: cluster.watch_stats()["open"] == 1)

        def burst(s: ClusterState) -> None:
            for i in range(2000):
                s.create(SANDBOX, "jr2", sandbox(f"s-{i:04d}"), now=0)

        cluster.call(burst)
        assert done.wait(60)
    assert seen == [f"s-{i:04d}" for i in range(2000)]


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "code", "reason"),
    [
        ("GET", "/apis/core.jr2.dev/v1alpha1/namespaces/jr2/widgets", None, {}, 404, "NotFound"),
        ("GET", "/apis/nope.dev/v1/namespaces/jr2/things", None, {}, 404, "NotFound"),
        ("POST", SBX_PATH, b"{not json", {"Content-Type": "application/json"}, 400, "BadRequest"),
        ("GET", SBX_PATH + "?labelSelector=a%20b%20c", None, {}, 400, "BadRequest"),
        ("PATCH", SBX_PATH + "/missing", b"{}", {"Content-Type": "application/merge-patch+json"}, 404, "NotFound"),
        # A custom resource takes no strategic merge patch (it has no patch strategy): 415, as on a cluster.
        ("PATCH", SBX_PATH + "/missing", b"{}", {"Content-Type": "application/strategic-merge-patch+json"}, 415,
         "UnsupportedMediaType"),
        ("POST", SBX_PATH, b'{"metadata":{"name":"Not_Valid"}}', {"Content-Type": "application/json"}, 422,
         "Invalid"),
        ("POST", SBX_PATH, b'{"metadata":{}}', {"Content-Type": "application/json"}, 422, "Invalid"),
        ("DELETE", SBX_PATH + "/missing", None, {}, 404, "NotFound"),
    ],
)
def test_bad_requests_get_real_status_answers(cluster: FakeCluster, method: str, path: str, body: bytes | None,
                                              headers: dict[str, str], code: int, reason: str) -> None:
    resp = raw(cluster, method, path, data=body, headers=headers)
    assert resp.status_code == code
    doc = resp.json()
    assert doc["kind"] == "Status"
    assert doc["reason"] == reason
    assert doc["code"] == code


def test_duplicate_create_is_409_already_exists(cluster: FakeCluster) -> None:
    client = cluster.client()
    client.create(SANDBOX, sandbox("a"))
    with pytest.raises(KubeError) as err:
        client.create(SANDBOX, sandbox("a"))
    assert (err.value.status, err.value.reason) == (409, "AlreadyExists")


def test_oversized_request_body_is_refused(cluster: FakeCluster) -> None:
    resp = raw(cluster, "POST", SBX_PATH, data=b"x" * (3 * 1024 * 1024 + 1),
               headers={"Content-Type": "application/json"})
    assert resp.status_code == 413


def test_fault_knobs_over_http(cluster: FakeCluster) -> None:
    assert cluster.tls is not None
    ca = cluster.tls.ca_file
    assert requests.post(cluster.url + "/_fake/fail", json={"count": 1, "status": 429, "retryAfter": 5},
                         verify=ca, timeout=10).json() == {"ok": True}
    with pytest.raises(KubeError) as err:
        cluster.client().list(SANDBOX)
    assert (err.value.status, err.value.retry_after) == (429, 5.0)
    log = requests.get(cluster.url + "/_fake/requests", verify=ca, timeout=10).json()["requests"]
    assert log[-1]["path"] == SBX_PATH
    bad = requests.post(cluster.url + "/_fake/fail", data=b"[1]", verify=ca, timeout=10)
    assert bad.status_code == 400
    assert requests.post(cluster.url + "/_fake/nope", verify=ca, timeout=10).status_code == 404


def test_plain_http_mode_and_inline_token() -> None:
    with FakeCluster(tls=False) as c:
        assert c.url.startswith("http://")
        client = c.client()
        client.create(SECRET, {"metadata": {"name": "s"}, "data": {}})
        assert client.get(SECRET, "s") is not None


def _wait(predicate: Any) -> None:
    from tests.support.waiting import wait_until

    wait_until(predicate)


class _HeldWrites:
    """The fake's side of a watch's connection to a client that reads slowly: the first write holds until
    the test lets it go; every write is kept."""

    def __init__(self) -> None:
        self.close_connection = False
        self.lines: list[dict[str, Any]] = []
        self.ended = False
        self.holding = threading.Event()
        self.go = threading.Event()

    def start_chunked(self) -> None:
        pass

    def chunk(self, data: bytes) -> None:
        if not self.lines:
            self.holding.set()
            assert self.go.wait(10)
        self.lines.append(json.loads(data))

    def end_chunked(self) -> None:
        self.ended = True

    def peer_gone(self, wait: float = 0.0) -> bool:
        return False


class _AnyAsk:
    def ask(self, message: object, timeout: float | None = None) -> object:
        return 2  # the stream's own asks (its Unwatch at the end): an answer for each, read by none of these tests


def _frame(name: str, rv: int) -> dict[str, Any]:
    return {"type": "ADDED", "object": {"kind": "Secret", "metadata": {"name": name, "resourceVersion": str(rv)}}}


def test_a_timeout_sends_what_was_queued_before_it_then_a_bookmark_that_covers_it() -> None:
    """The stream thread, held in a write to a slow client, finds its timeout come with a frame queued: it
    sends the frame, then the last bookmark, then ends. It wrote the bookmark (the version of every write
    so far) and ended, dropping what was queued: a client resuming from that bookmark never saw it."""
    clock = VirtualClock()  # moved by hand, while the stream thread is held
    app = ApiApp(cast(Any, _AnyAsk()), clock, bookmark_interval=None)
    spec = WatchSpec(SECRET, "jr2", cast(Any, None), cast(Any, None), None, table=False, bookmarks=True,
                     timeout_seconds=60)
    published = Published()
    ticket = WatchTicket(spec, published)
    r = _HeldWrites()
    ticket.queue.put(_frame("first", 1))
    published.rv = 1
    streaming = threading.Thread(target=app._stream, args=(r, ticket, Job("watch")), daemon=True)
    streaming.start()
    try:
        assert r.holding.wait(10)  # held writing the first frame
        clock.advance(61)  # the timeout comes
        ticket.queue.put(_frame("late", 2))  # a write the API server made meanwhile
        published.rv = 2
        r.go.set()
        streaming.join(10)
        assert r.ended
        assert [(f["type"], f["object"]["metadata"].get("name")) for f in r.lines] == [
            ("ADDED", "first"), ("ADDED", "late"), ("BOOKMARK", None)]
        assert r.lines[-1]["object"]["metadata"]["resourceVersion"] == "2"
    finally:
        r.go.set()
        if app.timers is not None:
            app.timers.stop()


class _HeldTake(Frames):
    """A watch's queue whose first `get` holds after it took its frame, as a stream thread that waits for
    the GIL between the take and the write does."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = threading.Event()
        self.go = threading.Event()

    def get(self, block: bool = True, timeout: float | None = None) -> object:
        item = super().get(block, timeout)
        if not self.holding.is_set():
            self.holding.set()
            assert self.go.wait(10)
        return item


def test_a_parked_stream_that_took_a_frame_is_work_until_it_wrote_it() -> None:
    """A driven VirtualClock reads a stream thread parked on its queue as work while a frame waits. A frame
    taken and not yet written is work too: read as "nothing queued", the clock jumped past a watch's end
    before its client saw it, and the watch's stall bound fired (tests/testing/test_virtual_leaps.py,
    1 run in ~250 on a loaded machine)."""
    app = ApiApp(cast(Any, _AnyAsk()), VirtualClock(), bookmark_interval=None)
    spec = WatchSpec(SECRET, "jr2", cast(Any, None), cast(Any, None), None, table=False, bookmarks=False,
                     timeout_seconds=60)
    ticket = WatchTicket(spec, Published())
    ticket.queue = frames = _HeldTake()
    r, job = _HeldWrites(), Job("watch")
    r.go.set()
    frames.put(_frame("a", 1))
    streaming = threading.Thread(target=app._stream, args=(r, ticket, job), daemon=True)
    streaming.start()
    try:
        assert frames.holding.wait(10)  # taken; the queue is empty and the frame not written
        assert job.ready is not None and job.busy()
        frames.go.set()
        wait_until(lambda: len(r.lines) == 1 and job.ready is not None and not job.busy(), what="written, parked")
    finally:
        frames.go.set()
        ticket.end()
        streaming.join(10)
        if app.timers is not None:
            app.timers.stop()
    assert r.ended and not frames.held()


def test_a_bookmark_never_says_less_than_a_frame_it_follows() -> None:
    """A frame can be queued before the API server publishes its write's version (the sink runs inside the
    write): a bookmark after that frame says at least its version (client-go keeps a bookmark's version as
    its resume point, so a lower one would re-deliver)."""
    clock = VirtualClock()
    app = ApiApp(cast(Any, _AnyAsk()), clock, bookmark_interval=None)
    spec = WatchSpec(SECRET, "jr2", cast(Any, None), cast(Any, None), None, table=False, bookmarks=True,
                     timeout_seconds=0)
    ticket = WatchTicket(spec, Published())  # published: 0
    r = _HeldWrites()
    r.go.set()
    ticket.queue.put(_frame("a", 7))
    try:
        app._stream(cast(Any, r), ticket, Job("watch"))
        assert [f["type"] for f in r.lines] == ["ADDED", "BOOKMARK"]
        assert r.lines[-1]["object"]["metadata"]["resourceVersion"] == "7"
    finally:
        if app.timers is not None:
            app.timers.stop()
