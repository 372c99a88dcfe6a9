"""What a Sandbox's and the API's words mean to a Workspace (ADR-0064, CONTRACTS.md §2). Pure:
`WorkspaceCore` decides with these; nothing here holds state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jr2_actors.values.metadata import meta_text
from jr2_actors.watch.sandbox import SandboxView
from jr2_actors.workspace.messages import WaitOn

# Waiting reasons that end a provision at once: nothing jr2 waits for will change them.
FAST_FAULTS = frozenset({"CrashLoopBackOff", "CreateContainerConfigError", "InvalidImageName", "ErrImageNeverPull",
                         "CreateContainerError"})
# An API answer that refuses our request itself: retrying sends the same refused request. A 403 is not one
# at first (CONTRACTS.md §2: an API-server restart answers 403 for a few ms): `FORBIDDEN_GRACE_SECONDS`.
REFUSALS = frozenset({400, 404, 405, 413, 415, 422})
FORBIDDEN = 403


def ready(sandbox: SandboxView) -> bool:
    condition = sandbox.condition("Ready")
    return sandbox.phase == "Ready" or (condition is not None and condition.status == "True")


def scheduled(sandbox: SandboxView) -> bool:
    condition = sandbox.condition("Scheduled")
    return (condition is not None and condition.status == "True") or ready(sandbox)


def wait_reason(sandbox: SandboxView, *, waiting: bool) -> tuple[WaitOn, str] | None:
    """ADR-0064: what an unplaced Sandbox waits on, in the scheduler's or the quota's words; None: nothing
    to tell (nothing said yet, or the scheduler has not answered a wait not yet open)."""
    condition = sandbox.condition("Scheduled")
    if condition is None:
        return None
    if condition.reason == "QuotaExceeded":
        on: WaitOn = "quota"
    elif condition.reason in ("Unschedulable", "SchedulingPending") or condition.status == "Unknown":
        on = "node"
    else:
        return None
    if not waiting and condition.reason == "SchedulingPending":
        return None  # not yet a wait: the scheduler has not answered
    return on, condition.message or "waiting for the scheduler"


def stuck(sandbox: SandboxView, secret_name: str) -> str | None:
    """A provision that cannot succeed, in the Harness's own last words — but a missing token Secret of this
    very Workspace waits (`secret "<name>-token" not found`: it is written after the Sandbox)."""
    for w in sandbox.waiting:
        own = bool(secret_name) and f'"{secret_name}"' in w.message and "not found" in w.message
        if w.reason in FAST_FAULTS and not own:
            last_words = sandbox.last_terminated.message if sandbox.last_terminated else ""
            return f"{w.reason}: {last_words or w.message}"
    return None


def lost_reason(sandbox: SandboxView) -> str:
    lost = sandbox.condition("Lost") or sandbox.condition("Ready")
    return f"{lost.reason}: {lost.message}" if lost is not None and lost.reason else "the Sandbox was lost"


def memory_fault(limit: str | None, reason: str, message: str) -> str | None:
    """An `OOMKilled` end names the memory limit (ADR-0062 reads a kernel kill here)."""
    if reason != "OOMKilled":
        return None
    return f"memory limit (OOMKilled, limit {limit or 'unknown'}): {message}".rstrip(": ")


def version(obj: Mapping[str, Any]) -> str:
    """An object's resourceVersion as the API server answered it ("" when it says none)."""
    return meta_text(obj, "resourceVersion")


def newest(known: str, rv: str) -> str:
    """resourceVersions are opaque, but etcd's are integers: the newer of the two (`known` when `rv` is none)."""
    if not rv:
        return known
    try:
        if known and int(rv) <= int(known):
            return known
    except ValueError:
        pass
    return rv
