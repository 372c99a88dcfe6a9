"""A watch's open answer, read as frames by `KubeClient.watch`'s caller; see kube/client.py.

- The chunked answer is read off its socket 64 KiB at a time and de-chunked here (`ChunkDecoder`:
  `http.client` reads one chunk, one event, a call); a content-coded or unchunked answer is read by urllib3.
  Broken framing is a `KubeProtocolError` after the frames that came whole.
- A clean end (the last chunk and its trailers, no byte after) gives the connection back to the pool, so a
  re-open costs no TCP or TLS handshake; any other end closes it.
- `ready()` says whether the reader is at work: what a driven VirtualClock reads of a parked reader, which
  then waits for bytes apart from its read (`wait_before_reads`).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

import requests
import urllib3.exceptions

from jr2_actors.kube.frames import ChunkDecoder, ChunkError, Decoded, FrameDecoder
from jr2_actors.kube.socket_wait import Parking, Readable, readable, waited_read
from jr2_actors.net.http_body import caused_by
from jr2_actors.values.errors import KubeProtocolError, KubeTransportError, TransportKind, one_line

WATCH_READ_BYTES = 64 * 1024


class WatchStream:
    """One open watch. Iterate for frames; `close()` from any thread unblocks a waiting read.

    Iteration ends quietly when the server ends the stream (a free resume) or after `close()`; a broken
    connection or a read timeout raises `KubeTransportError`.
    """

    def __init__(self, resp: requests.Response, path: str) -> None:
        self._resp = resp
        self._path = path
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._reading = False
        self._released = False  # its connection given back to the pool at a clean end
        self._sock: socket.socket | None = getattr(getattr(resp.raw, "connection", None), "sock", None)
        self._parking: Parking | None = None  # `wait_before_reads`: a driven VirtualClock reads this reader

    def wait_before_reads(self) -> None:
        """From now on each read of the socket first waits for bytes without taking them (`ready()`): what a
        reader a driven VirtualClock counts as parked does. Off, a read blocks in the socket's own read, one
        system call a read fewer. Only the de-chunked read waits apart (the fake's watches are all chunked and
        uncoded); a reader of another answer never counts as parked."""
        self._parking = Parking()

    def ready(self) -> bool:
        """Whether the reader is at work: anywhere but in its wait before a read (`wait_before_reads`) with
        nothing on the socket. Bytes it took are its work until it waits again: a reader that took the last
        chunk off the socket may wait for the GIL before it hands it on, and a clock that read "nothing
        waiting" then jumped past the watch's end before the watch saw it (its stall bound fired)."""
        parking, sock = self._parking, self._sock
        if parking is None or not parking.waiting or sock is None or self._closed.is_set():
            return True  # not in its wait, or the wait is about to end: shut (`close`), or the read over
        return readable(sock, 0)

    def __iter__(self) -> Iterator[Decoded]:
        decoder = FrameDecoder()
        raw = self._resp.raw
        with self._lock:
            if self._closed.is_set():
                return
            self._reading = True
        clean = False
        try:
            sock = _chunked_body(raw)
            if sock is None:  # not chunked, or content-coded: urllib3 reads it (one HTTP chunk a call)
                while not self._closed.is_set():
                    chunk = raw.read1(WATCH_READ_BYTES)
                    if not chunk:
                        break
                    yield from decoder.feed(chunk)
            else:
                raw_sock, parking = self._sock, self._parking
                read = sock.read1 if parking is None or raw_sock is None else waited_read(sock, raw_sock, parking)
                clean = yield from self._dechunked(read, decoder)
        except ChunkError as e:
            if self._closed.is_set():
                return
            raise KubeProtocolError(f"GET {self._path}: the watch's chunked framing is broken: {e.detail}") from e
        except Exception as e:
            if self._closed.is_set():
                return  # whatever the interrupted read raised, it was our own close
            if isinstance(e, (urllib3.exceptions.HTTPError, requests.exceptions.RequestException, OSError,
                              ValueError)):
                raise transport_error(e, "GET", self._path) from e
            raise
        finally:
            self._sock = None  # the read is over: nothing on that socket is this stream's any more
            self._end(clean)
        if not self._closed.is_set():
            yield from decoder.end()

    def _end(self, clean: bool) -> None:
        """The read is over. A clean end gives the connection back to the pool, so the next watch (or any
        request) goes out on it without a new TCP and TLS handshake, as client-go's watch re-opens on its one
        HTTP/2 connection; anything else (broken framing, a cut, our own close) closes it."""
        with self._lock:
            keep = clean and not self._closed.is_set()
            self._reading = False  # a close() from now on does not shut the socket: it may be another's
            # Under the lock: urllib3 puts the connection in the pool before it lets go of it, and a close()
            # from another thread in between would close (or pool again) a connection the pool now holds.
            if keep and _release(self._resp):
                self._released = True  # the pool's now: close() leaves it alone
                return
        self._resp.close()

    def _dechunked(self, read: Callable[[int], bytes], decoder: FrameDecoder) -> Generator[Decoded, None, bool]:
        """Up to 64 KiB of socket bytes a read, de-chunked here, so a burst's events are one read
        and one feed (`http.client` reads one chunk a call: one event). A framing fault still hands on the
        frames that came whole before it, then raises `ChunkError`. True at a clean end: the last chunk and
        its trailers read, and no byte after them (the connection can be used again)."""
        chunks = ChunkDecoder()
        while not self._closed.is_set():
            data = read(WATCH_READ_BYTES)
            if not data:
                chunks.end()
                return False
            try:
                body = chunks.feed(data)
            except ChunkError as e:
                yield from decoder.feed(e.decoded)
                raise
            if chunks.done:
                yield from decoder.feed(body)
                return chunks.clean_end
            if body:
                yield from decoder.feed(body)
        return False

    def close(self) -> None:
        """Safe from any thread. A reader blocked in `read1` is woken by shutting the socket's read
        side; the reader's own thread then closes the response (closing it here would race it)."""
        with self._lock:
            self._closed.set()
            if self._released:
                return
            reading = self._reading
        if reading:
            with contextlib.suppress(ValueError, RuntimeError, OSError, AttributeError):
                self._resp.raw.shutdown()
        else:
            self._resp.close()

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chunked_body(raw: Any) -> Readable | None:
    """The buffered socket file under a chunked, uncoded answer that nothing has read from yet (urllib3 2
    keeps `http.client`'s response as `_fp`; its `fp` holds any body bytes read with the headers), or None:
    then urllib3 reads the answer as before."""
    fp = getattr(raw, "_fp", None)
    if not isinstance(fp, http.client.HTTPResponse) or not fp.chunked or fp.chunk_left is not None:
        return None
    if raw.headers.get("content-encoding", "identity").lower() != "identity" or fp.fp is None:
        return None
    sock: Readable | None = fp.fp
    return sock


