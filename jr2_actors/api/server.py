"""The API's listener: cheroot's threaded WSGI server (CherryPy's), not `http.server`.

Why cheroot: a fixed pool of worker threads with a bounded accept queue, a socket timeout on every read
and write (a slow or idle client cannot hold a worker forever), HTTP/1.1 keep-alive and chunked bodies,
and a clean `stop()` that drains the pool — what a pod's API needs, in one small pure-Python package.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from cheroot import wsgi

from jr2_actors.values.constants import API_SHUTDOWN_SECONDS, API_SOCKET_TIMEOUT_SECONDS

log = logging.getLogger(__name__)

THREADS = 16


class ApiServer:
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *, threads: int = THREADS,
                 timeout: float = API_SOCKET_TIMEOUT_SECONDS) -> None:
        self._server = wsgi.Server((host, port), app, numthreads=threads, timeout=int(max(timeout, 1)),
                                   shutdown_timeout=int(API_SHUTDOWN_SECONDS), request_queue_size=64,
                                   server_name="jr2-actors")
        self._thread: threading.Thread | None = None
        self._app = app

    def start(self) -> None:
        """Bind and listen now (an address in use raises OSError here), then serve on a thread."""
        self._server.prepare()
        self._thread = threading.Thread(target=self._serve, name="jr2-api", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._server.serve()
        except Exception:
            log.exception("the API server stopped on an error")

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.bind_addr[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    def stop(self) -> None:
        """End the event streams (an app with `close()`), stop accepting, let requests in flight finish."""
        close = getattr(self._app, "close", None)
        if callable(close):
            close()
        self._server.stop()
        if self._thread is not None:
            self._thread.join(API_SHUTDOWN_SECONDS + 1)
