"""The watch's own de-chunking (issue 18): `ChunkDecoder` fed well-formed, cut, lying and hostile framing, and
`KubeClient.watch` reading it off a socket 64 KiB at a time from a server that writes whatever bytes it is told."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.frames import Bookmark, ChunkDecoder, ChunkError, FrameDecoder, FrameError, WatchEvent
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.kube.watch_stream import WATCH_READ_BYTES
from jr2_actors.values.constants import MAX_CHUNK_LINE_BYTES
from jr2_actors.values.errors import KubeProtocolError
from tests.support.waiting import WAIT, wait_until


def chunked(*pieces: bytes, ext: bytes = b"", trailer: bytes = b"") -> bytes:
    return b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext, p) for p in pieces) + b"0\r\n" + trailer + b"\r\n"


def bookmark(rv: int, pad: int = 0) -> bytes:
    return b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"%d"},"pad":"%s"}}\n' % (rv, b"x" * pad)


def decode(data: bytes, cut: int | None = None) -> bytes:
    d = ChunkDecoder()
    cuts = [data] if cut is None else [data[i:i + cut] for i in range(0, len(data), cut)]
    body = b"".join(d.feed(c) for c in cuts)
    assert d.done
    d.end()
    return body


# -- the decoder alone -------------------------------------------------------------------------------

def test_a_well_formed_stream_cut_at_every_point_gives_the_body() -> None:
    pieces = (bookmark(1), bookmark(2)[:10], bookmark(2)[10:], bookmark(3))
    data = chunked(*pieces)
    for cut in range(1, len(data)):
        d = ChunkDecoder()
        body = d.feed(data[:cut]) + d.feed(data[cut:])
        assert body == b"".join(pieces), cut
        assert d.done


def test_a_frame_split_across_chunks_and_across_64k_reads_is_one_frame() -> None:
    frames = [bookmark(i, pad=20_000) for i in range(1, 9)]  # 8 frames, each cut in three chunks
    pieces = [part for f in frames for part in (f[:7], f[7:15_000], f[15_000:])]
    data = chunked(*pieces)
    frame_decoder = FrameDecoder()
    d = ChunkDecoder()
    out = []
    for i in range(0, len(data), WATCH_READ_BYTES):
        out.extend(frame_decoder.feed(d.feed(data[i:i + WATCH_READ_BYTES])))
    assert d.done
    assert [f for f in out if isinstance(f, Bookmark)] == [Bookmark(str(i)) for i in range(1, 9)]
    assert len(out) == 8


def test_chunk_extensions_and_trailers_are_read_and_ignored() -> None:
    data = chunked(bookmark(1), bookmark(2), ext=b' ;name="va;lue";flag', trailer=b"X-Trailer: 1\r\nY: 2\r\n")
    assert decode(data, cut=3) == bookmark(1) + bookmark(2)


def test_upper_case_hex_and_bare_line_feeds_are_read() -> None:
    body = b"y" * 26
    assert decode(b"1A\n" + body + b"\n0\n\n") == body


def test_bytes_after_the_last_chunk_are_not_read() -> None:
    d = ChunkDecoder()
    assert d.feed(chunked(b"abc") + b"5\r\nhello\r\n") == b"abc"
    assert d.done
    assert d.feed(b"garbage") == b""


@pytest.mark.parametrize("size", [b"zz", b"0x1a", b"-1", b"1_0", b"+5", b"", b" ", b";ext", b"1 2", b"\xff"])
def test_a_size_line_that_is_not_hex_is_refused(size: bytes) -> None:
    d = ChunkDecoder()
    with pytest.raises(ChunkError, match="not hex"):
        d.feed(chunked(b"ok\n") [:-5] + size + b"\r\nabc\r\n")


def test_a_size_of_more_than_sixteen_digits_is_refused() -> None:
    with pytest.raises(ChunkError, match="17 hex digits"):
        ChunkDecoder().feed(b"1" + b"0" * 16 + b"\r\n")


def test_a_size_line_over_the_cap_is_refused_without_holding_it() -> None:
    d = ChunkDecoder()
    for _ in range(MAX_CHUNK_LINE_BYTES // 64):  # never a newline: the decoder must give up, not buffer forever
        d.feed(b"0" * 64)
    with pytest.raises(ChunkError, match="chunk size line over"):
        d.feed(b"0")
    assert len(d._line) <= MAX_CHUNK_LINE_BYTES


def test_endless_trailers_are_refused() -> None:
    d = ChunkDecoder()
    d.feed(b"0\r\n" + b"X: y\r\n" * (MAX_CHUNK_LINE_BYTES // 6))
    with pytest.raises(ChunkError, match="trailers over"):
        d.feed(b"X: y\r\n")


def test_a_size_that_says_less_than_the_data_is_refused_and_what_came_whole_is_kept() -> None:
    data = chunked(bookmark(1)) [:-5] + b"3\r\nabcdef\r\n"  # 3 said, 6 sent
    with pytest.raises(ChunkError, match="runs past its size") as err:
        ChunkDecoder().feed(data)
    assert err.value.decoded == bookmark(1) + b"abc"


def test_a_size_that_says_more_than_the_data_is_refused_at_the_end() -> None:
    d = ChunkDecoder()
    body = d.feed(b"ff\r\n" + bookmark(1) + b"\r\n")  # the server closes: 255 said, fewer sent
    assert body == bookmark(1) + b"\r\n"
    with pytest.raises(ChunkError, match="inside a chunk"):
        d.end()


def test_a_lying_size_inside_a_stream_is_refused_before_the_next_size_line() -> None:
    # 2 bytes more than the frame: the next chunk's size line is eaten as data, then its data is not a CRLF.
    first = bookmark(1)
    data = b"%x\r\n%s\r\n" % (len(first) + 2, first) + b"%x\r\n%s\r\n" % (len(first), first) + b"0\r\n\r\n"
    with pytest.raises(ChunkError):
        ChunkDecoder().feed(data)


@pytest.mark.parametrize("cut", [b"", b"5", b"5\r", b"5\r\nab", b"5\r\nabcde", b"5\r\nabcde\r\n", b"0\r\n",
                                 b"0\r\nX: y\r\n"])
def test_a_stream_that_ends_before_its_last_chunk_is_refused(cut: bytes) -> None:
    d = ChunkDecoder()
    d.feed(cut)
    with pytest.raises(ChunkError, match="the stream ended"):
        d.end()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 40))
def test_any_bytes_are_a_body_or_a_chunk_error(data: bytes, cut: int) -> None:
    d = ChunkDecoder()
    fault: ChunkError | None = None
    try:
        for i in range(0, len(data), cut):
            body = d.feed(data[i:i + cut])
            assert isinstance(body, bytes)
        d.end()
    except ChunkError as e:
        fault = e
    assert fault is None or (fault.detail and isinstance(fault.decoded, bytes))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=80), max_size=8), st.integers(1, 50))
def test_any_well_formed_encoding_cut_anyhow_gives_its_body(pieces: list[bytes], cut: int) -> None:
    assert decode(chunked(*pieces), cut=cut) == b"".join(pieces)


# -- the client reading a socket -----------------------------------------------------------------------

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: close\r\n\r\n")


class Scripted:
    """A server that answers every request with `script`'s bytes, in `writes` pieces, then closes (or holds)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.hold = False  # after the writes, keep the connection open until the test ends
        self.release = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)  # the request (small; one read)
                for w in self.writes:
                    conn.sendall(w)
                if self.hold:
                    self.release.wait(WAIT)


