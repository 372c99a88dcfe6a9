"""KubeClient against a loopback HTTP server: the write cap, reads beside it, a chunked watch."""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from typing import Any

import pytest

from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.frames import Bookmark, ErrorFrame, FrameError, WatchEvent
from jr2_actors.kube.gate import FifoGate
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.values.errors import KubeError, KubeProtocolError, KubeTransportError
from tests.support.loopback_kube import Recorder
from tests.support.waiting import WAIT, wait_until


def test_fifty_writers_never_exceed_the_cap_and_reads_pass_beside_them(server: tuple[Recorder, KubeClient]) -> None:
    rec, c = server
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            c.merge_patch(SANDBOX, f"ws-{i}", {"metadata": {"annotations": {"n": str(i)}}})
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    wait_until(lambda: rec.in_flight == 12 and c.writes.waiting == 38)
    assert rec.max_in_flight == 12
    # A read is answered while every write slot is held and 38 writers queue.
    assert c.get(SANDBOX, "some") == {"metadata": {"name": "read"}}
    rec.release.set()
    for t in threads:
        t.join(WAIT)
    assert errors == []
    assert rec.writes == 50
    assert rec.max_in_flight == 12
    assert c.writes.in_flight == 0


def test_fifo_gate_serves_in_arrival_order() -> None:
    gate = FifoGate(1)
    gate.acquire()
    order: list[int] = []

    def waiter(i: int) -> None:
        gate.acquire()
        order.append(i)
        gate.release()

    threads = []
    for i in range(8):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        threads.append(t)
        wait_until(lambda n=i: gate.waiting == n + 1)  # type: ignore[misc]
    gate.release()
    for t in threads:
        t.join(WAIT)
    assert order == list(range(8))


def test_watch_frames_split_across_chunks_arrive_whole(server: tuple[Recorder, KubeClient]) -> None:
    rec, c = server
    added = b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}\n'
    bookmark = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"6"}}}\n'
    rec.watch_script = [added[:10], added[10:] + bookmark[:3], bookmark[3:], b"garbage\n",
                        b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"m"}}']
    with c.watch(SANDBOX, resource_version="4", label_selector="jr2.dev/run") as stream:
        frames = list(stream)
    assert [type(f) for f in frames] == [WatchEvent, Bookmark, FrameError, ErrorFrame]
    assert frames[1] == Bookmark("6")


BOOKMARK = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"6"}}}\n'


def test_watch_re_opens_after_a_clean_end_go_out_on_one_connection(server: tuple[Recorder, KubeClient]) -> None:
    """A watch that ended cleanly gives its connection back: the next watch (and a read) reuse it, with no
    new TCP (or TLS) handshake, as client-go's re-opens share one HTTP/2 connection."""
    rec, c = server
    rec.watch_script = [BOOKMARK]
    for _ in range(5):
        with c.watch(SANDBOX, resource_version="4") as stream:
            assert list(stream) == [Bookmark("6")]
    assert c.get(SANDBOX, "read") is not None
    assert rec.connections == 1


@pytest.mark.parametrize("tail", [b"zz\r\n", b"0\r\n\r\nHTTP/1.1 200 OK\r\n"],
                         ids=["broken-chunk", "bytes-after-the-end"])
def test_a_watch_that_does_not_end_cleanly_never_gives_its_connection_back(
        server: tuple[Recorder, KubeClient], tail: bytes) -> None:
    rec, c = server
    rec.watch_script = [BOOKMARK]
    rec.watch_tail = tail
    for _ in range(2):
        with c.watch(SANDBOX, resource_version="4") as stream:
            got: list[object] = []
            with contextlib.suppress(KubeProtocolError):
                got.extend(stream)
            assert got[:1] == [Bookmark("6")]
    assert rec.connections == 2  # each watch's connection was closed after it


def test_a_watch_closed_by_its_owner_is_not_given_back(server: tuple[Recorder, KubeClient]) -> None:
    rec, c = server
    rec.watch_script = [BOOKMARK]
    for _ in range(2):
        stream = c.watch(SANDBOX, resource_version="4")
        frames = iter(stream)
        assert next(frames) == Bookmark("6")
        stream.close()  # before its end was read
        assert list(frames) == []
    assert rec.connections == 2


