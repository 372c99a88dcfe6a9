"""RFC 3339 timestamps as the cluster and the Harness write them, in one place."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(wall: float) -> str:
    """Seconds, UTC (`creationTimestamp`, `lastTransitionTime`)."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_ms(wall: float) -> str:
    """Milliseconds, UTC (the Lease's `jr2.dev/keepalive`, a kill's `at`)."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_rfc3339(value: object) -> float | None:
    """Seconds since the epoch, or None for anything that is not an RFC 3339 date-time."""
    if not isinstance(value, str) or "T" not in value or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
