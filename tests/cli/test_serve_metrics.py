"""`jr2-actors serve` serves its orchestrator's metrics at `/metrics` (open, Prometheus text 0.0.4), and a
SIGTERM still ends it cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from jr2_actors.fake.cluster import FakeCluster
from tests.support.metrics_text import samples, value
from tests.support.serving import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def test_serve_answers_metrics_in_the_prometheus_text_format(tmp_path: Path) -> None:
    with FakeCluster(namespace="jr2", operator=False, harness=False) as cluster:
        kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
        port = free_port()
        env = {**os.environ, "JR2_INSTANCE_TOKEN": "t" * 24, "JR2_SIGNING_KEY": "k" * 40, "TMPDIR": str(tmp_path)}
        proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", "--log-format", "json", "serve",
                                 "--namespace", "jr2", "--state-dir", str(tmp_path / "state"), "--kubeconfig",
                                 kubeconfig, "--listen", f"127.0.0.1:{port}"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{port}/metrics"

            def watching() -> bool:
                try:
                    resp = requests.get(url, timeout=5)
                except requests.exceptions.RequestException:
                    return False
                return resp.status_code == 200 and value(resp.text, "jr2_watch_phase", phase="watching") == 1

            wait_until(watching, timeout=60, what="serve's /metrics with the watch up")
            resp = requests.get(url, timeout=5)
            assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            got = samples(resp.text)
            assert value(got, "jr2_actor_instances", kind="StoreActor") == 1
            assert value(got, "jr2_actor_instances", kind="WatchActor") == 1
            assert value(got, "jr2_store_rows", status="live") == 0
            assert (value(got, "jr2_kube_requests_total", verb="list", code="200") or 0) >= 1
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        _, err = proc.communicate()
        assert "Traceback" not in err
