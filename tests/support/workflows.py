"""Workflow documents the run tests share."""

from __future__ import annotations

from typing import Any


def one_state(name: str, after: float | None = None) -> str:
    """One Workspace, one worker, one Turn that finishes the run: the smallest run that places, attaches
    and releases. `after`: the Turn's state gives up after that many seconds, to a final `failed`."""
    if after is not None:
        return one_state(name).replace(
            "    on: {finish: done}\n", f"    on: {{finish: done}}\n    after: {{seconds: {after:g}, to: late}}\n"
        ) + "  late: {final: failed}\n"
    return f"""
name: {name}
workspaces:
  W: {{size: {{cpu: "1", memory: "1Gi"}}}}
agents:
  worker: {{instructions: "You work.", workspace: W, access: write}}
start: work
states:
  work:
    holds: [W]
    turn: {{agent: worker, prompt: "Work."}}
    on: {{finish: done}}
  done: {{final: done}}
"""


def chain(states: int, prompt: str = "Go on.") -> dict[str, Any]:
    """A workflow of `states` states, each a Turn that picks its way to the next; the last is final."""
    doc: dict[str, Any] = {
        "name": "chain", "start": "s0",
        "workspaces": {"W": {"size": {"cpu": "1", "memory": "1Gi"}}},
        "agents": {"worker": {"instructions": "You work.", "workspace": "W", "access": "write"}},
        "states": {},
    }
    for i in range(states - 1):
        doc["states"][f"s{i}"] = {"holds": ["W"], "turn": {"agent": "worker", "prompt": prompt},
                                  "on": {"next": f"s{i + 1}"}}
    doc["states"][f"s{states - 1}"] = {"final": "done"}
    return doc
