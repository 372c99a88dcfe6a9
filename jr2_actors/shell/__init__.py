"""What every actor shell shares: the actor base, its mailbox and metrics, the timers, the clock, the log
context. A shell imports from here; a core never does (tests/test_layout.py).

The names load on first use (PEP 562): `shell.logs`, which every command installs, comes without pykka and
prometheus_client, so a client command starts without them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jr2_actors.shell.actor import ActorFault, Shell, jitter_source
    from jr2_actors.shell.recipient import Recipient, tell_quietly
    from jr2_actors.shell.timers import Deadline, Timers

__all__ = ["ActorFault", "Deadline", "Recipient", "Shell", "Timers", "jitter_source", "tell_quietly"]
_HOME = {"ActorFault": "actor", "Shell": "actor", "jitter_source": "actor", "Recipient": "recipient",
         "tell_quietly": "recipient", "Deadline": "timers", "Timers": "timers"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
