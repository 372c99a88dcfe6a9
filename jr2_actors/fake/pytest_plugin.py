"""A pytest plugin (entry point `jr2_fake_cluster`): the fake cluster as a fixture for any test suite.

    def test_my_harness(jr2_fake_cluster):
        client = jr2_fake_cluster.client()
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jr2_actors.fake.cluster import FakeCluster


@pytest.fixture
def jr2_fake_cluster() -> Iterator[FakeCluster]:
    """A started fake cluster (API server, operator, Harness) in namespace `jr2`, stopped after the test."""
    with FakeCluster(namespace="jr2") as cluster:
        yield cluster
