"""A run over for good (`RunEnded`: it finished, or a revival gave it up) leaves nothing in the watch's delivery
cache: no waiter registers for its keys again, so their latest deliveries go, and an end heard later for one
of them (its DELETED after its Workspace left) is not kept. A live run's keys keep theirs: a restored waiter
is still answered with its cached Gone and the uid in it (sim seed 257's case)."""

from __future__ import annotations

from jr2_actors.kube.frames import WatchEvent
from jr2_actors.watch.deliveries import DeliveryCache, SandboxGone, SandboxSeen
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.watch.stream import Change, Snapshot
from tests.support.sandboxes import sandbox, with_rv

DONE = SandboxKey("run-done", "F-1")
LIVE = SandboxKey("run-live", "F-1")


def change(kind: str, obj: dict[str, object]) -> Change:
    return Change(WatchEvent(kind, obj, str(obj["metadata"]["resourceVersion"])))  # type: ignore[arg-type,index]


def listed(cache: DeliveryCache) -> None:
    cache.hear(Snapshot([]))


def test_a_finished_runs_deliveries_go_when_it_ends_and_a_live_runs_stay() -> None:
    cache = DeliveryCache()
    listed(cache)
    done, live = sandbox("run-done", "F-1", rv=2), sandbox("run-live", "F-1", rv=3)
    for obj in (done, live):
        cache.hear(change("ADDED", obj))
        cache.hear(change("DELETED", with_rv(obj, int(obj["metadata"]["resourceVersion"]) + 1)))
    assert {k for k in cache._last} == {DONE, LIVE}  # each key's Gone, kept for a waiter that may come
    cache.run_ended("run-done")
    assert set(cache._last) == {LIVE}
    told = cache.register(LIVE, restored=True)  # a live run's restored waiter: its own end, with its uid
    assert told.deliveries == [SandboxGone(LIVE, live["metadata"]["name"], live["metadata"]["uid"], "deleted")]


def test_an_end_heard_after_the_run_ended_is_not_kept() -> None:
    cache = DeliveryCache()
    listed(cache)
    obj = sandbox("run-done", "F-1", rv=2)
    cache.register(DONE, restored=False)
    cache.hear(change("ADDED", obj))
    cache.unregister(DONE)  # its Workspace left before its Sandbox's DELETED came
    cache.run_ended("run-done")
    assert DONE not in cache._last
    cache.hear(change("DELETED", with_rv(obj, 3)))
    assert DONE not in cache._last and cache.tracked == 0


def test_a_waiter_still_registered_when_its_run_ends_keeps_its_entry_until_it_leaves() -> None:
    cache = DeliveryCache()
    listed(cache)
    obj = sandbox("run-done", "F-1", rv=2)
    cache.register(DONE, restored=False)
    cache.hear(change("ADDED", obj))
    cache.run_ended("run-done")
    assert isinstance(cache._last.get(DONE), SandboxSeen)  # its waiter may still be told of it
    told = cache.hear(change("DELETED", with_rv(obj, 3)))
    assert [type(d) for d in told.deliveries] == [SandboxGone]  # and is
    cache.unregister(DONE)
    assert DONE not in cache._last and not cache._last._of_run


def test_what_ended_runs_leave_is_bounded() -> None:
    cache = DeliveryCache(keep_latest=4)
    listed(cache)
    for i in range(10):
        obj = sandbox(f"run-{i}", "F-1", rv=2 * i + 2)
        cache.hear(change("ADDED", obj))
        cache.hear(change("DELETED", with_rv(obj, 2 * i + 3)))
        cache.run_ended(f"run-{i}")
    assert not cache._last and not cache._last._of_run and len(cache._last._ended) == 4
