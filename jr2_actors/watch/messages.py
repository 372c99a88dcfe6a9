"""What the WatchActor is told and answers: a Workspace's registration, its end, reports and health.
The deliveries themselves (`SandboxSeen`, `SandboxGone`, `WatchFailed`) are `watch/deliveries.py`'s."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from jr2_actors.shell.recipient import Recipient
from jr2_actors.watch import core
from jr2_actors.watch.identity import SandboxKey


@dataclass(frozen=True)
class Register:
    key: SandboxKey
    recipient: Recipient = field(compare=False)
    restored: bool = False


@dataclass(frozen=True)
class Unregister:
    """Stop routing `key` to `recipient`; ignored when another recipient holds the key now."""

    key: SandboxKey
    recipient: Recipient = field(compare=False)


class OwnStamps:
    """The Lease stamps (`jr2.dev/keepalive` values) the process's renewal lane is writing, by Sandbox key:
    the watch reads them, so the change that only carries a Workspace's own renewal — whose PATCH answer
    the lane already has — is not delivered back to it, and no message per renewal is needed (see
    `watch/deliveries.py`). Noted before the write leaves, so the watch knows it before the event. The lane
    writes under a lock; the watch's read is one dict lookup, atomic."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stamps: dict[SandboxKey, str] = {}

    def get(self, key: SandboxKey) -> str | None:
        return self._stamps.get(key)

    def note(self, key: SandboxKey, stamp: str) -> None:
        with self._lock:
            self._stamps[key] = stamp

    def forget(self, key: SandboxKey, stamp: str) -> None:
        """Forget `key`'s stamp if it is still `stamp` (a successor under the same key may have noted its own)."""
        with self._lock:
            if self._stamps.get(key) == stamp:
                del self._stamps[key]

    def __len__(self) -> int:
        return len(self._stamps)


@dataclass(frozen=True, slots=True)
class RunEnded:
    """A run is over for good (it finished, or a revival gave it up): no waiter comes back for its Sandboxes'
    keys, so the watch keeps none of their deliveries for one that might (a run's ends would otherwise stay
    cached up to `KEEP_LATEST` keys: memory that grows with the runs finished)."""

    run_id: str


@dataclass(frozen=True)
class WatchClosed:
    """The WatchActor stopped: no more deliveries for this key."""

    key: SandboxKey


@dataclass(frozen=True)
class WatchReport:
    """A termination handled, a foreign Sandbox, an unusable frame: for whoever operates the pod."""

    report: core.Report


@dataclass(frozen=True)
class Health:
    """Ask: how the watch stands, for metrics and a liveness probe."""


@dataclass(frozen=True)
class WatchHealth:
    phase: str  # idle | listing | watching | waiting | stopped
    up: bool  # False while degraded (past the failure bound, still re-listing) or stopped
    resource_version: str | None
    failures: int
    waiters: int
    tracked: int = 0  # objects followed now
    listed: bool = False  # a list has answered since start (readiness waits for it)
    last_error: str | None = None  # The newest failure's cause, whole
    failing_for: float | None = None  # seconds since the current run of failures began; None: it serves
