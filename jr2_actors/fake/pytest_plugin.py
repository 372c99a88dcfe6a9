"""A pytest plugin (entry point `jr2_fake_cluster`): the fake cluster, and an orchestrator on it, as
fixtures for any test suite.

    def test_my_harness(jr2_fake_cluster):
        client = jr2_fake_cluster.client()

    def test_my_workflow(jr2_orchestrator, jr2_fake_cluster):
        run_id = jr2_orchestrator.submit(my_workflow_document)
        assert jr2_orchestrator.wait_finished(run_id, 30)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from jr2_actors.fake.cluster import FakeCluster

if TYPE_CHECKING:
    from jr2_actors.orchestrator import Orchestrator


@pytest.fixture
def jr2_fake_cluster() -> Iterator[FakeCluster]:
    """A started fake cluster (API server, operator, Harness) in namespace `jr2`, stopped after the test."""
    with FakeCluster(namespace="jr2") as cluster:
        yield cluster


@pytest.fixture
def jr2_orchestrator(jr2_fake_cluster: FakeCluster, tmp_path: Path) -> Iterator[Orchestrator]:
    """A started orchestrator on `jr2_fake_cluster` (its state in the test's temp folder), stopped after."""
    from jr2_actors.orchestrator import Orchestrator

    client = jr2_fake_cluster.client()
    orchestrator = Orchestrator(client, state_dir=str(tmp_path / "jr2-state"), signing_key=jr2_fake_cluster.signing_key,
                                instance_harness=jr2_fake_cluster.instance_harness_url)
    with orchestrator:
        yield orchestrator
    client.close()
