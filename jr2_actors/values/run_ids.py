"""A run's id as the Orchestrator mints it: one source for the minting and for the clients that tell a whole
id from a prefix to resolve."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

RUN_ID_PREFIX = "r-"
_RUN_ID_BYTES = 6  # 48 random bits: the ids of a store's 7 days of runs never meet

FULL_RUN_ID = re.compile(re.escape(RUN_ID_PREFIX) + f"[0-9a-f]{{{2 * _RUN_ID_BYTES}}}")


def new_run_id() -> str:
    return f"{RUN_ID_PREFIX}{secrets.token_hex(_RUN_ID_BYTES)}"


@dataclass(frozen=True)
class Keyed:
    """What a run's first row keeps of the request that made it: its `Idempotency-Key` and its body's
    digest, so the same key sent again, even after a restart, answers that run (and another body with it
    is refused); the key goes with the row, at ADR-0065's week."""

    key: str
    digest: str
