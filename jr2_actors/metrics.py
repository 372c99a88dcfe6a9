"""Actor mailbox metrics in the Prometheus text format: how the pod is observed (DESIGN.md).

A mailbox's depth is the number of messages waiting in an actor's inbox (pykka's `actor_inbox`, an
unbounded `queue.Queue`): a deep one is an actor falling behind. Depths are summed and maxed per actor
class, so a thousand WorkspaceActors make two series, not two thousand.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pykka


@dataclass(frozen=True)
class MailboxSample:
    actor: str
    actors: int
    depth_total: int
    depth_max: int


def mailbox_samples(refs: Iterable[pykka.ActorRef[Any]] | None = None) -> list[MailboxSample]:
    groups: dict[str, list[int]] = {}
    for ref in pykka.ActorRegistry.get_all() if refs is None else refs:
        if not ref.is_alive():
            continue
        depth = cast(queue.Queue[Any], ref.actor_inbox).qsize()
        groups.setdefault(ref.actor_class.__name__, []).append(depth)
    return [MailboxSample(name, len(d), sum(d), max(d)) for name, d in sorted(groups.items())]


def render(samples: Iterable[MailboxSample], gauges: Mapping[str, tuple[str, float]] | None = None) -> str:
    """Prometheus text exposition. `gauges` adds plain gauges: name → (help, value)."""
    samples = list(samples)
    lines: list[str] = []

    def family(name: str, help_text: str, rows: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{labels} {_number(value)}" for labels, value in rows)

    family("jr2_actor_mailbox_depth", "Messages waiting in the inboxes of the actors of a class.",
           [(_labels(actor=s.actor), s.depth_total) for s in samples])
    family("jr2_actor_mailbox_depth_max", "The deepest single inbox among the actors of a class.",
           [(_labels(actor=s.actor), s.depth_max) for s in samples])
    family("jr2_actors", "Live actors of a class.", [(_labels(actor=s.actor), s.actors) for s in samples])
    for name, (help_text, value) in sorted((gauges or {}).items()):
        family(name, help_text, [("", value)])
    return "\n".join(lines) + "\n"


def _labels(**labels: str) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
