"""What the WatchActor is told and answers: a Workspace's registration, its end, reports and health.
The deliveries themselves (`SandboxSeen`, `SandboxGone`, `WatchFailed`) are `watch/deliveries.py`'s."""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class OwnWrite:
    """A Workspace is about to renew its Lease with `stamp` (the `jr2.dev/keepalive` value it writes): the
    change that only carries that stamp is its own write, whose PATCH answer it already has, and is not
    delivered back to it. Told before the write, so the watch knows it before the event."""

    key: SandboxKey
    stamp: str


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
