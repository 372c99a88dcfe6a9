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


# A Turn that holds its Workspace, then 1.5 s more of holding after the pick: capacity another run waits for.
HOLD_THEN_LINGER = """
name: holder
workspaces:
  H: {size: {cpu: "1", memory: "1Gi"}}
agents:
  holder: {instructions: "You hold.", workspace: H, access: write}
start: work
states:
  work:
    holds: [H]
    turn: {agent: holder, prompt: "Hold."}
    on: {release: hold}
  hold:
    holds: [H]
    after: {seconds: 1.5, to: done}
  done: {final: done}
"""

# A Turn that holds its Workspace until it picks `release`.
HOLD_UNTIL_RELEASED = """
name: holder
workspaces:
  H: {size: {cpu: "1", memory: "1Gi"}}
agents:
  holder: {instructions: "You hold.", workspace: H, access: write}
start: work
states:
  work:
    holds: [H]
    turn: {agent: holder, prompt: "Hold."}
    on: {release: done}
  done: {final: done}
"""

# Two agents in one Workspace, with waits between their Turns that are Turns of a Menu-only agent (`triage`,
# on the Instance Harness): no Turn runs in F-1 while it waits, and a test ends a wait by scripting triage's pick.
NOTICES = """
name: notices
workspaces:
  F-1: {size: {cpu: "1", memory: "2Gi"}}
agents:
  triage: {instructions: "You wait.", access: none}
  coder: {instructions: "You fix.", workspace: F-1, access: write}
  reviewer: {instructions: "You review.", workspace: F-1, access: read}
start: code
states:
  code:
    holds: [F-1]
    turn: {agent: coder, prompt: "Fix it."}
    on: {finish: idle}
  idle:
    holds: [F-1]
    on: {go: review}
    turn: {agent: triage, prompt: "Wait."}
  review:
    holds: [F-1]
    turn: {agent: reviewer, prompt: "Review it."}
    on: {more: idle2, approve: done}
  idle2:
    holds: [F-1]
    turn: {agent: triage, prompt: "Wait again."}
    on: {go: last}
  last:
    holds: [F-1]
    turn: {agent: reviewer, prompt: "Look once more."}
    on: {approve: done}
  done: {final: done}
"""

# A coder's Turn, a minute's wait holding the Workspace, then a reviewer's Turn in it.
FIX_WAIT_REVIEW = """
name: fix
workspaces:
  F-1: {size: {cpu: "1", memory: "2Gi"}}
agents:
  coder: {instructions: "You fix.", workspace: F-1, access: write}
  reviewer: {instructions: "You review.", workspace: F-1, access: read}
start: code
states:
  code:
    holds: [F-1]
    turn: {agent: coder, prompt: "Fix it."}
    on: {finish: wait}
  wait:
    holds: [F-1]
    after: {seconds: 60, to: review}
  review:
    holds: [F-1]
    turn: {agent: reviewer, prompt: "Review it."}
    on: {approve: done}
  done: {final: done}
"""

# One coder's Turn that may pick itself again (`retry`).
FIX_OR_RETRY = """
name: fix
workspaces:
  F-1: {size: {cpu: "1", memory: "2Gi"}}
agents:
  coder: {instructions: "You fix.", workspace: F-1, access: write}
start: code
states:
  code:
    holds: [F-1]
    turn: {agent: coder, prompt: "Fix it."}
    on: {finish: done, retry: code}
  done: {final: done}
"""

# One Turn of a Menu-only agent: no Workspace, so it runs on the Instance Harness at once.
MENU_TURN: dict[str, Any] = {
    "name": "menu-turn",
    "agents": {"triage": {"instructions": "You route work.", "access": "none"}},
    "start": "route",
    "states": {"route": {"turn": {"agent": "triage", "prompt": "Route it."}, "on": {"routed": "done"}},
               "done": {"final": "done"}},
}

