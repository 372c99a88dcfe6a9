"""A release of one workflow: the orchestrator checks the document once for its submits and once for its
restore (issue 33 item 2: the check was two thirds of `POST /runs`' CPU)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node
from jr2_actors.values.workflow import WorkflowError, read_document
from tests.support.orchestrators import on_fake

pytestmark = pytest.mark.slow

HOLD = """
name: hold
workspaces:
  W: {size: {cpu: "10m", memory: "16Mi"}}
agents:
  worker: {instructions: "You work.", workspace: W, access: write}
start: hold
states:
  hold: {holds: [W], after: {seconds: 3600, to: done}}
  done: {final: done}
"""


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(nodes=[Node("only", 8000, 8 * 2**30)], start_seconds=0.05, long_poll=0.5,
                     bookmark_interval=None) as c:
        yield c


def test_submits_and_a_restore_of_one_workflow_check_it_once_each(cluster: FakeCluster, tmp_path: Path) -> None:
    orch = on_fake(cluster, tmp_path).start()
    try:
        runs = [orch.submit(read_document(HOLD)) for _ in range(3)]
        assert (orch.workflows.misses, orch.workflows.hits) == (1, 2)
        bad = read_document(HOLD.replace("start: hold", "start: nowhere"))
        for _ in range(2):  # refused each time, with its own error: a faulty document is never kept
            with pytest.raises(WorkflowError, match="names no state"):
                orch.submit(bad)
        assert orch.workflows.misses == 3 and len(orch.workflows) == 1
    finally:
        orch.stop()
    again = on_fake(cluster, tmp_path).start()
    try:
        assert sorted(r["runId"] for r in again.runs()) == sorted(runs)
        assert (again.workflows.misses, again.workflows.hits) == (1, 2)
    finally:
        again.stop()
