"""What a Harness call raises that is not our bug: the Harness's error answer, no answer, a foreign answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jr2_actors.values.errors import Jr2Error


class HarnessError(Jr2Error):
    """The Harness answered, and not with 2xx: its status and its own error text."""

    def __init__(self, status: int, error: str, *, slot: str | None = None, body: Mapping[str, Any] | None = None):
        self.status = status
        self.error = error
        self.slot = slot
        self.body = dict(body or {})
        super().__init__(f"Harness answered {status}: {error}" + (f" (slot {slot})" if slot else ""))


class ConversationNotKept(HarnessError):
    """404 with `kept: false`: the Harness holds no such conversation and seated none (ADR-0062)."""


class HarnessUnreachable(Jr2Error):
    """No answer: `reached` says whether the request may have arrived (then it was not re-sent)."""

    def __init__(self, detail: str, *, reached: bool) -> None:
        self.reached = reached
        super().__init__(detail)


class HarnessProtocolError(Jr2Error):
    """An answer that is not what the contract says (not JSON, a wrong shape, too large, a foreign URL)."""


# Everything a Harness call can raise that is not our bug.
HARNESS_ERRORS = (HarnessError, HarnessUnreachable, HarnessProtocolError)
