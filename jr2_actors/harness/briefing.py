"""The Briefing: the Harness's words to the model (ADR-0062). No Briefing wording lives anywhere else."""

from __future__ import annotations

from collections.abc import Sequence


def not_allowed(pick: str, allowed: Sequence[str]) -> str:
    """The answer to a pick the Turn does not allow: it changes nothing, and says what is allowed."""
    listed = ", ".join(allowed) or "nothing"
    return f"{pick} is not allowed now. Allowed now: {listed}."