@pytest.fixture
def scripted() -> Iterator[tuple[Scripted, KubeClient]]:
    srv = Scripted()
    client = KubeClient(ClusterAccess(server=f"http://127.0.0.1:{srv.port}", namespace="jr2", source="t"),
                        read_timeout=WAIT)
    try:
        yield srv, client
    finally:
        srv.release.set()
        client.close()
        srv.sock.close()


def events(rv: int) -> bytes:
    return (b'{"type":"ADDED","object":{"metadata":{"name":"s%d","uid":"u","resourceVersion":"%d"}}}\n'
            % (rv, rv))


def test_the_client_reads_frames_split_across_chunks_and_writes_and_ends_at_the_last_chunk(
        scripted: tuple[Scripted, KubeClient]) -> None:
    srv, client = scripted
    frames = [events(i) for i in range(1, 201)]
    body = chunked(*(part for f in frames for part in (f[:5], f[5:])), ext=b";x=1")
    srv.writes = [HEAD + body[:100], body[100:70_001], body[70_001:]]
    srv.hold = True  # the last chunk ends the answer; the open connection does not keep the reader waiting
    got = list(client.watch(SANDBOX, timeout_seconds=60))
    assert [f.resource_version for f in got if isinstance(f, WatchEvent)] == [str(i) for i in range(1, 201)]
    assert len(got) == 200


