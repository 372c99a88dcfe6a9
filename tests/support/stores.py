"""A store that cannot write, on a switch: while it is on, every `RunStore` write — a persist, the move to
the history, the health probe, the write-lock check — runs on a connection made read-only (`PRAGMA
query_only`), so sqlite refuses it as it refuses a read-only `state.db` ("attempt to write a readonly
database"). Tests run as root, for whom a chmod does not stop sqlite; this is the real refusal on the
store's real write path instead."""

from __future__ import annotations

import threading

import pytest

from jr2_actors.sim.store_switch import StoreSwitch
from jr2_actors.store.rows import RunStore


def unwritable(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Patch `RunStore`'s writes for the test; set the returned event to make the disk refuse them."""
    switch = StoreSwitch()
    switch.install(lambda name, method: monkeypatch.setattr(RunStore, name, method))
    return switch.refuse
