"""The store's disk refusing writes on a switch, for the simulation and the tests: the store's real write path
meets sqlite's real refusal (a read-only connection), where a chmod would not stop root."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class StoreSwitch:
    """The store's disk refusing writes on a switch: while `refuse` (or `frozen`) is set, each `RunStore` write
    runs on a connection made read-only (`PRAGMA query_only`), so sqlite refuses it as it refuses a full disk
    or a read-only `state.db` — the store's real write path meets the real refusal (a chmod does not stop
    root). `freeze()` is how a crash is played: no write after it lands, and it returns once none is in
    flight, so a copy of the file taken then is what a SIGKILL would leave — and, since a run does nothing
    before its row is written (ADR-0065), the world holds no side effect of a step the copy does not know."""

    NAMES = ("persist_many", "settle", "probe_write", "can_write", "withdraw")  # every write of the store

    def __init__(self) -> None:
        self.refuse = threading.Event()
        self.frozen = threading.Event()
        self._saved: dict[str, Any] = {}
        self._idle = threading.Condition()
        self._inflight = 0

    def freeze(self, timeout: float = 10.0) -> None:
        self.frozen.set()
        with self._idle:
            self._idle.wait_for(lambda: self._inflight == 0, timeout)

    def install(self, put: Callable[[str, Any], None]) -> None:
        """Put each guarded write in place with `put(name, method)` (a test's monkeypatch undoes its own)."""
        from jr2_actors.store.rows import RunStore

        switch = self
        for name in self.NAMES:
            method = getattr(RunStore, name)

            def guarded(store: Any, *args: Any, _method: Any = method, **kwargs: Any) -> Any:
                with switch._idle:
                    switch._inflight += 1
                try:
                    refused = switch.refuse.is_set() or switch.frozen.is_set()
                    store.db.execute_sql(f"PRAGMA query_only = {1 if refused else 0}")
                    return _method(store, *args, **kwargs)
                finally:
                    with switch._idle:
                        switch._inflight -= 1
                        switch._idle.notify_all()

            put(name, guarded)

    def __enter__(self) -> StoreSwitch:
        from jr2_actors.store.rows import RunStore

        self._saved = {name: getattr(RunStore, name) for name in self.NAMES}
        self.install(lambda name, method: setattr(RunStore, name, method))
        return self

    def __exit__(self, *exc: object) -> None:
        from jr2_actors.store.rows import RunStore

        for name, method in self._saved.items():
            setattr(RunStore, name, method)
