"""The API of an orchestrator on a fake cluster, in the test's process, for the client commands' tests."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from jr2_actors.api.app import Api
from jr2_actors.api.server import ApiServer
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.orchestrator import Orchestrator

QUICK = {"start_seconds": 0.05, "long_poll": 0.5, "bookmark_interval": None}


@contextlib.contextmanager
def api_on_fake(tmp_path: Path, token: str, *, before: Callable[[FakeCluster], Any] | None = None,
                **cluster_options: Any) -> Iterator[tuple[str, FakeCluster, Orchestrator]]:
    """Its URL, the cluster, the orchestrator. `before` runs on the cluster before the orchestrator starts
    (a control plane away from the first list); `cluster_options` are the FakeCluster's, over QUICK's."""
    with FakeCluster(**{**QUICK, **cluster_options}) as cluster:
        if before is not None:
            before(cluster)
        client = cluster.client()
        try:
            with Orchestrator(client, state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key) as orch:
                api = ApiServer(Api(orch, token))
                api.start()
                try:
                    yield api.url, cluster, orch
                finally:
                    api.stop()
        finally:
            client.close()
