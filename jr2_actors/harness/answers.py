"""What a Harness's answers hold, read as untrusted input: an admission's, a stream read's, and the small
fields the client acts on (the process's boot id, a 429's `Retry-After`). Pure values (CONTRACTS.md §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_BOOT_ID = 128  # a Harness's boot id is its text: longer, or not a string, is "not said"
RETRY_AFTER_MAX_SECONDS = 30.0  # a 429's Retry-After is honoured up to this; longer waits this long


@dataclass(frozen=True)
class AdmissionAnswer:
    """The Harness's answer to an admission: where to read its Submission's updates, from where."""

    stream_url: str
    offset: str
    submission_id: str
    # The process that accepted it (ours, CONTRACTS §3 addition): a restart is judged against it. "" when the
    # Harness does not say.
    boot_id: str = ""


@dataclass(frozen=True)
class Updates:
    events: list[dict[str, Any]] = field(repr=False)
    next_offset: str
    up_to_date: bool


def boot_id_of(doc: object) -> str:
    """A Harness answer's `bootId`: a non-empty string of at most `MAX_BOOT_ID` characters, else ""."""
    boot = doc.get("bootId") if isinstance(doc, dict) else None
    return boot if isinstance(boot, str) and 0 < len(boot) <= MAX_BOOT_ID else ""


def retry_after(header: str | None, fallback: float) -> float:
    """A 429's `Retry-After` in seconds (the delta form), bounded; a date, junk or nothing: `fallback`."""
    try:
        seconds = float((header or "").strip())
    except ValueError:
        return fallback
    if not 0 <= seconds < float("inf"):
        return fallback
    return min(seconds, RETRY_AFTER_MAX_SECONDS)
