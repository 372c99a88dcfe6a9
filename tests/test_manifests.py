"""The shipped RBAC grants jr2's own kinds in one namespace, and nothing about Pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MANIFESTS = Path(__file__).parent.parent / "manifests"


def docs() -> list[dict[str, Any]]:
    return [d for p in sorted(MANIFESTS.rglob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def test_no_cluster_wide_grant() -> None:
    kinds = {d["kind"] for d in docs()}
    assert "ClusterRole" not in kinds
    assert "ClusterRoleBinding" not in kinds


def test_roles_never_touch_pods_or_use_wildcards() -> None:
    rules = [r for d in docs() if d["kind"] == "Role" for r in d["rules"]]
    assert rules, "the Role has rules"
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        for resource in rule["resources"]:
            assert not resource.startswith("pods"), resource


def test_sandboxes_can_be_watched() -> None:
    rules = [r for d in docs() if d["kind"] == "Role" for r in d["rules"]]
    sandbox = [r for r in rules if "sandboxes" in r["resources"]]
    assert sandbox and {"list", "watch", "patch"} <= set(sandbox[0]["verbs"])
