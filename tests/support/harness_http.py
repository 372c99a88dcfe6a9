"""The fake Harness over its own HTTP, as a Harness client calls it (CONTRACTS.md §3): one Sandbox's
endpoint, its bearer token, an admission body and a long-poll."""

from __future__ import annotations

from typing import Any

import requests

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.watch.sandbox import view
from tests.support import admissions

NAME = "ws-run1-f-1-abc123"
T0 = 1_790_000_000.0


def url(cluster: FakeCluster, path: str = "") -> str:
    endpoint = view(cluster.client().get(SANDBOX, NAME) or {}).endpoint
    assert endpoint == f"{cluster.harness_url}/{NAME}"
    return endpoint + path


def auth(cluster: FakeCluster, name: str = NAME) -> dict[str, str]:
    return {"Authorization": f"Bearer {cluster.harness_token(name)}"}


def admission(agent: str = "coder", **extra: Any) -> dict[str, Any]:
    """An admission's JSON body, as a test posts it to the fake Harness over HTTP."""
    return admissions.body(agent=agent, message="Fix the failing test.", **extra)


def poll(cluster: FakeCluster, stream_url: str, offset: str) -> requests.Response:
    return requests.get(stream_url, params={"offset": offset, "view": "updates", "live": "long-poll"},
                        headers=auth(cluster), timeout=10)
