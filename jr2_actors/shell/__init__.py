"""What every actor shell shares: the actor base, its mailbox and metrics, the timers, the clock, the log
context. A shell imports from here; a core never does (tests/test_layout.py)."""

from jr2_actors.shell.actor import ActorFault, Shell, jitter_source
from jr2_actors.shell.recipient import Recipient, tell_quietly
from jr2_actors.shell.timers import Deadline, Timers

__all__ = ["ActorFault", "Deadline", "Recipient", "Shell", "Timers", "jitter_source", "tell_quietly"]
