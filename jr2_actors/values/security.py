"""Secrets handling shared by every part: comparisons that leak no timing."""

from __future__ import annotations

import hmac


def constant_time_equal(a: str, b: str) -> bool:
    """Compare two secrets in time that depends on their length only, never on where they differ."""
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))
