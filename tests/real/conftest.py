"""The real-cluster tier: every test here runs against a real kube-apiserver (realcluster/), marked
`realcluster` so `pytest -m "not realcluster"` is the fast suite alone.

Where `go` is not on PATH the whole tier is skipped with one line (pytest's summary: "go is not on PATH …").
Where it is, the control plane is built once (cached outside the checkout, realcluster/build.py) and started
once for the session; a build or start that fails is an error, never a skip. Under pytest-xdist the whole tier
runs on one worker (tests/support/parallel.py's scheduler), so the suite starts one control plane, not one a
worker.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realcluster.cluster import RealCluster
from tests.support.processes import STARTED

HERE = Path(__file__).resolve().parent
NO_GO = "go is not on PATH: the real-cluster tier (tests/real/) needs it to build kube-apiserver"


# Without Go the tier is not collected at all, and says so in one line at the end of the run (a skip per
# test would be a line per file in pytest's summary).
collect_ignore_glob = ["test_*.py"] if shutil.which("go") is None else []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if collect_ignore_glob:
        terminalreporter.write_line(f"SKIPPED tests/real/: {NO_GO}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realcluster)


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """One real control plane for the session: CRDs, namespace `jr2` (the Sandboxes') and `jr2-system` (the
    orchestrator's own), the shipped RBAC bound to the orchestrator's identity (`cluster.orchestrator`);
    `cluster.admin` is system:masters."""
    log = tmp_path_factory.mktemp("realcluster") / "apiserver.log"
    with RealCluster(namespace="jr2", log_to=log) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _the_session_cluster_outlives_each_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """tests/conftest.py kills every process a test leaves running; the session's control plane (started, or
    restarted, inside a test) is the one that is meant to outlive it. Torn down before that check."""
    yield
    if "real_cluster" in request.fixturenames:
        cluster: RealCluster = request.getfixturevalue("real_cluster")
        if cluster.process is not None:
            STARTED.discard(cluster.process)
