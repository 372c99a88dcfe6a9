"""What the command-line tests share: an orchestrator's API on a fake cluster, in the test's process, for
the client commands to call (`server`: its URL, the cluster, the orchestrator)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator
from tests.support.api_on_fake import api_on_fake
from tests.support.client_commands import TOKEN


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, FakeCluster, Orchestrator]]:
    with api_on_fake(tmp_path, TOKEN) as served:
        yield served
