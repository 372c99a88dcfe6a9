"""Anything that takes a tell, and a tell to an actor that may be gone."""

from __future__ import annotations

import logging
from typing import Any, Protocol

import pykka

log = logging.getLogger(__name__)


class Recipient(Protocol):
    """Anything that takes a tell: an actor's ref, or a test's inbox."""

    def tell(self, message: Any) -> None: ...


def tell_quietly(recipient: Recipient | None, message: object) -> bool:
    """Tell `recipient`, unless it is gone (a stop races every message): dropped, never raised. True when
    the message was handed over."""
    if recipient is None:
        return False
    try:
        recipient.tell(message)
    except pykka.ActorDeadError:
        log.debug("recipient gone before %s", type(message).__name__)
        return False
    return True
