"""Real Kubernetes clients against the fake: kubectl when it is on PATH, and the Sandbox objects the
official `kubernetes` client writes. The fixtures that hand them a cluster are tests/fake/conftest.py's."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
from kubernetes import client as k8s

GROUP, VERSION, PLURAL, NS = "core.jr2.dev", "v1alpha1", "sandboxes", "jr2"

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")

SANDBOX_YAML = """apiVersion: core.jr2.dev/v1alpha1
kind: Sandbox
metadata:
  name: ws-k
  labels: {jr2.dev/run: r1}
spec:
  port: 8080
"""


def kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60,
                          check=False)


def body(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Sandbox",
            "metadata": {"name": name, "labels": {"jr2.dev/run": "r1"}}, "spec": {"port": 8080}, **extra}


def create(custom: k8s.CustomObjectsApi, name: str, **extra: Any) -> dict[str, Any]:
    return custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body(name, **extra))  # type: ignore[no-any-return]
