"""The orchestrator runs in a namespace of its own (manifests/orchestrator/, jr2-system), apart from the
Sandboxes' (`--namespace`, jr2) so that its Role there reaches no Secret where the signing key is. Its
in-cluster access names its own namespace (the ServiceAccount's namespace file): every request it makes goes
to the Sandboxes' namespace all the same, never to its own."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from jr2_actors.commands.serve_access import sandboxes_access
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from jr2_actors.orchestrator import Orchestrator
from jr2_actors.values.workflow import read_document
from tests.support.workflows import one_state

OWN = "jr2-system"


def test_serve_whose_access_names_its_own_namespace_works_in_the_sandboxes(tmp_path: Path) -> None:
    with FakeCluster(namespace="jr2") as cluster:
        cluster.harness(lambda core: core.pick_first_allowed(True))
        in_cluster = replace(cluster.access(), namespace=OWN)  # as in cluster: the pod's own namespace
        # What serve builds its client from (without it, each Workspace is written in OWN: the run ends `error`).
        client = KubeClient(sandboxes_access(in_cluster, argparse.Namespace(namespace="jr2")))
        try:
            with Orchestrator(client, state_dir=str(tmp_path / "state"), signing_key=cluster.signing_key,
                              namespace="jr2") as orchestrator:
                run_id = orchestrator.submit(read_document(one_state("home")))
                final = orchestrator.wait_finished(run_id, 60)
                assert final is not None and final["status"] == "done"
        finally:
            client.close()
        paths = [r["path"] for r in cluster.requests()]
    assert any("/namespaces/jr2/" in p for p in paths)
    assert not [p for p in paths if f"/namespaces/{OWN}/" in p or p.endswith(f"/namespaces/{OWN}")]


def test_serve_points_its_client_at_the_sandboxes_namespace_whatever_its_access_says() -> None:
    in_cluster = ClusterAccess(server="https://10.0.0.1:443", namespace=OWN, source="in-cluster", in_cluster=True,
                               token_file="/var/run/secrets/kubernetes.io/serviceaccount/token")
    got = sandboxes_access(in_cluster, argparse.Namespace(namespace="jr2"))
    assert got.namespace == "jr2"
    assert replace(got, namespace=OWN) == in_cluster  # nothing else changed
