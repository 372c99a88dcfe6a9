"""Every metric follows Prometheus naming (units in names, base units, `_total` counters, `_seconds` or
`_bytes` histograms), is defined once, in its family's `metrics.py`, can be produced, and is explained in
docs/operations.md."""

from __future__ import annotations

import re
import threading

from prometheus_client.parser import text_string_to_metric_families

from jr2_actors.harness.pools import HarnessPools
from jr2_actors.kube.frames import Bookmark
from jr2_actors.kube.gate import FifoGate
from jr2_actors.kube.metrics import KubeMetrics
from jr2_actors.store.files import Footprint
from jr2_actors.telemetry import Telemetry
from jr2_actors.testing.clock import VirtualClock
from jr2_actors.watch.metrics import WatchState
from jr2_actors.workspace.messages import WaitEntry
from tests.support.metric_names import FAMILIES, NAMES, OPERATIONS, names_of
from tests.support.metrics_text import FakeRun, Record
from tests.support.probes import Gated
from tests.support.waiting import wait_until


def test_each_name_is_defined_in_one_family_only() -> None:
    assert sum(len(names_of(module)) for module in FAMILIES) == len(NAMES)


def everything() -> str:
    """An exposition in which every family has at least one series."""
    clock = VirtualClock(wall=1_790_000_000.0)
    telemetry = Telemetry(clock=clock)
    gate = threading.Event()
    ref = Gated.start(gate, telemetry, name="held")
    try:
        ref.tell(1)
        ref.tell(2)
        wait_until(lambda: ref.actor_inbox.qsize() == 1)  # type: ignore[attr-defined]
        telemetry.watch.publish(WatchState("watching", False, 0, 1, 1, "7"))
        telemetry.watch.frame(Bookmark("7"))
        telemetry.watch.relist("expired")
        telemetry.watch.watch_opened()
        telemetry.workspaces.delivered(clock.wall())
        telemetry.store.persisted(0.001, 1000)
        telemetry.store.rows({"live": 1})
        telemetry.store.swept(1)
        telemetry.store.footprint(Footprint({"history.db": 4096}, 4096, 2, 1 << 30, 1 << 31))
        kube: KubeMetrics = telemetry.kube
        kube.read_gate(FifoGate(12))
        kube.request("get", 200)
        kube.unauthorized_retry()
        telemetry.harness.admission("admitted")
        telemetry.harness.memory_kill_read("read")
        telemetry.harness.read_pools(HarnessPools())
        telemetry.runs.update(FakeRun("r-1", "code", {"F-1": Record("placing")},
                                      [("F-1", WaitEntry("node", "full", clock.wall()))]).view())
        return telemetry.exposition().decode()
    finally:
        gate.set()
        ref.stop(block=True, timeout=10)


def test_every_metric_is_named_as_prometheus_asks_and_defined_once() -> None:
    families = {f.name: f for f in text_string_to_metric_families(everything())}
    exposed = {name + ("_total" if f.type == "counter" else "") for name, f in families.items()
               if not name.endswith("_created")}
    assert exposed == NAMES  # every name defined is produced, and nothing else is
    for name, family in families.items():
        if name.endswith("_created"):
            continue  # prometheus_client's own: when a counter or histogram series began
        assert re.fullmatch(r"jr2_[a-z0-9_]+", name), name
        assert not re.search(r"_(ms|milliseconds|kb|mb|kib|mib)(_|$)", name), f"{name}: base units only"
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), name
        elif family.type == "histogram":
            assert name.endswith(("_seconds", "_bytes")), f"{name}: a histogram names its unit"
        else:
            assert family.type == "gauge", name
            if re.search(r"age|latency|oldest", name):
                assert name.endswith("_seconds"), f"{name}: a time names its unit"


def test_every_metric_is_explained_in_the_operations_guide() -> None:
    guide = OPERATIONS.read_text(encoding="utf-8")
    missing = sorted(name for name in NAMES if f"`{name.removesuffix('_total')}" not in guide)
    assert not missing, f"docs/operations.md does not explain {missing}"
