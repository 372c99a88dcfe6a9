"""The kinds jr2 reads and writes, and where each lives on the API server (CONTRACTS.md §1).

The Orchestrator never reads or writes Pods: there is no Pod kind here, and there never will be.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def prefix(self) -> str:
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        parts = [self.prefix]
        if self.namespaced:
            if not namespace:
                raise ValueError(f"{self.kind} is namespaced: a namespace is required")
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name is not None:
            if not name:
                raise ValueError("an object name cannot be empty")
            parts.append(quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


SANDBOX = Kind("core.jr2.dev/v1alpha1", "Sandbox", "sandboxes")
REPO = Kind("core.jr2.dev/v1alpha1", "Repo", "repos")
SECRET = Kind("v1", "Secret", "secrets")
NAMESPACE = Kind("v1", "Namespace", "namespaces", namespaced=False)

JR2_KINDS = (SANDBOX, REPO, SECRET, NAMESPACE)
