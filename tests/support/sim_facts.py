"""What the simulation's invariants read, made by hand: one drawn run (seed 11) and the facts of its ending,
for the tests that show each invariant catching what it names."""

from __future__ import annotations

from typing import Any

from jr2_actors.harness import briefing
from jr2_actors.sim.invariants import Facts
from jr2_actors.sim.schedule import draw
from jr2_actors.watch.identity import sandbox_name

PLAN = draw(11).runs[0]
RUN = PLAN.run_id
NAME = sandbox_name(RUN, "W")


def facts(**over: Any) -> Facts:
    base: dict[str, Any] = {"runs": {RUN: PLAN}, "statuses": {RUN: "done"}, "cancelled": set(), "admissions": [],
                            "kills": [], "sandboxes": [], "follower_lines": {}, "follower_problems": [],
                            "stored_feeds": {}, "nudge_text": briefing.NUDGE}
    base.update(over)
    return Facts(**base)


def admission(seq: int, *peaks: str, message: str = "Work.", sandbox: str = NAME) -> dict[str, Any]:
    notices_ = [{"kind": "memory-limit", "scope": "workspace", "peak": p, "limit": "2Gi"} for p in peaks]
    return {"sandbox": sandbox, "agent": "a0", "submissionId": f"s-{seq}",
            "body": {"message": message, "notices": notices_}}