# A coder's Turn whose fault goes on to a second one (`agent.fault: again`), a Menu-only wait, a review.
RESTARTS = """
name: restarts
workspaces:
  F-1: {size: {cpu: "1", memory: "2Gi"}}
agents:
  triage: {instructions: "You wait.", access: none}
  coder: {instructions: "You fix.", workspace: F-1, access: write}
  reviewer: {instructions: "You review.", workspace: F-1, access: read}
start: code
states:
  code:
    holds: [F-1]
    turn: {agent: coder, prompt: "Fix it."}
    on: {finish: review, wait: idle, agent.fault: again}
  idle:
    holds: [F-1]
    turn: {agent: triage, prompt: "Wait."}
    on: {go: review}
  again:
    holds: [F-1]
    turn: {agent: coder, prompt: "Fix it again."}
    on: {finish: review}
  review:
    holds: [F-1]
    turn: {agent: reviewer, prompt: "Review it."}
    on: {approve: done}
  done: {final: done}
"""

# One Agent in two consecutive states: its seat carries the conversation across.
CODE_THEN_POLISH = """
name: code-code
workspaces:
  W: {size: {cpu: "1", memory: "1Gi"}}
agents:
  coder: {instructions: "You code.", workspace: W, access: write}
start: code
states:
  code:
    holds: [W]
    turn: {agent: coder, prompt: "Code."}
    on: {next: polish}
  polish:
    holds: [W]
    turn: {agent: coder, prompt: "Polish."}
    on: {finish: done}
  done: {final: done}
"""

# One state whose pick may enter it again: a new Turn of the same seat.
SELF_LOOP = """
name: self-loop
workspaces:
  W: {size: {cpu: "1", memory: "1Gi"}}
agents:
  coder: {instructions: "You code.", workspace: W, access: write}
start: code
states:
  code:
    holds: [W]
    turn: {agent: coder, prompt: "Code."}
    on: {retry: code, finish: done}
  done: {final: done}
"""

# One coder's Turn that finishes the run (`one_state` with its agent named `coder`).
ONE_CODER = """
name: one
workspaces:
  W: {size: {cpu: "1", memory: "1Gi"}}
agents:
  coder: {instructions: "You code.", workspace: W, access: write}
start: code
states:
  code:
    holds: [W]
    turn: {agent: coder, prompt: "Code."}
    on: {finish: done}
  done: {final: done}
"""

# Two states in two Workspaces, the second able to go back to the first.
TWO_WORKSPACES = """
name: two
workspaces:
  A: {size: {cpu: "1", memory: "1Gi"}}
  B: {size: {cpu: "1", memory: "1Gi"}}
agents:
  a: {instructions: "a", workspace: A, access: write}
  b: {instructions: "b", workspace: B, access: write}
start: first
states:
  first:
    holds: [A]
    turn: {agent: a, prompt: "one"}
    on: {next: second}
  second:
    holds: [B]
    turn: {agent: b, prompt: "two"}
    on: {back: first, finish: done}
  done: {final: done}
"""

# What the picks of BRIEFED tell the next Turn.
BRIEFING_NEXT = "Pass `summary`: one line on what you changed."
BRIEFING_FINISH = "Finish only once the tests pass."

# Two states whose picks carry a briefing (ADR-0062's Turn part): the next Turn is told the words.
BRIEFED = f"""
name: briefed
workspaces:
  W: {{size: {{cpu: "1", memory: "1Gi"}}}}
agents:
  coder: {{instructions: "You code.", workspace: W, access: write}}
start: code
states:
  code:
    holds: [W]
    turn: {{agent: coder, prompt: "Code."}}
    on:
      next: {{to: polish, briefing: "{BRIEFING_NEXT}"}}
      workspace.lost: {{to: failed}}
  polish:
    holds: [W]
    turn: {{agent: coder, prompt: "Polish."}}
    on: {{finish: {{to: done, briefing: "{BRIEFING_FINISH}"}}, stop: failed}}
  done: {{final: done}}
  failed: {{final: failed}}
"""

# The smallest run with a Turn: one tiny Workspace, one agent, one state to leave.
TINY_TURN = """
name: f
workspaces: {W: {size: {cpu: "100m", memory: "64Mi"}}}
agents: {a: {instructions: "i", workspace: W, access: write}}
start: s
states:
  s: {holds: [W], turn: {agent: a, prompt: "p"}, on: {go: d}}
  d: {final: done}
"""