class _SeenLock:
    """A lock that says when a thread had to wait for it: the closer below is either done or blocked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waited = threading.Event()

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            self.waited.set()
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_a_close_while_the_clean_end_gives_the_connection_back_never_touches_it_again(
        server: tuple[Recorder, KubeClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """A stall bound or a stop may close the stream from another thread just as its clean end hands the
    connection back: urllib3 puts it in the pool before it forgets it, so a close in between would close a
    pooled connection (or put it back twice, for two requests to share). Here a close starts exactly there."""
    import urllib3.response

    rec, c = server
    rec.watch_script = [BOOKMARK]
    stream = c.watch(SANDBOX, resource_version="4")
    lock = _SeenLock()
    stream._lock = lock  # type: ignore[assignment]
    closers: list[threading.Thread] = []

    def release_then_close(raw: urllib3.response.HTTPResponse) -> None:  # urllib3 2's, with a close inside
        if not raw._pool or not raw._connection:
            return
        raw._pool._put_conn(raw._connection)
        if not closers:  # another thread's close, after the put and before urllib3 lets go of the connection
            closers.append(threading.Thread(target=stream.close))
            closers[0].start()
            wait_until(lambda: lock.waited.is_set() or not closers[0].is_alive(), what="the close done or held")
        raw._connection = None

    monkeypatch.setattr(urllib3.response.HTTPResponse, "release_conn", release_then_close)
    assert list(stream) == [Bookmark("6")]
    closers[0].join(WAIT)
    monkeypatch.undo()
    pools = c._session.get_adapter("https://x").poolmanager.pools  # type: ignore[attr-defined]
    idle = [conn for key in pools.keys() for conn in list(pools[key].pool.queue) if conn is not None]  # noqa: SIM118  (RecentlyUsedContainer has no __iter__)
    assert len(idle) == len({id(conn) for conn in idle})  # none twice
    assert idle and all(conn.sock is not None for conn in idle)  # and none closed under the pool
    assert c.get(SANDBOX, "read") is not None and rec.connections == 1


def test_watch_open_failure_raises_kube_error(server: tuple[Recorder, KubeClient]) -> None:
    rec, c = server
    rec.watch_status = 410
    with pytest.raises(KubeError) as err:
        c.watch(SANDBOX, resource_version="1")
    assert err.value.status == 410
    assert err.value.reason == "Expired"


def test_close_from_another_thread_unblocks_a_silent_watch(server: tuple[Recorder, KubeClient]) -> None:
    rec, c = server
    rec.watch_script = [b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}\n']
    rec.hold_watch.set()
    stream = c.watch(SANDBOX)
    got: list[object] = []
    done = threading.Event()

    def read() -> None:
        try:
            for frame in stream:
                got.append(frame)
        except KubeTransportError as e:
            got.append(e)
        done.set()

    t = threading.Thread(target=read)
    t.start()
    wait_until(lambda: len(got) == 1)  # the reader now blocks on a silent socket
    stream.close()
    assert done.wait(WAIT)
    assert got == [Bookmark("9")]


WRITES = {  # requests' path, and the merge patch's own on urllib3 (kube/direct.py)
    "apply": lambda c: c.apply(SANDBOX, "x", {"metadata": {"name": "x"}}),
    "merge_patch": lambda c: c.merge_patch(SANDBOX, "x", {"metadata": {"annotations": {"a": "b"}}}),
}


@pytest.mark.parametrize("call", sorted(WRITES))
def test_interrupt_ends_a_write_in_flight_and_the_client_goes_on(server: tuple[Recorder, KubeClient],
                                                                 call: str) -> None:
    """Issue 16 item 9: a stopping orchestrator interrupts what its stopped actors left in flight, so an API
    server that holds a write cannot hold the stop for the read timeout; later calls go as ever."""
    rec, client = server
    failed: list[KubeTransportError] = []

    def write() -> None:
        try:
            WRITES[call](client)
        except KubeTransportError as e:
            failed.append(e)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    wait_until(lambda: rec.in_flight == 1, what="the write held by the server")
    client.interrupt()
    thread.join(WAIT / 2)  # the server holds it for WAIT: only the interrupt ends it sooner
    assert not thread.is_alive() and len(failed) == 1 and failed[0].kind == "connection", failed
    assert client.get(SANDBOX, "read") == {"metadata": {"name": "read"}}


def test_connection_refused_is_a_transport_error() -> None:
    access = ClusterAccess(server="http://127.0.0.1:1", namespace="jr2", source="t")
    with pytest.raises(KubeTransportError) as err:
        KubeClient(access, connect_timeout=2).get(SANDBOX, "x")
    assert err.value.kind in ("connect", "connection")


def test_a_watch_whose_headers_never_come_fails_at_the_ordinary_read_timeout(
        server: tuple[Recorder, KubeClient]) -> None:
    rec, _ = server
    rec.header_delay = 5.0
    access = ClusterAccess(server=_url(server), namespace="jr2", source="t")
    with pytest.raises(KubeTransportError) as err:
        KubeClient(access, read_timeout=0.3).watch(SANDBOX, timeout_seconds=60)
    assert err.value.kind == "read-timeout"


def test_a_watch_body_waits_longer_than_the_ordinary_read_timeout(server: tuple[Recorder, KubeClient]) -> None:
    rec, _ = server
    rec.chunk_gap = 0.6
    rec.watch_script = [b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}\n']
    access = ClusterAccess(server=_url(server), namespace="jr2", source="t")
    with KubeClient(access, read_timeout=0.3).watch(SANDBOX, timeout_seconds=5) as stream:
        assert list(stream) == [Bookmark("9")]


def _url(server: tuple[Recorder, KubeClient]) -> str:
    return server[1].access.server


class _PacedWatch:
    """A raw HTTP/1.1 peer answering one watch, one piece at a time as the test lets it: what is on the
    socket and not yet read is then known exactly."""

    def __init__(self, pieces: list[bytes], *, with_head: bool = False) -> None:
        self.pieces = pieces
        self.go = [threading.Event() for _ in pieces]
        self.with_head = with_head  # the first piece goes out in one write with the headers
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        conn, _ = self._sock.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            if self.with_head:
                head += self.pieces[0]
                self.go[0].set()
            conn.sendall(head)
            for i, (piece, go) in enumerate(zip(self.pieces, self.go, strict=True)):
                if i == 0 and self.with_head:
                    continue
                if not go.wait(WAIT):
                    return
                conn.sendall(piece)
            self.go[-1].wait(WAIT)

    def close(self) -> None:
        for go in self.go:
            go.set()
        self._sock.close()


def _chunk(line: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(line), line)


class _HeldReader:
    """The buffered reader under a watch's answer, whose reads hold after they took their bytes while
    `hold` is set: a reader thread that waits for the GIL between the take and the hand-on."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self.hold = threading.Event()
        self.holding = threading.Event()
        self.go = threading.Event()

    def read1(self, size: int = -1, /) -> bytes:
        data: bytes = self._reader.read1(size)
        if data and self.hold.is_set():
            self.hold.clear()
            self.holding.set()
            assert self.go.wait(WAIT)
        return data


