"""The store's metrics (persist latency, blob size, rows by status recounted once a second after writes,
sweeps) and the Kubernetes client's (requests by verb and code, 401 retries, the write gate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.store.actor import StoreActor
from jr2_actors.store.messages import Healthy, Persist, StoreError, Sweep
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.values.errors import KubeError, KubeTransportError
from tests.support.metrics_text import samples, value
from tests.support.waiting import wait_until

T0 = 1_790_000_000.0


def text(telemetry: Telemetry) -> str:
    return telemetry.exposition().decode()


def test_store_persists_sweeps_and_rows_by_status(tmp_path: Path) -> None:
    clock = VirtualClock(wall=T0)
    telemetry = Telemetry(clock=clock)
    ref = StoreActor.start(str(tmp_path), clock=clock, telemetry=telemetry)
    assert ref.ask(Healthy(), timeout=10) is True  # answered after its start: the boot's sweep and count
    boot = samples(text(telemetry))
    assert value(boot, "jr2_store_rows", status="live") == 0  # counted at boot
    assert value(boot, "jr2_store_sweeps_total", outcome="ok") == 1  # the boot's sweep

    blobs = {f"r{i}": {"state": "code", "pad": "x" * (100 * i)} for i in range(4)}
    for run_id, blob in blobs.items():
        ref.ask(Persist(run_id, "done" if run_id == "r3" else "live", blob), timeout=10)
    with pytest.raises(StoreError):
        ref.ask(Persist("r0", "nonsense", {}), timeout=10)
    written = samples(text(telemetry))
    assert value(written, "jr2_store_persist_seconds_count") == 4
    sizes = [len(json.dumps(b, separators=(",", ":"))) for b in blobs.values()]
    assert value(written, "jr2_store_blob_bytes_sum") == sum(sizes)
    assert value(written, "jr2_store_blob_bytes_bucket", le="1024.0") == 4
    assert value(written, "jr2_store_persist_failures_total") == 1
    assert value(written, "jr2_store_rows", status="live") == 0  # not recounted on every write

    clock.advance(1.0)  # one recount, a second after the first write of the burst
    wait_until(lambda: value(text(telemetry), "jr2_store_rows", status="live") == 3)
    rows = samples(text(telemetry))
    assert value(rows, "jr2_store_rows", status="done") == 1
    assert value(rows, "jr2_store_rows", status="failed") == 0

    clock.advance(8 * 24 * 3600.0)
    assert ref.ask(Sweep(), timeout=10) == 1  # r3, done over a week ago
    swept = samples(text(telemetry))
    assert value(swept, "jr2_store_swept_rows_total") == 1
    assert value(swept, "jr2_store_sweeps_total", outcome="ok") >= 2  # type: ignore[operator]
    clock.advance(1.0)
    wait_until(lambda: value(text(telemetry), "jr2_store_rows", status="done") == 0)
    ref.stop(block=True, timeout=10)


def test_kube_requests_by_verb_and_code_401_retries_and_the_write_gate(cluster: FakeCluster) -> None:
    telemetry = Telemetry()
    client = cluster.client()
    client.measure(telemetry.kube)
    body = {"metadata": {"name": "s1"}, "spec": {"port": 8080}}
    assert client.get(SANDBOX, "s1") is None
    client.create(SANDBOX, body)
    client.apply(SANDBOX, "s1", body)
    client.merge_patch(SANDBOX, "s1", {"metadata": {"annotations": {"a": "b"}}})
    client.list(SANDBOX)
    client.watch(SANDBOX, timeout_seconds=1).close()
    client.delete(SANDBOX, "s1")

    good = Path(cluster.token_file).read_text()
    Path(cluster.token_file).write_text("not-the-token")
    with pytest.raises(KubeError):
        client.get(SANDBOX, "s1")  # 401, the file re-read, 401 again: that is the answer
    Path(cluster.token_file).write_text(good)

    got = samples(text(telemetry))
    for verb, code in (("get", "404"), ("create", "201"), ("apply", "200"), ("patch", "200"), ("list", "200"),
                       ("watch", "200"), ("delete", "200"), ("get", "401")):
        assert (value(got, "jr2_kube_requests_total", verb=verb, code=code) or 0) >= 1, (verb, code)
    assert value(got, "jr2_kube_requests_total", verb="get", code="401") == 2
    assert value(got, "jr2_kube_unauthorized_retries_total") == 1
    assert value(got, "jr2_kube_write_cap") == 12
    assert value(got, "jr2_kube_writes_in_flight") == 0
    assert value(got, "jr2_kube_writes_waiting") == 0

    nowhere = KubeClient(ClusterAccess(server="https://127.0.0.1:1", namespace="jr2", source="test",
                                       token="t"), connect_timeout=1.0)
    nowhere.measure(telemetry.kube)
    with pytest.raises(KubeTransportError):
        nowhere.list(SANDBOX)
    assert value(text(telemetry), "jr2_kube_requests_total", verb="list", code="none") == 1
    nowhere.close()
    client.close()
