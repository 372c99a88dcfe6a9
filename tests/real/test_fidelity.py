"""Issue 30 item 5: the fidelity corpus (realcluster/corpus.py) replayed on the fake and on a real
kube-apiserver in one run, each answer pair compared after normalising what must differ. The set of
differences must be exactly `KNOWN` (each listed, with why, in docs/fake-cluster.md): a new one fails, and
so does one fixed but still listed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from realcluster.cluster import RealCluster
from realcluster.corpus import CORPUS
from realcluster.fidelity import KNOWN, replay, report, targets

pytestmark = pytest.mark.slow


@pytest.fixture
def fake() -> Iterator[FakeCluster]:
    with FakeCluster(namespace="jr2", operator=False, harness=False) as c:
        yield c


def test_the_fake_answers_the_corpus_as_the_real_server_does(fake: FakeCluster, real_cluster: RealCluster,
                                                             tmp_path: Path) -> None:
    results = replay(*targets(fake, real_cluster, str(tmp_path)))
    text = report(results, verbose=True)
    print(text)
    assert len(results) == len(CORPUS)
    differ = {r.step.name for r in results if not r.match}
    assert differ == set(KNOWN), text
