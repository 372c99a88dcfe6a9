"""What the fake's tests share: the official `kubernetes` client and kubectl's environment, each pointed at
the test's cluster (tests/conftest.py's `cluster`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config

from jr2_actors.fake.cluster import FakeCluster


@pytest.fixture
def api(cluster: FakeCluster, tmp_path: Path) -> Iterator[k8s.ApiClient]:
    path = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    api_client = config.new_client_from_config(config_file=path)
    yield api_client
    api_client.close()


@pytest.fixture
def custom(api: k8s.ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api)


@pytest.fixture
def kenv(cluster: FakeCluster, tmp_path: Path) -> dict[str, str]:
    path = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    return {**os.environ, "KUBECONFIG": path, "HOME": str(tmp_path)}
