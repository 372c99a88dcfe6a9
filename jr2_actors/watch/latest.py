"""`Latest`: each Sandbox key's latest delivery, kept (bounded, oldest first out) for a waiter that registers
after it — and none of a run that is over for good.

A run that finished (or that a revival gave up) never has a waiter again: a finished run is never restored
and a given-up one never revived. So when the orchestrator says a run has ended (`run_ended`), its keys'
entries go, and one heard later for a key of it (its Sandbox's DELETED after its Workspace left) is not kept
unless a waiter still holds the key. What an ended run leaves is its id, a plain string in a bounded LRU.
Without this, each finished run's `SandboxGone` stayed up to the bound: ~0.7 KB a run for the first 10,000.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterator
from typing import Generic, Protocol, TypeVar

from jr2_actors.watch.identity import SandboxKey


class _Keyed(Protocol):
    @property
    def key(self) -> SandboxKey: ...


D = TypeVar("D", bound=_Keyed)


class Latest(Generic[D]):
    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._by_key: OrderedDict[SandboxKey, D] = OrderedDict()
        self._of_run: dict[str, set[SandboxKey]] = {}  # the keys above by run: what `run_ended` drops
        self._ended: OrderedDict[str, None] = OrderedDict()  # runs over for good (bounded)

    def get(self, key: SandboxKey) -> D | None:
        return self._by_key.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self) -> Iterator[SandboxKey]:
        return iter(self._by_key)

    def keep(self, delivery: D, waited: bool) -> None:
        """`delivery` is its key's latest (`waited`: a waiter holds the key now)."""
        key = delivery.key
        if key.run_id in self._ended and not waited:
            self._by_key.pop(key, None)
            return
        self._by_key[key] = delivery
        self._by_key.move_to_end(key)
        self._of_run.setdefault(key.run_id, set()).add(key)
        while len(self._by_key) > self._keep:
            self._unindex(self._by_key.popitem(last=False)[0])

    def left(self, key: SandboxKey) -> None:
        """The key's waiter left: an ended run's entry goes with it."""
        if key.run_id in self._ended:
            self._by_key.pop(key, None)
            self._unindex(key)

    def run_ended(self, run_id: str, waiters: Collection[SandboxKey]) -> None:
        self._ended[run_id] = None
        while len(self._ended) > self._keep:
            self._ended.popitem(last=False)
        keys = self._of_run.pop(run_id, set())
        still = {key for key in keys if key in waiters}  # a waiter leaving yet: its entry goes as it does
        for key in keys - still:
            self._by_key.pop(key, None)
        if still:
            self._of_run[run_id] = still

    def _unindex(self, key: SandboxKey) -> None:
        keys = self._of_run.get(key.run_id)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._of_run[key.run_id]
