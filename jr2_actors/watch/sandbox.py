"""A typed view of a Sandbox's status, as the jr2 operator publishes it (CONTRACTS.md §1).

The status is read leniently: a field of the wrong shape reads as absent, never as a crash, because
the object comes from outside. Bookmarks never pass through here (their object is only a version).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TERMINAL_PHASES = frozenset({"Lost"})


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class LastEnd:
    """How the Harness container last ended (`status.harness.lastTerminated`): not the watch's termination."""

    reason: str
    exit_code: int | None
    message: str
    finished_at: str


@dataclass(frozen=True)
class ContainerWaiting:
    """A container kept from running (`status.waiting[]`, e.g. CrashLoopBackOff): not a Workspace's wait."""

    container: str
    reason: str
    message: str


@dataclass(frozen=True)
class SandboxView:
    name: str
    uid: str
    resource_version: str
    phase: str
    endpoint: str
    pod_uid: str
    node: str
    restart_count: int
    last_terminated: LastEnd | None
    waiting: tuple[ContainerWaiting, ...]
    conditions: tuple[Condition, ...]

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    @property
    def scheduling_reason(self) -> str:
        c = self.condition("Scheduled")
        return c.reason if c else ""

    @property
    def waiting_reason(self) -> str:
        return ",".join(w.reason for w in self.waiting if w.reason)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def signature(self) -> tuple[str, str, str, str]:
        """What makes two observations the same transition (dagr T107's fix: not phase alone)."""
        return (self.resource_version, self.phase, self.scheduling_reason, self.waiting_reason)


def view(obj: Mapping[str, Any]) -> SandboxView:
    meta = _map(obj.get("metadata"))
    status = _map(obj.get("status"))
    harness = _map(status.get("harness"))
    last = _map(harness.get("lastTerminated"))
    return SandboxView(
        name=_str(meta.get("name")),
        uid=_str(meta.get("uid")),
        resource_version=_str(meta.get("resourceVersion")),
        phase=_str(status.get("phase")),
        endpoint=_str(status.get("endpoint")),
        pod_uid=_str(status.get("podUID")),
        node=_str(status.get("node")),
        restart_count=_int(harness.get("restartCount")) or 0,
        last_terminated=LastEnd(_str(last.get("reason")), _int(last.get("exitCode")), _str(last.get("message")),
                                   _str(last.get("finishedAt"))) if last else None,
        waiting=tuple(ContainerWaiting(_str(w.get("container")), _str(w.get("reason")), _str(w.get("message")))
                      for w in _maps(status.get("waiting"))),
        conditions=tuple(Condition(_str(c.get("type")), _str(c.get("status")), _str(c.get("reason")),
                                   _str(c.get("message"))) for c in _maps(status.get("conditions"))),
    )


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _maps(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
