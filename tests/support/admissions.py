"""A Turn's admission as an Agent seat sends it to the Harness, for the tests: the one place they are built."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jr2_actors.harness.admission import Admission, Definition, MenuItem, Notice
from jr2_actors.harness.client import admission_body

NAME = "ws-turn-f-1-abc123"  # the Sandbox whose Harness the seat's Turns go to


def notice(doc: Notice | Mapping[str, Any]) -> Notice:
    """A notice as the tests write it (its wire form, `{"kind": …, …}`), as the admission carries it."""
    if isinstance(doc, Notice):
        return doc
    return Notice(str(doc["kind"]), {k: v for k, v in doc.items() if k != "kind"})


def admission(allowed: Iterable[str] = ("finish",), *, agent: str = "coder", message: str = "Fix it.",
              instructions: str = "You fix bugs.", access: str = "write", menu: Iterable[MenuItem] = ("finish",),
              cwd: str | None = None, notices: Iterable[Notice | Mapping[str, Any]] = (),
              kept: bool = False) -> Admission:
    return Admission(Definition(agent, instructions, access, tuple(menu)), message, tuple(allowed), cwd,
                     tuple(notice(n) for n in notices), kept)


def body(allowed: Iterable[str] = ("finish",), **extra: Any) -> dict[str, Any]:
    """`admission(…)` as its JSON body: what a Harness is posted."""
    return admission_body(admission(allowed, **extra))
