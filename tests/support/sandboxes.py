"""Sandbox objects for tests, built as the Orchestrator writes them (identity) and the operator fills them."""

from __future__ import annotations

import copy
import json
from typing import Any

from jr2_actors.watch.identity import annotations_for, labels_for, sandbox_name
from tests.support.paths import FIXTURES


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())  # type: ignore[no-any-return]


def sandbox(run_id: str = "run-1", workspace: str = "F-1", *, rv: int | str = 1, uid: str | None = None,
            phase: str = "Pending", scheduled: str = "", waiting: str = "", workflow: str = "wf") -> dict[str, Any]:
    name = sandbox_name(run_id, workspace)
    status: dict[str, Any] = {"phase": phase}
    if scheduled:
        status["conditions"] = [{"type": "Scheduled", "status": "True" if scheduled == "Scheduled" else "False",
                                 "reason": scheduled, "message": ""}]
    if waiting:
        status["waiting"] = [{"container": "harness", "reason": waiting}]
    return {"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox",
            "metadata": {"name": name, "namespace": "jr2", "uid": uid or f"uid-{name}", "resourceVersion": str(rv),
                         "labels": labels_for(run_id, workflow), "annotations": annotations_for(run_id, workspace)},
            "spec": {"port": 8080}, "status": status}


def with_rv(obj: dict[str, Any], rv: int, **status: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = str(rv)
    out["status"].update(status)
    return out


def ready_sandbox(cluster: Any, clock: Any, name: str) -> str:
    """Apply a Sandbox whose Harness accepts `cluster.harness_token(name)`, run the operator to Ready on the
    virtual clock (the cluster's `start_seconds` must be 1), and return its Harness endpoint."""
    from jr2_actors.kube.kinds import SANDBOX
    from jr2_actors.watch.sandbox import view

    client = cluster.client()
    client.apply(SANDBOX, name, {"spec": {"env": cluster.harness_env(name), "port": 8080}})
    cluster.reconcile()
    clock.advance(1)
    cluster.reconcile()
    ready = view(client.get(SANDBOX, name) or {})
    assert ready.phase == "Ready", ready
    return ready.endpoint


def create(cluster: Any, runs: list[str], workspace: str = "F-1") -> None:
    """Create each run's Sandbox straight in the fake's store, as the Orchestrator writes it (no operator)."""
    from jr2_actors.kube.kinds import SANDBOX

    def write(state: Any) -> None:
        for run in runs:
            body = {"metadata": {"name": sandbox_name(run, workspace), "labels": labels_for(run, "wf"),
                                 "annotations": annotations_for(run, workspace)}, "spec": {"port": 8080}}
            state.create(SANDBOX, "jr2", body, now=0)
    cluster.call(write)