def _release(resp: requests.Response) -> bool:
    """Give a watch's connection back to its pool once its answer was read to a clean end off the socket
    (`_dechunked`: `http.client` did not read it, so its response is marked done here, as its own read of
    the last chunk does). False when urllib3 holds it differently than this expects: then it is closed."""
    raw = resp.raw
    fp = getattr(raw, "_fp", None)
    release = getattr(raw, "release_conn", None)
    if not isinstance(fp, http.client.HTTPResponse) or not callable(release) or getattr(raw, "_pool", None) is None:
        return False
    fp.close()  # the answer is whole: the connection may send its next request
    release()
    return True


def transport_error(e: BaseException, method: str, path: str) -> KubeTransportError:
    """Name a transport failure. requests reports a stream's read timeout as a ConnectionError."""
    text = one_line(e)
    kind: TransportKind
    if isinstance(e, (requests.exceptions.ConnectTimeout, urllib3.exceptions.ConnectTimeoutError)):
        kind = "connect"  # urllib3's own (kube/direct.py's calls): NewConnectionError is one too
    elif isinstance(e, (requests.exceptions.ReadTimeout, urllib3.exceptions.ReadTimeoutError, TimeoutError)):
        kind = "read-timeout"
    elif isinstance(e, (requests.exceptions.SSLError, urllib3.exceptions.SSLError)):
        kind = "tls"
    elif isinstance(e, requests.exceptions.ConnectionError) and caused_by(e, urllib3.exceptions.ReadTimeoutError):
        kind = "read-timeout"
    elif isinstance(e, requests.exceptions.ConnectionError) and caused_by(e, urllib3.exceptions.NewConnectionError):
        kind = "connect"
    else:
        kind = "connection"
    return KubeTransportError(kind, text, method=method, path=path)
