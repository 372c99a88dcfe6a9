"""Issue 19 item 6: each wait carries a token beside the scheduler's words (ADR-0064 keeps the words whole),
and `status` says when no current node can take the Sandbox."""

from __future__ import annotations

import pytest

from jr2_actors.run.render import waiting_line
from jr2_actors.run.wire import WAIT_REASONS, wait_reason


@pytest.mark.parametrize(("on", "message", "reason"), [
    ("node", "0/3 nodes are available: 3 Insufficient cpu.", "capacity"),
    ("node", "0/3 nodes are available: 1 Insufficient memory, 2 node(s) had untolerated taint "
             "{gpu: true}. preemption: 0/3 nodes are available: 3 No preemption victims found.", "capacity"),
    ("node", "0/2 nodes are available: 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }.",
     "taint"),
    ("node", "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.", "selector"),
    ("quota", 'pods "s-1" is forbidden: exceeded quota: jr2, requested: cpu=1, used: cpu=2, limited: cpu=2',
     "quota"),
    ("node", "", "other"),
    ("node", "0/1 nodes are available: 1 node(s) had volume node affinity conflict.", "selector"),
])
def test_a_wait_is_classified_by_its_message(on: str, message: str, reason: str) -> None:
    assert wait_reason(on, message) == reason and reason in WAIT_REASONS


def test_status_says_when_no_current_node_can_take_it() -> None:
    entry = {"child": "F-1", "on": "node", "reason": "selector", "since": "2026-01-01T00:00:00.000Z",
             "message": "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."}
    line = waiting_line(entry, 1767225720.0)  # two minutes later
    assert line == ("F-1 waiting for a node: 0/4 nodes are available: 4 node(s) didn't match Pod's node "
                    "affinity/selector. (selector, since 2m00s); no current node can take it")
    capacity = waiting_line({**entry, "reason": "capacity"}, 1767225720.0)
    assert capacity.endswith("(capacity, since 2m00s)")
