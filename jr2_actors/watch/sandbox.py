"""A typed view of a Sandbox's status, as the jr2 operator publishes it (CONTRACTS.md §1).

The status is read leniently: a field of the wrong shape reads as absent, never as a crash, because
the object comes from outside. Bookmarks never pass through here (their object is only a version).

`view` reads every field, for a frame that is delivered (`watch/signature.py` reads the few that decide
whether it is). Named tuples, not frozen dataclasses: as immutable, built in a fraction of the time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from jr2_actors.values.metadata import text
from jr2_actors.watch.signature import Signature

TERMINAL_PHASES = frozenset({"Lost"})


class Condition(NamedTuple):
    type: str
    status: str
    reason: str
    message: str


class LastEnd(NamedTuple):
    """How the Harness container last ended (`status.harness.lastTerminated`): not the watch's termination."""

    reason: str
    exit_code: int | None
    message: str
    finished_at: str


class ContainerWaiting(NamedTuple):
    """A container kept from running (`status.waiting[]`, e.g. CrashLoopBackOff): not a Workspace's wait."""

    container: str
    reason: str
    message: str


class SandboxView(NamedTuple):
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
    # Read with the rest by `view` (once an event, not a scan of the conditions per reader).
    scheduling_reason: str = ""  # the `Scheduled` condition's reason
    waiting_reason: str = ""  # the containers' waiting reasons, comma-joined

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def signature(self) -> Signature:
        """What makes two observations the same transition (dagr T107's fix: not phase alone)."""
        return (self.resource_version, self.phase, self.scheduling_reason, self.waiting_reason)


def view(obj: Mapping[str, Any]) -> SandboxView:
    """The typed view, every field read once from the decoded object. Read for every delivery, so the
    lenient reads of its own fields are inline (a string, else "") rather than a call per field."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else _EMPTY
    status = obj.get("status")
    status = status if isinstance(status, dict) else _EMPTY
    harness = status.get("harness")
    harness = harness if isinstance(harness, dict) else _EMPTY
    last = harness.get("lastTerminated")
    waiting: tuple[ContainerWaiting, ...] = ()
    conditions: tuple[Condition, ...] = ()
    if "waiting" in status:
        waiting = tuple(ContainerWaiting(text(w.get("container")), text(w.get("reason")), text(w.get("message")))
                        for w in _maps(status.get("waiting")))
    if "conditions" in status:
        conditions = tuple(Condition(text(c.get("type")), text(c.get("status")), text(c.get("reason")),
                                     text(c.get("message"))) for c in _maps(status.get("conditions")))
    name, uid, rv = meta.get("name"), meta.get("uid"), meta.get("resourceVersion")
    phase, endpoint = status.get("phase"), status.get("endpoint")
    pod_uid, node = status.get("podUID"), status.get("node")
    return SandboxView(
        name if isinstance(name, str) else "",
        uid if isinstance(uid, str) else "",
        rv if isinstance(rv, str) else "",
        phase if isinstance(phase, str) else "",
        endpoint if isinstance(endpoint, str) else "",
        pod_uid if isinstance(pod_uid, str) else "",
        node if isinstance(node, str) else "",
        (_int(harness.get("restartCount")) or 0) if harness else 0,
        LastEnd(text(last.get("reason")), _int(last.get("exitCode")), text(last.get("message")),
                text(last.get("finishedAt"))) if isinstance(last, dict) and last else None,
        waiting,
        conditions,
        next((c.reason for c in conditions if c.type == "Scheduled"), "") if conditions else "",
        ",".join(w.reason for w in waiting if w.reason) if waiting else "",
    )


_EMPTY: Mapping[str, Any] = {}


def _maps(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
