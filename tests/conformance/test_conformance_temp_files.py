"""The conformance suite's kr8s peer leaves nothing in TMPDIR: kr8s copies a kubeconfig's
`certificate-authority-data` into a temp file it never removes, so the peer hands it the CA as a file in the
test's own folder instead."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from tests.conformance.clients import Kr8s


def test_the_kr8s_peer_leaves_no_file_in_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with FakeCluster(namespace="jr2", operator=False, harness=False) as cluster:
        assert cluster.tls is not None  # a CA to hand over
        folder = tmp_path / "test"
        folder.mkdir()
        client = Kr8s(cluster.write_kubeconfig(str(folder / "kubeconfig")))
        try:
            assert client.names() == ([], None)  # a call: kr8s has read its kubeconfig and its CA
        finally:
            client.close()
    assert sorted(p.name for p in temp.iterdir()) == []