def _read_into(stream: Any, into: queue.SimpleQueue[object]) -> threading.Thread:
    def run() -> None:
        for frame in stream:
            into.put(frame)
        into.put(None)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("with_head", [False, True], ids=["apart", "with-the-headers"])
def test_a_watch_reader_counts_as_parked_only_in_its_wait_with_nothing_on_the_socket(
        monkeypatch: pytest.MonkeyPatch, with_head: bool) -> None:
    """A driven VirtualClock counts the watch's parked reader as work while `ready()`. Bytes the reader took
    off the socket are work until it waits again: read as "nothing waiting", a reader that had taken the
    last chunk and waited for the GIL let the clock jump past the watch's end (the watch's stall bound then
    fired: tests/testing/test_virtual_leaps.py, 1 run in ~250 on a loaded machine). A first bookmark that
    came with the headers sits in the buffered reader, where no wait on the socket sees it: it is read first."""
    from jr2_actors.kube import watch_stream

    bookmark = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"%d"}}}\n'
    peer = _PacedWatch([_chunk(bookmark % 1), _chunk(bookmark % 2), b"0\r\n\r\n"], with_head=with_head)
    held: list[_HeldReader] = []

    def chunked_body(raw: Any) -> Any:
        held.append(_HeldReader(real(raw)))
        return held[-1]
    real = watch_stream._chunked_body
    monkeypatch.setattr(watch_stream, "_chunked_body", chunked_body)
    c = KubeClient(ClusterAccess(server=peer.url, namespace="jr2", source="t"), read_timeout=WAIT)
    frames: queue.SimpleQueue[object] = queue.SimpleQueue()
    try:
        stream = c.watch(SANDBOX)
        stream.wait_before_reads()
        assert stream.ready()  # nobody reads yet: not parked
        reader = _read_into(stream, frames)
        if not with_head:
            wait_until(lambda: not stream.ready(), what="parked with nothing on the socket")
            peer.go[0].set()
        assert frames.get(timeout=WAIT) == Bookmark("1")
        wait_until(lambda: not stream.ready(), what="parked again")
        held[0].hold.set()
        peer.go[1].set()
        assert held[0].holding.wait(WAIT)  # the chunk taken off the socket, not yet handed on
        assert stream.ready()
        held[0].go.set()
        assert frames.get(timeout=WAIT) == Bookmark("2")
        wait_until(lambda: not stream.ready(), what="parked again")
        peer.go[2].set()  # the last chunk: the stream ends
        assert frames.get(timeout=WAIT) is None
        reader.join(WAIT)
        assert stream.ready()  # no reader in a wait
    finally:
        for h in held:
            h.go.set()
        c.close()
        peer.close()
