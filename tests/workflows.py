"""Workflow documents the run tests share."""

from __future__ import annotations


def one_state(name: str) -> str:
    """One Workspace, one worker, one Turn that finishes the run: the smallest run that places, attaches
    and releases."""
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
