"""What both HTTP clients (Kubernetes, Harness) need of requests' errors and bodies."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime

import requests


def caused_by(e: BaseException, *classes: type[BaseException]) -> bool:
    """Is one of `classes` anywhere in `e`'s chain? requests wraps urllib3's errors in args and `reason`,
    not only in `__cause__` — a stream's read timeout arrives as a ConnectionError holding a ReadTimeoutError."""
    seen: set[int] = set()
    stack: list[object] = [e]
    while stack:
        cur = stack.pop()
        if not isinstance(cur, BaseException) or id(cur) in seen:
            continue
        if isinstance(cur, classes):
            return True
        seen.add(id(cur))
        stack.extend([cur.__cause__, cur.__context__, *cur.args, getattr(cur, "reason", None)])
    return False


class TooLarge(Exception):
    def __init__(self, cap: int) -> None:
        super().__init__(f"over {cap} bytes")
        self.cap = cap


def read_capped(resp: requests.Response, cap: int, *, truncate: bool = False) -> bytes:
    """The body, never more than `cap` bytes held: over it raises `TooLarge` (or, with `truncate`, stops
    there). Always closes the response; requests' own errors pass through for the caller to name."""
    chunks: list[bytes] = []
    total = 0
    try:
        for chunk in resp.iter_content(64 * 1024):
            total += len(chunk)
            if total > cap:
                if truncate:
                    chunks.append(chunk[: cap - (total - len(chunk))])
                    break
                raise TooLarge(cap)
            chunks.append(chunk)
    finally:
        resp.close()
    return b"".join(chunks)


def retry_after(value: str | None, date: str | None, *, cap: float = 3600.0) -> float | None:
    """Seconds a `Retry-After` asks for (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date counted from the
    answer's own `Date` (the server's clock against itself: no skew), else from now. A date gone by is 0;
    anything else, negative or over `cap`, is None: the caller's own backoff applies."""
    if not value:
        return None
    try:
        seconds: float | None = float(value)
    except ValueError:
        delay = _date_delay(value, date)
        seconds = None if delay is None else max(delay, 0.0)
    return seconds if seconds is not None and 0 <= seconds <= cap else None


def _date_delay(value: str, date: str | None) -> float | None:
    try:
        at = email.utils.parsedate_to_datetime(value)
        base = email.utils.parsedate_to_datetime(date) if date else datetime.now(UTC)
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None or base.tzinfo is None:  # RFC 9110: an HTTP-date is GMT; one without a zone is not
        return None
    return (at - base).total_seconds()
