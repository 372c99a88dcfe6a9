"""An Orchestrator on a fake cluster, as the end-to-end tests make one: its client, its signing key, its
Instance Harness, and a state folder of the test's."""

from __future__ import annotations

from pathlib import Path

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator


def on_fake(cluster: FakeCluster, state: Path) -> Orchestrator:
    return Orchestrator(cluster.client(), state_dir=str(state), signing_key=cluster.signing_key,
                        instance_harness=cluster.instance_harness_url)
