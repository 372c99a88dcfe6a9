"""WorkspaceCore driven on a virtual clock: the Sandbox views and the `Drive` its tests share."""
from __future__ import annotations

import random
from typing import Any

from jr2_actors.watch.deliveries import SandboxSeen
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.watch.sandbox import view
from jr2_actors.workspace.core import WorkspaceCore
from jr2_actors.workspace.messages import (
    Applied,
    Begin,
    WorkspaceTick,
)
from tests.support.sandboxes import fixture

WALL0 = 1_790_000_000.0
KEY = SandboxKey("run-1", "F-1")
UID = "uid-1"
SECRET = "ws-run-1-f-1-000000000000-token"


def seen(phase: str = "Pending", scheduled: tuple[str, str, str] | None = None, ready: bool = False,
         waiting: tuple[str, str] | None = None, restarts: int = 0, last: dict[str, Any] | None = None,
         lost: tuple[str, str] | None = None, uid: str = UID, endpoint: str = "http://h") -> SandboxSeen:
    conditions = []
    if scheduled:
        conditions.append({"type": "Scheduled", "status": scheduled[0], "reason": scheduled[1],
                           "message": scheduled[2]})
    conditions.append({"type": "Ready", "status": "True" if ready else "False", "reason": "PodReady" if ready else "x",
                       "message": ""})
    if lost:
        conditions.append({"type": "Lost", "status": "True", "reason": lost[0], "message": lost[1]})
    st: dict[str, Any] = {"phase": phase, "conditions": conditions, "harness": {"restartCount": restarts},
                          "endpoint": endpoint}
    if last:
        st["harness"]["lastTerminated"] = last
    if waiting:
        st["waiting"] = [{"container": "harness", "reason": waiting[0], "message": waiting[1]}]
    obj = {"metadata": {"name": "ws", "uid": uid}, "status": st}
    return SandboxSeen(KEY, view(obj), obj)


def recorded(name: str, uid: str = UID) -> SandboxSeen:
    obj = fixture(name)
    obj["metadata"]["uid"] = uid
    return SandboxSeen(KEY, view(obj), obj)


UNSCHEDULABLE = seen(scheduled=("False", "Unschedulable", "0/3 nodes are available: 3 Insufficient memory."))
QUOTA = seen(scheduled=("False", "QuotaExceeded", 'pods "ws" is forbidden: exceeded quota: jr2'))
PENDING = seen(scheduled=("Unknown", "SchedulingPending", ""))
SCHEDULED = seen(scheduled=("True", "Scheduled", ""))
READY = seen("Ready", scheduled=("True", "Scheduled", ""), ready=True)


class Drive:
    def __init__(self, **kw: Any) -> None:
        kw.setdefault("secret_name", SECRET)
        self.core = WorkspaceCore("F-1", rng=random.Random(5), **kw)
        self.now = 0.0
        self.out: list[Any] = []

    def __call__(self, event: Any, at: float | None = None) -> Any:
        if at is not None:
            self.now = at
        step = self.core.step(event, self.now, WALL0 + self.now)
        self.out.extend(step.actions)
        self.out.extend(step.reports)
        return step

    def deadline(self) -> float | None:
        return self.core.deadline

    @property
    def state(self) -> str:
        """The core's state, read afresh (mypy would otherwise narrow it across steps)."""
        return str(self.core.phase)

    def of(self, kind: type) -> list[Any]:
        return [x for x in self.out if isinstance(x, kind)]

    def written(self, at: float = 0.0) -> None:
        """Begin, and the first write's answer."""
        self(Begin(), at=at)
        self(Applied(UID), at=at)

    def until(self, at: float) -> None:
        """Run every timer due up to `at` (as the shell's Deadline would)."""
        while (deadline := self.core.deadline) is not None and deadline <= at:
            self(WorkspaceTick(), at=max(deadline, self.now))
        self.now = at


