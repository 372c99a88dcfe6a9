"""Messages every fake actor understands, and the one error a fake model raises for its callers to tell apart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Run:
    """Run `fn` on the actor's model inside the actor (the API server's store, the operator's or the
    Harness's core): how in-process callers — `FakeCluster`, tests, users — reach a model without a lock.
    An ask answers `fn`'s result; a tell is how one fake actor writes to another without waiting."""

    fn: Callable[[Any], Any]


@dataclass(frozen=True)
class SandboxChanged:
    """A Sandbox change the API server's in-process watcher feeds a fake actor (`operator/actor.py`'s
    `subscribe`): the frame's type and object."""

    type: str
    object: dict[str, Any]


@dataclass(frozen=True)
class Subscribed:
    """The watcher feeding a fake actor its Sandbox changes is `watcher`: what ends it."""

    watcher: int


class NoSuchSandbox(KeyError):
    """A scripted fault names a Sandbox the operator does not hold (never made, or deleted already)."""
