"""What the Orchestrator writes for a Workspace: its Sandbox and the Sandbox's token Secret (CONTRACTS.md §1).

Pure: a `WorkspaceSpec` and the signing key in, the objects out. The Harness token never appears in the
Sandbox — only its digest (`JR2_HARNESS_TOKEN_SHA256`); the Sandbox's own token lives in its Secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from jr2_actors.harness.tokens import DIGEST_ENV, harness_token, token_digest
from jr2_actors.values.timefmt import rfc3339_ms
from jr2_actors.values.workflow import WorkspaceDef
from jr2_actors.watch.identity import (
    KEEPALIVE_ANNOTATION,
    SandboxKey,
    annotations_for,
    label_value,
    labels_for,
    sandbox_name,
)

HARNESS_PORT = 8080
DEFAULT_IDLE_TIMEOUT = "30m"
SANDBOX_TOKEN_KEY = "JR2_SANDBOX_TOKEN"  # noqa: S105 - the Secret's key name, not a secret
SANDBOX_LABEL = "jr2.dev/sandbox"


@dataclass(frozen=True)
class WorkspaceSpec:
    """One Workspace of one run: the workflow's definition of it, and what the run decides around it."""

    run_id: str
    workflow: str
    definition: WorkspaceDef
    image: str  # the definition's image, else `serve --sandbox-image`
    idle_timeout: str = DEFAULT_IDLE_TIMEOUT
    extra_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def path(self) -> str:
        """The Workspace's path in its run (RunStatus calls it `child` on the wire)."""
        return self.definition.path

    @property
    def key(self) -> SandboxKey:
        return SandboxKey(self.run_id, self.path)

    @property
    def name(self) -> str:
        return sandbox_name(self.run_id, self.path)

    @property
    def secret_name(self) -> str:
        return token_secret_name(self.name)


def token_secret_name(sandbox: str) -> str:
    """CONTRACTS.md §1: the Sandbox's token Secret is `<name>-token`."""
    return f"{sandbox}-token"


def keepalive(wall: float) -> str:
    """The Lease's timestamp: RFC 3339, UTC, milliseconds."""
    return rfc3339_ms(wall)


def repo_key(url: str) -> str:
    """A stable, label-safe key for a Repo URL: its slug plus a short hash (`github-com-acme-app-5c1e`)."""
    slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^[a-z]+://", "", url.lower()).removesuffix(".git")).strip("-")
    digest = hashlib.sha256(url.encode()).hexdigest()[:4]
    return f"{slug[:40].strip('-') or 'repo'}-{digest}"


def sandbox_token(key: bytes, name: str) -> str:
    return base64.urlsafe_b64encode(hmac.new(key, f"sandbox:{name}".encode(), hashlib.sha256).digest()).rstrip(
        b"=").decode()


def sandbox_body(spec: WorkspaceSpec, signing_key: bytes, wall: float) -> dict[str, Any]:
    """The Sandbox as applied (server-side apply, field manager `jr2`): idempotent for the same spec."""
    name = spec.name
    size = spec.definition
    resources = {"requests": {"cpu": size.cpu, "memory": size.memory},
                 "limits": {"cpu": size.cpu, "memory": size.memory}}
    env = [{"name": DIGEST_ENV, "value": token_digest(harness_token(signing_key, name))}]
    env += [{"name": k, "value": v} for k, v in sorted(spec.extra_env.items())]
    return {
        "metadata": {"name": name, "labels": labels_for(spec.run_id, spec.workflow),
                     "annotations": {**annotations_for(spec.run_id, spec.path),
                                     KEEPALIVE_ANNOTATION: keepalive(wall)}},
        "spec": {
            "image": spec.image,
            "port": HARNESS_PORT,
            # The whole Size is reserved for the pod (ADR-0060); the Harness container is given the same.
            "podResources": resources,
            "resources": resources,
            "idleTimeout": spec.idle_timeout,
            "env": env,
            "repos": [{"key": repo_key(r.url), "url": r.url} for r in spec.definition.repos],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": HARNESS_PORT}, "periodSeconds": 1},
        },
    }


def token_secret(spec: WorkspaceSpec, signing_key: bytes, sandbox_uid: str) -> dict[str, Any]:
    """`<name>-token`, owned by the Sandbox (uid from the apply answer), so it goes when the Sandbox goes."""
    name = spec.name
    token = sandbox_token(signing_key, name)
    return {
        "metadata": {"name": spec.secret_name, "labels": {SANDBOX_LABEL: label_value(name)},
                     "ownerReferences": [{"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox", "name": name,
                                          "uid": sandbox_uid, "controller": False, "blockOwnerDeletion": False}]},
        "type": "Opaque",
        "data": {SANDBOX_TOKEN_KEY: base64.b64encode(token.encode()).decode()},
    }


def written_by(obj: Mapping[str, Any], uid: str, stamps: Collection[str]) -> bool:
    """Whether `obj` is still the Sandbox this Workspace wrote: its uid, and a Lease stamp this Workspace
    wrote itself. A successor that adopted the name has stamped it since (its apply and its renewals), so
    its Sandbox is never taken for ours (ADR-0064's delete guard). A Workspace restored after a restart that
    wrote nothing yet has no stamp to compare: its uid decides (no successor can exist in the process yet)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or meta.get("uid") != uid:
        return False
    if not stamps:
        return True
    annotations = meta.get("annotations")
    stamp = annotations.get(KEEPALIVE_ANNOTATION) if isinstance(annotations, Mapping) else None
    return stamp in stamps


def lease_patch(wall: float, uid: str) -> dict[str, Any]:
    """The Lease's merge patch. It carries the uid this Workspace wrote: the API server refuses a patch whose uid
    is not the object's (422, "field is immutable"), so a renewal never touches another Sandbox that took the
    name since."""
    return {"metadata": {"uid": uid, "annotations": {KEEPALIVE_ANNOTATION: keepalive(wall)}}}


def attach_branch(spec: WorkspaceSpec) -> str:
    """The branch the Workspace works on: the workflow's, else one of the run's own (never a shared one)."""
    return spec.definition.branch or f"jr2/{label_value(spec.run_id)}"


def attach_slots(spec: WorkspaceSpec) -> list[dict[str, str]]:
    """The `/attach` slots: each Repo with the identity it is fetched as and its key."""
    slots = []
    for repo in spec.definition.repos:
        slot = {"slot": repo.slot, "url": repo.url, "identity": "jr2", "key": repo_key(repo.url)}
        if repo.ref:
            slot["ref"] = repo.ref
        slots.append(slot)
    return slots
