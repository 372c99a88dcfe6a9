"""What the Kubernetes client's tests share: a KubeClient against a scripted loopback server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from tests.support.loopback_kube import Recorder, make_handler
from tests.support.waiting import WAIT


@pytest.fixture
def server() -> Iterator[tuple[Recorder, KubeClient]]:
    rec = Recorder()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(rec))
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    access = ClusterAccess(server=f"http://127.0.0.1:{srv.server_address[1]}", namespace="jr2", source="t")
    c = KubeClient(access, read_timeout=WAIT)
    try:
        yield rec, c
    finally:
        rec.release.set()
        c.close()
        srv.shutdown()
        srv.server_close()
