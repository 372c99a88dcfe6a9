"""A store that cannot write, on a switch: while it is on, every `RunStore` write — a persist, the move to
the history, the health probe, the write-lock check — runs on a connection made read-only (`PRAGMA
query_only`), so sqlite refuses it as it refuses a read-only `state.db` ("attempt to write a readonly
database"). Tests run as root, for whom a chmod does not stop sqlite; this is the real refusal on the
store's real write path instead."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from jr2_actors.store.rows import RunStore


def unwritable(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Patch `RunStore`'s writes for the test; set the returned event to make the disk refuse them."""
    refuse = threading.Event()

    def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
        def write(self: RunStore, *args: Any, **kwargs: Any) -> Any:
            query_only = 1 if refuse.is_set() else 0
            self.db.execute_sql(f"PRAGMA query_only = {query_only}")  # type: ignore[no-untyped-call]
            return method(self, *args, **kwargs)

        return write

    for name in ("persist_many", "settle", "probe_write", "can_write"):
        monkeypatch.setattr(RunStore, name, guarded(getattr(RunStore, name)))
    return refuse
