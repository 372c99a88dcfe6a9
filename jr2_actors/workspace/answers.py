"""What the answers to a Workspace's calls mean to its core: the API server's objects and failures, the
Harness's refusals (pure reads, for `WorkspaceActor`'s calls on the pools and the renewal lane)."""

from __future__ import annotations

from typing import Any, Literal

from jr2_actors.harness.errors import HarnessError, HarnessUnreachable
from jr2_actors.values.errors import KubeError, KubeProtocolError
from jr2_actors.values.metadata import meta_text
from jr2_actors.workspace import messages as ws

LEASE_REFUSALS = (404, 409, 422)  # no Sandbox by the name, or another uid holds it: no renewal can land


def applied(obj: dict[str, Any]) -> ws.Applied:
    return ws.Applied(uid(obj), version(obj))


def version(obj: dict[str, Any]) -> str:
    return meta_text(obj, "resourceVersion")


def uid(obj: dict[str, Any]) -> str:
    found = meta_text(obj, "uid")
    if not found:
        raise KubeProtocolError("the Sandbox the API server answered with carries no uid")
    return found


def write_failed(what: Literal["sandbox", "secret"], e: Exception) -> ws.WriteFailed:
    if isinstance(e, KubeError):
        return ws.WriteFailed(what, str(e), e.status, e.retry_after)
    return ws.WriteFailed(what, str(e))  # no answer (or not Kubernetes): transient


def unavailable(e: Exception) -> bool:
    """No Harness served the call: a gateway's or a draining Harness's 5xx, or a call that never reached it.
    One that may have reached it (a read that timed out) is not sent again (CONTRACTS.md §3): the first may
    still be cloning."""
    if isinstance(e, HarnessError):
        return e.status in (502, 503, 504)
    return isinstance(e, HarnessUnreachable) and not e.reached
