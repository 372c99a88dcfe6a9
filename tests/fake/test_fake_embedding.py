"""What users embedding the fake rely on: the pytest plugin's fixture and the `fake-cluster` command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pykka
import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.access import LocalFiles, resolve
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SECRET
from tests.support.waiting import wait_until


def test_the_plugin_fixture_is_a_started_cluster(jr2_fake_cluster: FakeCluster) -> None:
    client = jr2_fake_cluster.client()
    client.create(SECRET, {"metadata": {"name": "s"}, "data": {}})
    assert client.get(SECRET, "s") is not None
    assert jr2_fake_cluster.harness_url.startswith("http://127.0.0.1:")


@pytest.mark.slow
def test_fake_cluster_command_writes_a_usable_kubeconfig_and_stops_on_sigint(tmp_path: Path) -> None:
    cfg = tmp_path / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", "fake-cluster", "--kubeconfig-out", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: cfg.exists() and cfg.stat().st_size > 0, timeout=30, what="kubeconfig")
        assert (cfg.stat().st_mode & 0o777) == 0o600
        access = resolve({"KUBECONFIG": str(cfg)}, LocalFiles(), home=None)
        client = KubeClient(access)
        client.create(SECRET, {"metadata": {"name": "from-cli"}, "data": {}})
        assert client.get(SECRET, "from-cli") is not None
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert os.path.exists(cfg)


@pytest.mark.parametrize("namespace", ["Bad_NS", "", "x" * 64, "a.b"])
def test_an_invalid_namespace_is_refused_before_anything_starts(namespace: str) -> None:
    with pytest.raises(ValueError, match="not a valid namespace"):
        FakeCluster(namespace=namespace)


def test_a_port_in_use_stops_what_started_and_names_the_port() -> None:
    import socket
    import threading

    from jr2_actors.fake.http import ListenError

    before = {t.name for t in threading.enumerate()}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenError, match=f"127.0.0.1:{port}"):
            FakeCluster(port=port).start()
    assert pykka.ActorRegistry.get_all() == []
    assert {t.name for t in threading.enumerate() if t.is_alive()} <= before


def test_a_part_that_will_not_stop_leaves_no_key_folder_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster().start()
    folder = os.path.dirname(cluster.token_file)
    operator = cluster._operator
    assert operator is not None

    def stuck(**_: object) -> None:
        raise pykka.Timeout("the operator is stuck")

    monkeypatch.setattr(operator, "stop", stuck)
    cluster.stop()  # logs the stuck part, stops the rest
    assert not os.path.exists(folder)
    assert cluster._actor is None and cluster._http is None
