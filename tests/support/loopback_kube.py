"""A scripted Kubernetes API server on loopback (`http.server`), recording each request, for the KubeClient's
tests over real sockets."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler

from tests.support.waiting import WAIT


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.writes = 0
        self.release = threading.Event()
        self.watch_script: list[bytes] = []
        self.hold_watch = threading.Event()
        self.watch_status = 200
        self.header_delay = 0.0
        self.chunk_gap = 0.0
        self.connections = 0  # accepted by the server
        self.watch_tail = b"0\r\n\r\n"  # what ends a watch's answer: the last chunk, or a broken end
        self.patches: list[tuple[str, dict[str, str], bytes]] = []  # each PATCH's path, headers, body
        self.patch_answers: list[tuple[int, bytes]] = []  # every write's, answered in turn (then the default)
        self.sent: list[tuple[str, str, dict[str, str], bytes]] = []  # every write's method, path, headers, body


def make_handler(rec: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def setup(self) -> None:
            with rec.lock:
                rec.connections += 1
            super().setup()

        def _reply(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PATCH(self) -> None:
            self._write()

        def do_POST(self) -> None:
            self._write()

        def do_DELETE(self) -> None:
            self._write()

        def _write(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with rec.lock:
                if self.command == "PATCH":
                    rec.patches.append((self.path, dict(self.headers.items()), body))
                rec.sent.append((self.command, self.path, dict(self.headers.items()), body))
                scripted = rec.patch_answers.pop(0) if rec.patch_answers else None
            if scripted is not None:
                self._reply(*scripted)
                return
            with rec.lock:
                rec.in_flight += 1
                rec.writes += 1
                rec.max_in_flight = max(rec.max_in_flight, rec.in_flight)
            rec.release.wait(WAIT)
            with rec.lock:
                rec.in_flight -= 1
            self._reply(200, b'{"metadata":{"name":"x"}}')

        def do_GET(self) -> None:
            if "watch=true" not in self.path:
                self._reply(200, b'{"metadata":{"name":"read"}}')
                return
            if rec.header_delay:
                rec.release.wait(rec.header_delay)
            if rec.watch_status != 200:
                self._reply(rec.watch_status, b'{"kind":"Status","code":410,"reason":"Expired","message":"gone"}')
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in rec.watch_script:
                if rec.chunk_gap:
                    threading.Event().wait(rec.chunk_gap)  # the server's pace, not the test's logic
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            if rec.hold_watch.is_set():
                rec.release.wait(WAIT)
                return
            self.wfile.write(rec.watch_tail)
            self.wfile.flush()

    return Handler
