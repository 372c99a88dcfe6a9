"""A Turn's admission as an Agent seat sends it to the Harness, for the seat's tests."""

from __future__ import annotations

from typing import Any

NAME = "ws-turn-f-1-abc123"  # the Sandbox whose Harness the seat's Turns go to


def body(allowed: tuple[str, ...] = ("finish",), **extra: Any) -> dict[str, Any]:
    return {"definition": {"agent": "coder", "instructions": "You fix bugs.", "access": "write", "menu": ["finish"]},
            "message": "Fix it.", "allowed": list(allowed), **extra}
