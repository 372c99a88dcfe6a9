"""Messages every fake actor understands, and the one error a fake model raises for its callers to tell apart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Run:
    """Run `fn` on the actor's model inside the actor (the API server's store, the operator's or the
    Harness's core): how in-process callers — `FakeCluster`, tests, users — reach a model without a lock.
    An ask answers `fn`'s result; a tell is how one fake actor writes to another without waiting.
    `wakes`: on the Harness, a lever may change what a stream holds, so its every long-poll looks again; a
    read (`wakes=False`) changes nothing and wakes none (a real Harness wakes a long-poll for its own stream
    only: a reader polling the fake's records woke 5,000 seats' long-polls at once, each time it read)."""

    fn: Callable[[Any], Any]
    wakes: bool = True


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
