"""What a test or a bench reads of a process it started (Linux's /proc): its children, and whether it ended."""

from __future__ import annotations


def children(pid: int) -> list[int]:
    """The processes `pid` started and has not lost (empty when it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def ended(pid: int) -> bool:
    """No such process, or a zombie: ended and not yet reaped (an orphan's reaper is not the caller)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