@pytest.mark.parametrize(("tail", "why"), [
    (b"zz\r\nabc\r\n", "not hex"),
    (b"3\r\nabcdef\r\n", "runs past its size"),
    (b"ff\r\n" + events(9)[:30], "inside a chunk"),  # ends mid-frame
    (b"", "before its last chunk"),
    (b"1" * (MAX_CHUNK_LINE_BYTES + 1), "over the"),
])
def test_broken_framing_is_a_protocol_error_after_the_frames_that_came_whole(
        scripted: tuple[Scripted, KubeClient], tail: bytes, why: str) -> None:
    srv, client = scripted
    srv.writes = [HEAD + chunked(events(1), events(2))[:-5], tail]
    got: list[object] = []
    with pytest.raises(KubeProtocolError, match=why):
        got.extend(client.watch(SANDBOX, timeout_seconds=60))
    assert [f.resource_version for f in got if isinstance(f, WatchEvent)] == ["1", "2"]


def test_a_line_over_the_frame_cap_is_an_oversized_frame_and_the_stream_goes_on(
        scripted: tuple[Scripted, KubeClient], monkeypatch: pytest.MonkeyPatch) -> None:
    srv, client = scripted
    big = b'{"type":"ADDED","object":{"pad":"' + b"x" * 300_000 + b'"}}\n'
    srv.writes = [HEAD, chunked(*(big[i:i + 50_000] for i in range(0, len(big), 50_000)), events(3))]
    monkeypatch.setattr("jr2_actors.kube.watch_stream.FrameDecoder", lambda: FrameDecoder(max_line_bytes=100_000))
    got = list(client.watch(SANDBOX, timeout_seconds=60))
    assert isinstance(got[0], FrameError) and got[0].kind == "oversized" and got[0].size == len(big) - 1
    assert isinstance(got[1], WatchEvent) and got[1].resource_version == "3"


def test_close_from_another_thread_ends_a_reader_waiting_inside_a_chunk(
        scripted: tuple[Scripted, KubeClient]) -> None:
    srv, client = scripted
    srv.writes = [HEAD + b"ff\r\n" + events(1)]  # a chunk that never completes, on a connection held open
    srv.hold = True
    stream = client.watch(SANDBOX, timeout_seconds=60)
    got: list[object] = []
    done = threading.Event()

    def read() -> None:
        got.extend(stream)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    wait_until(lambda: len(got) == 1)
    stream.close()
    assert done.wait(WAIT)
    assert got == [WatchEvent("ADDED", {"metadata": {"name": "s1", "uid": "u", "resourceVersion": "1"}}, "1")]


def test_broken_framing_ends_the_stream_as_a_transport_failure_and_the_watch_resumes() -> None:
    # What the WatchActor's I/O thread does with the client's refusal: the core resumes from the last version.
    from jr2_actors.watch.actor import failure_of
    from jr2_actors.watch.core import WatchCore
    from jr2_actors.watch.stream import FrameReceived, Listed, Started, StreamEnded, WatchFrom, WatchOpened

    c = WatchCore()
    c.step(Started(), 0.0)
    c.step(Listed([], "10"), 0.0)
    c.step(WatchOpened(c.stream), 0.0)
    c.step(FrameReceived(c.stream, Bookmark("55")), 1.0)
    failure = failure_of(KubeProtocolError("GET /x: the watch's chunked framing is broken: not hex"))
    assert failure.kind == "transport" and "chunked framing" in failure.message
    step = c.step(StreamEnded(c.stream, failure), 2.0)
    assert step.actions == (WatchFrom("55", c.stream),)


@pytest.mark.parametrize(("after", "clean"), [(b"", True), (b"H", False), (b"HTTP/1.1 200 OK\r\n", False)])
def test_a_clean_end_is_the_last_chunk_and_its_trailers_and_no_byte_after(after: bytes, clean: bool) -> None:
    """What lets the watch give its connection back: a byte after the answer is a server that sent more
    than it was asked (the connection's next answer is not where it should start)."""
    whole = chunked(b"abc", trailer=b"X-T: 1\r\n") + after
    for split in range(1, len(whole)):  # each way the bytes come in two reads
        d = ChunkDecoder()
        assert d.feed(whole[:split]) + d.feed(whole[split:]) == b"abc"
        assert d.done and d.clean_end is clean
    half = ChunkDecoder()
    half.feed(whole[: len(whole) - len(after) - 1])  # the last CRLF not yet read
    assert not half.done and not half.clean_end
