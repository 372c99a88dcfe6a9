"""Issue 20 item 5: one suite of checks, run through every client a user brings to the fake cluster.

Each check is written once against `clients.Client` and runs for each client that offers the operation
(`clients.NOT_OFFERED` names the gaps and why). What each asserts is what a real kube-apiserver answers.
kubectl's checks skip, saying so, where kubectl is not on PATH (a fresh CI machine has only Python).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from tests.conformance.checks import CHECKS
from tests.conformance.clients import CLIENTS, NOT_OFFERED, Client, kubectl_path


def applicable() -> Iterator[Any]:
    for client in CLIENTS:
        for name in CHECKS:
            marks = []
            reason = NOT_OFFERED.get((client.name, name))
            if reason is not None:
                continue  # listed as not offered in the docs table, not run
            if client.name == "kubectl":
                marks += [pytest.mark.kubectl,
                          pytest.mark.skipif(kubectl_path() is None, reason="kubectl is not on PATH")]
            yield pytest.param(client, name, marks=marks, id=f"{client.name}-{name}")


@pytest.fixture
def conformance_cluster() -> Iterator[FakeCluster]:
    with FakeCluster(namespace="jr2", operator=False, harness=False) as cluster:
        yield cluster


@pytest.mark.parametrize(("client_type", "check_name"), list(applicable()))
def test_conformance(client_type: type[Client], check_name: str, conformance_cluster: FakeCluster,
                     tmp_path: Path) -> None:
    kubeconfig = conformance_cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    client = client_type(kubeconfig)  # type: ignore[call-arg]
    try:
        CHECKS[check_name](client, conformance_cluster)
    finally:
        client.close()


def test_every_gap_names_a_client_and_a_check() -> None:
    names = {c.name for c in CLIENTS}
    for client, name in NOT_OFFERED:
        assert client in names and name in CHECKS, (client, name)
