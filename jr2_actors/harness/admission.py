"""What an admission says, as a value (CONTRACTS.md §3): the Agent's definition, the message, the Allowed picks,
where it works, the notices it carries and whether its conversation is kept. Pure.

The run builds it (`run/admission.py`), the seat carries it, and the Harness client serializes it
(`harness/client.py`, `admission_body`): nothing between them reads a body as an untyped mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# A pick on the Menu: its name, or `{"pick", "briefing"}` for a pick with a briefing (ADR-0062).
MenuItem = str | Mapping[str, str]


@dataclass(frozen=True)
class Notice:
    """A typed notice as the admission body carries it (CONTRACTS.md §3); the Harness words it."""

    kind: str  # memory-limit | conversation-new | pick-answer
    fields: Mapping[str, Any] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        return {"kind": self.kind, **{k: v for k, v in self.fields.items() if v is not None}}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Notice) and self.wire() == other.wire()

    def __hash__(self) -> int:
        return hash(repr(sorted(self.wire().items())))


@dataclass(frozen=True)
class Definition:
    """The Agent the admission is for: its name, instructions, access and Menu."""

    agent: str
    instructions: str
    access: str
    menu: tuple[MenuItem, ...] = ()


@dataclass(frozen=True)
class Admission:
    """One admission of a Turn: `cwd`, `notices` and `kept` are sent only when said."""

    definition: Definition = field(repr=False)
    message: str = field(repr=False)
    allowed: tuple[str, ...] = ()
    cwd: str | None = None
    notices: tuple[Notice, ...] = ()
    kept: bool = False  # the Harness holds the conversation: a 409 is "not yet"
