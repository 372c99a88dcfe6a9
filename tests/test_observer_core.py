"""ObserverCore on a virtual clock, no threads: every dagr T107 scenario and each fix it needed after."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from jr2_actors.errors import ApiStatus
from jr2_actors.kube.frames import Bookmark, ErrorFrame, FrameError, WatchEvent
from jr2_actors.watch.core import (
    CloseStream,
    Failure,
    FrameReceived,
    Input,
    Listed,
    ListFailed,
    ListNow,
    ObserverCore,
    Registered,
    SandboxGone,
    SandboxSeen,
    Started,
    Step,
    StopWatching,
    StreamEnded,
    Terminated,
    Termination,
    Tick,
    Unregistered,
    UnusableFrame,
    WatchFailed,
    WatchFrom,
    WatchOpened,
    WatchOpenFailed,
)
from jr2_actors.watch.identity import Foreign, SandboxKey
from tests.sandboxes import sandbox, with_rv

A = SandboxKey("run-a", "F-1")
B = SandboxKey("run-b", "F-1")
EXPIRED = ErrorFrame(ApiStatus(410, "Expired", "too old resource version: 1 (9371596)"))


class Drive:
    """Feeds the core and keeps everything it said, with time as a number."""

    def __init__(self, **kw: Any) -> None:
        self.core = ObserverCore(rng=random.Random(7), **kw)
        self.now = 0.0
        self.steps: list[Step] = []

    def __call__(self, event: Input) -> Step:
        step = self.core.step(event, self.now)
        self.steps.append(step)
        return step

    def at(self, t: float, event: Input) -> Step:
        self.now = t
        return self(event)

    @property
    def stream(self) -> int:
        return self.core.stream

    def start(self, items: list[dict[str, Any]], rv: str = "10") -> Step:
        first = self(Started())
        assert first.actions == (ListNow(),)
        step = self(Listed(items, rv))
        assert step.actions[-1] == WatchFrom(rv, self.stream)
        self(WatchOpened(self.stream))
        return step

    def frame(self, frame: Any) -> Step:
        return self(FrameReceived(self.stream, frame))

    def deliveries(self) -> list[Any]:
        return [d for s in self.steps for d in s.deliveries]

    def reports(self) -> list[Any]:
        return [r for s in self.steps for r in s.reports]

    def actions(self) -> list[Any]:
        return [a for s in self.steps for a in s.actions]


def event(type_: str, obj: dict[str, Any]) -> WatchEvent:
    return WatchEvent(type_, obj, obj["metadata"]["resourceVersion"])  # type: ignore[arg-type]


def phases(deliveries: list[Any], key: SandboxKey) -> list[str]:
    return [d.sandbox.phase if isinstance(d, SandboxSeen) else type(d).__name__ for d in deliveries if d.key == key]


# -- the T107 scenarios ----------------------------------------------------------------------------------

def test_410_relists_and_delivers_the_gap_transition_once_never_from_the_410_version() -> None:
    d = Drive()
    d(Registered(A))
    a = sandbox("run-a", rv=5)
    d.start([a])
    d.frame(EXPIRED)
    assert isinstance(d.steps[-1].actions[0], CloseStream)
    assert d.steps[-1].actions[-1] == ListNow()
    # The gap: a went Ready while no watch was open. The re-list shows it.
    d(Listed([with_rv(a, 20, phase="Ready")], "21"))
    d(Listed([with_rv(a, 20, phase="Ready")], "21"))  # a second list of the same state adds nothing
    assert phases(d.deliveries(), A) == ["Pending", "Ready"]
    watched = [x.resource_version for x in d.actions() if isinstance(x, WatchFrom)]
    assert "9371596" not in watched and "1" not in watched
    assert watched == ["10", "21"]
    (term,) = [r for r in d.reports() if isinstance(r, Terminated)]
    assert (term.termination, term.action, term.resource_version) == (Termination.EXPIRED, "relist", None)


def test_a_silent_watch_is_caught_within_the_bound() -> None:
    d = Drive()
    d.start([])
    step = d.at(10.0, FrameReceived(d.stream, Bookmark("11")))
    assert step.deadline == 100.0
    assert d.at(99.9, Tick()).actions == ()
    caught = d.at(100.0, Tick())
    assert 90.0 <= 100.0 - 10.0 < 180.0
    assert isinstance(caught.actions[0], CloseStream)
    assert caught.actions[-1] == ListNow()
    (term,) = caught.reports
    assert isinstance(term, Terminated)
    assert (term.termination, term.action) == (Termination.SILENCE, "relist")


def test_repeated_failures_back_off_with_strictly_increasing_gaps_then_stop_classified() -> None:
    d = Drive(max_failures=8, max_failure_seconds=10_000)
    d(Registered(A))
    d(Started())
    platform_text = "etcdserver: leader changed"
    gaps: list[float] = []
    for _ in range(9):
        step = d(ListFailed(Failure("api", platform_text, 500, "InternalError")))
        if step.deadline is not None:
            gaps.append(step.deadline - d.now)
            d.at(step.deadline, Tick())
        else:
            gaps.append(0.0)
    assert gaps[0] == 0.0
    rising = gaps[1:-1]
    assert all(b > a for a, b in itertools.pairwise(rising)), gaps
    assert 0.25 <= gaps[1] <= 0.3
    final = d.steps[-1] if d.steps[-1].actions else d.steps[-2]
    assert isinstance(final.actions[-1], StopWatching)
    (failed,) = [x for x in d.deliveries() if isinstance(x, WatchFailed)]
    assert failed.key == A
    assert platform_text in failed.message
    assert failed.termination is Termination.TRANSIENT


def test_a_transition_delivered_three_times_notifies_once() -> None:
    d = Drive()
    d(Registered(A))
    a = sandbox("run-a", rv=5)
    d.start([])
    for _ in range(3):
        d.frame(event("MODIFIED", with_rv(a, 6, phase="Ready")))
    d(StreamEnded(d.stream, Failure("transport", "reset")))
    d.frame(event("MODIFIED", with_rv(a, 6, phase="Ready")))  # repeated across the reconnect
    d(ListFailed(Failure("transport", "x")))  # ignored: not listing
    assert phases(d.deliveries(), A) == ["Ready"]


def test_two_sandboxes_each_get_only_their_own() -> None:
    d = Drive()
    d(Registered(A))
    d(Registered(B))
    d.start([sandbox("run-a", rv=3), sandbox("run-b", rv=4)])
    d.frame(event("MODIFIED", with_rv(sandbox("run-b", rv=4), 7, phase="Ready")))
    assert phases(d.deliveries(), A) == ["Pending"]
    assert phases(d.deliveries(), B) == ["Pending", "Ready"]


def test_foreign_and_unidentifiable_sandboxes_are_reported_not_attributed() -> None:
    d = Drive()
    d(Registered(A))
    disagree = sandbox("run-a", rv=3)
    disagree["metadata"]["labels"]["jr2.dev/run"] = "run-other"
    bare = sandbox("run-a", rv=4, uid="u-bare")
    del bare["metadata"]["annotations"]
    d.start([disagree, bare])
    d.frame(event("MODIFIED", with_rv(disagree, 9, phase="Ready")))  # reported once per uid and reason
    assert d.deliveries() == []
    foreign = [r for r in d.reports() if isinstance(r, Foreign)]
    assert len(foreign) == 2
    assert "disagrees" in foreign[0].why
    assert "annotation" in foreign[1].why


def test_a_sandbox_vanishing_in_a_gap_is_reported_once() -> None:
    d = Drive()
    d(Registered(A))
    d.start([sandbox("run-a", rv=3)])
    d.frame(EXPIRED)
    d(Listed([], "30"))
    d.frame(EXPIRED)
    d(Listed([], "31"))
    gone = [x for x in d.deliveries() if isinstance(x, SandboxGone)]
    assert len(gone) == 1
    assert gone[0].reason == "absent"


def test_transport_end_resumes_from_the_bookmark_while_a_410_relists() -> None:
    d = Drive()
    d.start([])
    d.frame(Bookmark("55"))
    step = d(StreamEnded(d.stream, Failure("transport", "read timed out")))
    assert step.actions == (WatchFrom("55", d.stream),)
    d(WatchOpened(d.stream))
    step = d.frame(EXPIRED)  # the second failure in the run: a short backoff, then the re-list
    (term,) = step.reports
    assert isinstance(term, Terminated)
    assert (term.termination, term.action, term.resource_version) == (Termination.EXPIRED, "relist", None)
    assert step.deadline is not None
    assert d.at(step.deadline, Tick()).actions == (ListNow(),)


def test_a_transient_403_is_retried() -> None:
    d = Drive()
    d.start([])
    d.frame(Bookmark("12"))
    step = d(StreamEnded(d.stream, None))  # a free resume after a bookmark: no failure counted
    assert d.core.failures == 0
    step = d(WatchOpenFailed(d.stream, Failure("api", "forbidden", 403, "Forbidden")))
    assert step.actions == (WatchFrom("12", d.stream),)  # the first retry at once, resuming
    (term,) = step.reports
    assert isinstance(term, Terminated)
    assert (term.termination, term.action) == (Termination.TRANSIENT, "resume")


# -- the fixes dagr needed, one test each --------------------------------------------------------------

@pytest.mark.parametrize("failure", [Failure("api", "gone", 410, "Expired"), Failure("api", "gone", 410, ""),
                                     Failure("api", "too old", 500, "Gone")])
def test_plain_http_410_and_old_servers_gone_count_as_expired(failure: Failure) -> None:
    d = Drive()
    d.start([])
    step = d(WatchOpenFailed(d.stream, failure))
    assert step.actions == (ListNow(),)


@pytest.mark.parametrize(("code", "reason"), [(500, "InternalError"), (504, "Timeout"), (403, "Forbidden")])
def test_other_in_stream_errors_are_transient_and_resume(code: int, reason: str) -> None:
    d = Drive()
    d.start([])
    step = d.frame(ErrorFrame(ApiStatus(code, reason, "Too large resource version")))
    assert isinstance(step.actions[0], CloseStream)
    assert step.actions[-1] == WatchFrom("10", d.stream)


def test_a_read_timeout_is_transport_and_resumes() -> None:
    d = Drive()
    d.start([])
    step = d(StreamEnded(d.stream, Failure("transport", "ConnectionError(ReadTimeoutError)")))
    assert step.actions == (WatchFrom("10", d.stream),)
    assert step.reports[0].termination is Termination.TRANSPORT  # type: ignore[union-attr]


def test_delivered_objects_advance_the_resume_version() -> None:
    d = Drive()
    d.start([])
    d.frame(event("ADDED", sandbox("run-a", rv=41)))
    step = d(StreamEnded(d.stream, Failure("transport", "reset")))
    assert step.actions == (WatchFrom("41", d.stream),)


def test_a_watch_closed_at_once_with_nothing_is_not_a_free_resume() -> None:
    d = Drive()
    d.start([])
    for _ in range(3):
        step = d(StreamEnded(d.stream, None))
        if step.deadline is not None and not step.actions:
            d.at(step.deadline, Tick())
    assert d.core.failures == 3  # counted, so it backs off instead of looping hot


def test_a_long_served_watch_ending_cleanly_is_free() -> None:
    d = Drive()
    d.start([])
    step = d.at(240.0, StreamEnded(d.stream, None))
    assert step.actions == (WatchFrom("10", d.stream),)
    assert d.core.failures == 0


def test_only_list_bookmark_or_object_clears_the_failure_run_not_an_open() -> None:
    d = Drive()
    d.start([])
    d(StreamEnded(d.stream, Failure("transport", "reset")))
    d(WatchOpened(d.stream))
    assert d.core.failures == 1
    d.frame(Bookmark("11"))
    assert d.core.failures == 0


def test_retry_after_is_honoured() -> None:
    d = Drive()
    d.start([])
    d(WatchOpenFailed(d.stream, Failure("api", "slow", 429, "TooManyRequests")))
    step = d(WatchOpenFailed(d.stream, Failure("api", "slow", 429, "TooManyRequests", retry_after=7)))
    assert step.deadline == d.now + 7


def test_failure_bound_by_elapsed_time() -> None:
    d = Drive(max_failures=1000, max_failure_seconds=60)
    d(Registered(A))
    d(Started())
    d.at(0, ListFailed(Failure("transport", "refused")))
    waiting = d.at(1, ListFailed(Failure("transport", "refused")))
    assert waiting.deadline is not None
    d.at(waiting.deadline, Tick())
    step = d.at(61, ListFailed(Failure("transport", "refused")))
    assert isinstance(step.actions[-1], StopWatching)
    assert isinstance(step.deliveries[0], WatchFailed)


def test_dedup_is_not_on_phase_alone() -> None:
    d = Drive()
    d(Registered(A))
    a = sandbox("run-a", rv=3, scheduled="Unschedulable")
    d.start([a])
    quota = sandbox("run-a", rv=4, scheduled="QuotaExceeded")
    d.frame(event("MODIFIED", quota))
    crash = sandbox("run-a", rv=5, scheduled="Scheduled", waiting="CrashLoopBackOff")
    d.frame(event("MODIFIED", crash))
    reasons = [(x.sandbox.phase, x.sandbox.scheduling_reason, x.sandbox.waiting_reason)
               for x in d.deliveries() if isinstance(x, SandboxSeen)]
    assert reasons == [("Pending", "Unschedulable", ""), ("Pending", "QuotaExceeded", ""),
                       ("Pending", "Scheduled", "CrashLoopBackOff")]


def test_an_older_version_after_a_newer_one_is_not_delivered() -> None:
    d = Drive()
    d(Registered(A))
    d.start([])
    d.frame(event("MODIFIED", sandbox("run-a", rv=9, phase="Ready")))
    d.frame(event("MODIFIED", sandbox("run-a", rv=8, phase="Pending")))
    assert phases(d.deliveries(), A) == ["Ready"]


def test_retirement_is_per_uid_and_a_new_object_under_the_same_name_rearms() -> None:
    d = Drive()
    d(Registered(A))
    old = sandbox("run-a", rv=3, uid="u-old")
    d.start([old])
    d.frame(event("DELETED", with_rv(old, 4)))
    d.frame(event("MODIFIED", with_rv(old, 5, phase="Ready")))  # a late frame for the retired uid
    new = sandbox("run-a", rv=6, uid="u-new")
    d.frame(event("ADDED", new))
    assert phases(d.deliveries(), A) == ["Pending", "SandboxGone", "Pending"]
    assert [x.sandbox.uid for x in d.deliveries() if isinstance(x, SandboxSeen)] == ["u-old", "u-new"]


def test_a_replaced_object_is_gone_before_its_successor_is_seen() -> None:
    d = Drive()
    d(Registered(A))
    d.start([sandbox("run-a", rv=3, uid="u-1")])
    d.frame(EXPIRED)
    d(Listed([sandbox("run-a", rv=9, uid="u-2")], "10"))
    kinds = [(type(x).__name__, getattr(x, "reason", "")) for x in d.deliveries()]
    assert kinds == [("SandboxSeen", ""), ("SandboxGone", "replaced"), ("SandboxSeen", "")]


def test_a_waiter_registered_before_its_sandbox_exists_is_not_gone() -> None:
    d = Drive()
    d.start([])
    d(Registered(A))
    d.frame(EXPIRED)
    d(Listed([], "20"))
    assert d.deliveries() == []
    d.frame(event("ADDED", sandbox("run-a", rv=21)))
    assert phases(d.deliveries(), A) == ["Pending"]


def test_an_observation_before_its_waiter_is_kept_and_delivered_on_registration() -> None:
    d = Drive()
    d.start([sandbox("run-a", rv=3)])
    d.frame(event("MODIFIED", sandbox("run-a", rv=4, phase="Ready")))
    assert d.deliveries() == []
    step = d(Registered(A))
    assert [x.sandbox.phase for x in step.deliveries if isinstance(x, SandboxSeen)] == ["Ready"]  # the latest only
    assert len(step.deliveries) == 1


def test_kept_observations_are_bounded() -> None:
    d = Drive(keep_latest=2)
    d.start([sandbox(f"run-{i}", rv=i + 1) for i in range(5)])
    assert d(Registered(SandboxKey("run-0", "F-1"))).deliveries == ()
    assert len(d(Registered(SandboxKey("run-4", "F-1"))).deliveries) == 1


def test_a_waiter_for_an_already_retired_object_gets_the_final_answer_at_once() -> None:
    d = Drive()
    d.start([sandbox("run-a", rv=3)])
    d.frame(event("DELETED", sandbox("run-a", rv=4)))
    (answer,) = d(Registered(A)).deliveries
    assert isinstance(answer, SandboxGone) and answer.reason == "deleted"
    lost = Drive()
    lost.start([sandbox("run-b", rv=3, phase="Lost")])
    (final,) = lost(Registered(B)).deliveries
    assert isinstance(final, SandboxSeen) and final.sandbox.phase == "Lost"


def test_the_first_list_answers_every_restored_waiter_present_or_gone() -> None:
    d = Drive()
    d(Registered(A, restored=True))
    d(Registered(B, restored=True))
    d.start([sandbox("run-a", rv=3)])
    answers = {x.key: type(x).__name__ for x in d.deliveries()}
    assert answers == {A: "SandboxSeen", B: "SandboxGone"}
    late = SandboxKey("run-c", "F-1")
    (answer,) = d(Registered(late, restored=True)).deliveries
    assert isinstance(answer, SandboxGone)


def test_a_registration_never_postpones_the_stall_deadline() -> None:
    d = Drive()
    d.start([])
    d.at(5.0, FrameReceived(d.stream, Bookmark("11")))
    step = d.at(80.0, Registered(A))
    assert step.deadline == 95.0
    d.at(81.0, Unregistered(A))
    caught = d.at(95.0, Tick())
    assert caught.actions[-1] == ListNow()


def test_frames_from_an_abandoned_stream_are_ignored() -> None:
    d = Drive()
    d(Registered(A))
    d.start([])
    old = d.stream
    d.frame(EXPIRED)
    d(Listed([], "20"))
    d(FrameReceived(old, event("ADDED", sandbox("run-a", rv=15))))
    d(StreamEnded(old, None))
    assert d.deliveries() == []
    assert d.core.phase == "watching" and d.stream == old + 1


def test_an_unusable_frame_is_reported_and_reconciled_by_a_relist() -> None:
    d = Drive()
    d.start([])
    bad = FrameError("oversized", "line over the limit", 10 * 1024 * 1024)
    step = d.frame(bad)
    assert step.reports[0] == UnusableFrame(bad)
    assert step.actions[-1] == ListNow()


def test_after_stopping_every_new_waiter_is_told_at_once() -> None:
    d = Drive(max_failures=1)
    d(Started())
    d(ListFailed(Failure("transport", "refused")))
    d(ListFailed(Failure("transport", "refused")))
    assert d.core.phase == "stopped"
    (told,) = d(Registered(A)).deliveries
    assert isinstance(told, WatchFailed)
    assert "refused" in told.message


def test_a_replayed_frame_never_drags_the_resume_version_back() -> None:
    d = Drive()
    d(Registered(A))
    d.start([sandbox("run-a", rv=50)], rv="60")
    d.frame(event("MODIFIED", sandbox("run-a", rv=40)))  # a stale replay
    step = d(StreamEnded(d.stream, Failure("transport", "reset")))
    assert step.actions == (WatchFrom("60", d.stream),)


def test_an_older_incarnations_deletion_does_not_bury_the_current_object() -> None:
    d = Drive()
    d(Registered(A))
    d.start([sandbox("run-a", rv=9, uid="u-new")])
    d.frame(event("DELETED", sandbox("run-a", rv=8, uid="u-old")))
    assert phases(d.deliveries(), A) == ["Pending"]
    d.frame(event("DELETED", sandbox("run-a", rv=10, uid="u-new")))
    assert phases(d.deliveries(), A) == ["Pending", "SandboxGone"]
