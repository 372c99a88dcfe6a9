"""The shipped manifests, read as a test needs them: every document, by file or by kind."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from jr2_actors.fake.rbac import Role, parse_role
from tests.support.paths import MANIFESTS

HOME = MANIFESTS / "orchestrator"  # the orchestrator's own namespace: its pod, identity, state and API
SANDBOXES = MANIFESTS / "sandboxes"  # the Sandboxes' namespace: its Role and the Harness pods' ingress
UNITS = (HOME, SANDBOXES)  # one orchestrator: what an overlay repeats
Doc = dict[str, Any]


def files() -> list[Path]:
    """Every YAML file under manifests/, kustomizations included."""
    return sorted(MANIFESTS.rglob("*.yaml"))


def docs(*folders: Path) -> list[Doc]:
    """Every Kubernetes object under `folders` (default: the base's, CRDs and the unit; kustomization files
    and an overlay's patches are not objects)."""
    return [copy.deepcopy(d) for folder in folders or (MANIFESTS / "crds", *UNITS)
            for p in sorted(folder.rglob("*.yaml"))
            if p.name != "kustomization.yaml" for d in _parsed(p)]


@functools.cache
def _parsed(path: Path) -> tuple[Doc, ...]:
    """A file's documents, parsed once per run (callers get copies, so a test may change what it gets)."""
    return tuple(d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d)


def one(kind: str, name: str | None = None, folder: Path | None = None) -> Doc:
    """The one object of `kind` (and `name`) in `folder`, or in the orchestrator's two namespaces."""
    found = [d for d in (docs(folder) if folder else docs(*UNITS))
             if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} in {folder or 'the unit'}"
    return found[0]


def namespace_of(folder: Path) -> str:
    """The namespace a folder's kustomization puts everything in."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8"))
    return str(kustomization["namespace"])


def manifest_role() -> Role:
    """The orchestrator's Role, in the namespace kustomize gives it (the Sandboxes')."""
    role = one("Role")
    return parse_role({**role, "metadata": {**role["metadata"], "namespace": namespace_of(SANDBOXES)}})
