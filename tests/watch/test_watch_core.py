"""WatchCore on a virtual clock, no threads: every dagr T107 scenario, each fix it needed after, and
issue 7's hardening (any ERROR re-lists, the watch never stops for good, a key that comes back)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from jr2_actors.kube.frames import Bookmark, ErrorFrame, FrameError, WatchEvent
from jr2_actors.values.errors import ApiStatus
from jr2_actors.watch.core import Input, Registered, Unregistered, WatchCore, WatchStep, deliveries
from jr2_actors.watch.deliveries import SandboxGone, SandboxSeen, WatchFailed
from jr2_actors.watch.identity import Foreign, SandboxKey
from jr2_actors.watch.stream import (
    CloseStream,
    Failure,
    FrameReceived,
    Listed,
    ListFailed,
    ListNow,
    Started,
    StreamEnded,
    StreamTick,
    Terminated,
    Termination,
    UnusableFrame,
    WatchFrom,
    WatchOpened,
    WatchOpenFailed,
)
from tests.support.sandboxes import sandbox, with_rv

A = SandboxKey("run-a", "F-1")
B = SandboxKey("run-b", "F-1")
EXPIRED = ErrorFrame(ApiStatus(410, "Expired", "too old resource version: 1 (9371596)"))


class Drive:
    """Feeds the core and keeps everything it said, with time as a number."""

    def __init__(self, **kw: Any) -> None:
        self.core = WatchCore(rng=random.Random(7), **kw)
        self.now = 0.0
        self.steps: list[WatchStep] = []

    def __call__(self, event: Input) -> WatchStep:
        step = self.core.step(event, self.now)
        self.steps.append(step)
        return step

    def at(self, t: float, event: Input) -> WatchStep:
        self.now = t
        return self(event)

    @property
    def stream(self) -> int:
        return self.core.stream

    def up(self) -> bool:
        return self.core.up

    def start(self, items: list[dict[str, Any]], rv: str = "10") -> WatchStep:
        first = self(Started())
        assert first.actions == (ListNow(),)
        step = self(Listed(items, rv))
        assert step.actions[-1] == WatchFrom(rv, self.stream)
        self(WatchOpened(self.stream))
        return step

    def frame(self, frame: Any) -> WatchStep:
        return self(FrameReceived(self.stream, frame))

    def deliveries(self) -> list[Any]:
        return [d for s in self.steps for d in deliveries(s)]

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
    assert d.at(99.9, StreamTick()).actions == ()
    caught = d.at(100.0, StreamTick())
    assert caught.actions == (CloseStream(d.stream), ListNow())
    (term,) = caught.reports
    assert isinstance(term, Terminated)
    assert (term.termination, term.action, term.detail) == (Termination.SILENCE, "relist", "no frame for 90s")


def fail_lists(d: Drive, count: int, failure: Failure) -> list[float]:
    """Answer `count` lists in a row with `failure`, waking at each deadline; the gaps waited."""
    gaps: list[float] = []
    for _ in range(count):
        step = d(ListFailed(failure))
        assert step.actions == () or step.actions == (ListNow(),)
        if step.actions:
            gaps.append(0.0)
        else:
            assert step.deadline is not None
            gaps.append(step.deadline - d.now)
            assert d.at(step.deadline, StreamTick()).actions == (ListNow(),)
    return gaps


LEADER = Failure("api", "etcdserver: leader changed", 500, "InternalError")


def test_repeated_failures_back_off_with_strictly_increasing_gaps_then_degrade_classified() -> None:
    d = Drive(max_failures=8, max_failure_seconds=10_000)
    d(Registered(A))
    d(Started())
    gaps = fail_lists(d, 8, LEADER)
    assert gaps[0] == 0.0
    assert all(b > a for a, b in itertools.pairwise(gaps[1:])), gaps
    assert 0.25 <= gaps[1] <= 0.3
    assert 30.0 <= gaps[-1] <= 36.0  # the eighth failure crossed the bound: the cap from now on
    (degraded,) = [r for r in d.reports() if isinstance(r, Terminated) and r.action == "degraded"]
    assert (degraded.termination, degraded.resource_version) == (Termination.TRANSIENT, None)
    (failed,) = [x for x in d.deliveries() if isinstance(x, WatchFailed)]
    assert failed.key == A
    assert "etcdserver: leader changed" in failed.message
    assert failed.termination is Termination.TRANSIENT
    assert not d.up() and d.core.phase == "listing"


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
    assert d.at(step.deadline, StreamTick()).actions == (ListNow(),)


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


@pytest.mark.parametrize(("code", "reason", "termination"), [
    (500, "InternalError", Termination.TRANSIENT), (504, "Timeout", Termination.TRANSIENT),
    (403, "Forbidden", Termination.TRANSIENT), (410, "Expired", Termination.EXPIRED)])
def test_any_in_stream_error_relists_and_never_resumes_from_its_version(code: int, reason: str,
                                                                         termination: Termination) -> None:
    d = Drive()
    d.start([], rv="10")
    d.frame(Bookmark("12"))
    step = d.frame(ErrorFrame(ApiStatus(code, reason, "Too large resource version: 12, current: 11")))
    assert step.actions == (CloseStream(d.stream), ListNow())  # ADR-0063: any ERROR event re-lists
    (term,) = step.reports
    assert isinstance(term, Terminated)
    assert (term.termination, term.action, term.resource_version) == (termination, "relist", None)
    d(Listed([], "11"))
    assert d.actions()[-1] == WatchFrom("11", d.stream)  # the list's version, never "12" again


def test_a_server_that_fails_every_watch_after_a_good_list_backs_off_instead_of_looping() -> None:
    d = Drive()
    d.start([], rv="10")
    too_large = ErrorFrame(ApiStatus(504, "Timeout", "Too large resource version: 10, current: 9"))
    gaps: list[float] = []
    for _ in range(10):
        step = d.frame(too_large)
        if step.actions[-1] == ListNow():
            gaps.append(0.0)
        else:
            assert step.deadline is not None
            gaps.append(step.deadline - d.now)
            assert d.at(step.deadline, StreamTick()).actions == (ListNow(),)
        d(Listed([], "10"))  # the list works and clears the failure run, not the backoff step
        d(WatchOpened(d.stream))
    assert gaps[0] == 0.0
    assert all(b > a for a, b in itertools.pairwise(gaps[1:9])), gaps  # 0.25 s doubling …
    assert gaps[-1] >= 30.0  # … to the cap
    assert d.core.failures == 0 and d.up()  # lists work: the cluster is not blind


def test_an_idle_watch_caught_silent_again_and_again_relists_at_once_every_time() -> None:
    d = Drive()
    d.start([])
    for i in range(1, 6):
        step = d.at(d.now + 90, StreamTick())  # no bookmarks from this server: each watch is caught silent
        (term,) = step.reports
        assert isinstance(term, Terminated)
        assert (term.termination, term.delay) == (Termination.SILENCE, 0.0)
        assert step.actions[-1] == ListNow()
        d(Listed([], str(10 + i)))
        d(WatchOpened(d.stream))


def test_progress_on_a_stream_restarts_the_schedule() -> None:
    d = Drive()
    d.start([])
    for _ in range(3):
        step = d(StreamEnded(d.stream, Failure("transport", "reset")))
        if step.deadline is not None and not step.actions:
            d.at(step.deadline, StreamTick())
        d(WatchOpened(d.stream))
    d.frame(Bookmark("11"))
    assert d(StreamEnded(d.stream, Failure("transport", "reset"))).actions == (WatchFrom("11", d.stream),)


@pytest.mark.parametrize("failure", [Failure("api", "forbidden", 403, "Forbidden"),
                                     Failure("api", "unavailable", 503, "ServiceUnavailable"),
                                     Failure("api", "slow down", 429, "TooManyRequests", retry_after=3)])
def test_an_http_error_on_opening_a_watch_backs_off_and_resumes(failure: Failure) -> None:
    d = Drive()
    d.start([], rv="10")
    d.frame(Bookmark("12"))
    d(StreamEnded(d.stream, Failure("transport", "reset")))
    step = d(WatchOpenFailed(d.stream, failure))
    (term,) = step.reports
    assert isinstance(term, Terminated)
    assert (term.termination, term.action, term.resource_version) == (Termination.TRANSIENT, "resume", "12")
    assert step.deadline is not None
    assert step.deadline - d.now >= (failure.retry_after or 0.25)
    assert d.at(step.deadline, StreamTick()).actions == (WatchFrom("12", d.stream),)


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
            d.at(step.deadline, StreamTick())
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
    d.at(waiting.deadline, StreamTick())
    assert deliveries(d.at(59.9, ListFailed(Failure("transport", "refused")))) == ()
    d.at(100, StreamTick())
    step = d.at(100, ListFailed(Failure("transport", "refused")))
    assert [r.action for r in step.reports if isinstance(r, Terminated)] == ["degraded"]
    assert deliveries(step) == (WatchFailed(A, Termination.TRANSPORT, deliveries(step)[0].message),)  # type: ignore[union-attr]


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
    assert [x.sandbox.phase for x in deliveries(step) if isinstance(x, SandboxSeen)] == ["Ready"]  # the latest only
    assert len(deliveries(step)) == 1


def test_kept_observations_are_bounded() -> None:
    d = Drive(keep_latest=2)
    d.start([sandbox(f"run-{i}", rv=i + 1) for i in range(5)])
    assert deliveries(d(Registered(SandboxKey("run-0", "F-1")))) == ()
    assert len(deliveries(d(Registered(SandboxKey("run-4", "F-1"))))) == 1


def test_a_restored_waiter_for_an_already_deleted_object_gets_the_final_answer_at_once() -> None:
    d = Drive()
    d.start([sandbox("run-a", rv=3)])
    d.frame(event("DELETED", sandbox("run-a", rv=4)))
    (answer,) = deliveries(d(Registered(A, restored=True)))
    assert isinstance(answer, SandboxGone) and answer.reason == "deleted"
    lost = Drive()
    lost.start([sandbox("run-b", rv=3, phase="Lost")])
    (final,) = deliveries(lost(Registered(B)))
    assert isinstance(final, SandboxSeen) and final.sandbox.phase == "Lost"


def test_a_key_that_comes_back_is_never_handed_its_older_incarnations_gone() -> None:
    """ADR-0064: a state re-entered gets the same name. The successor registers before it applies, so a
    cached Gone is an older incarnation's end, never its own."""
    d = Drive()
    d(Registered(A))
    d.start([sandbox("run-a", rv=3, uid="u-old")])
    d.frame(event("DELETED", sandbox("run-a", rv=4, uid="u-old")))
    assert deliveries(d(Unregistered(A))) == ()
    assert deliveries(d(Registered(A))) == ()  # the successor
    d.frame(event("ADDED", sandbox("run-a", rv=5, uid="u-new")))
    (seen,) = deliveries(d.steps[-1])
    assert isinstance(seen, SandboxSeen) and seen.sandbox.uid == "u-new"


def test_a_key_that_comes_back_is_handed_the_live_object_its_apply_may_adopt() -> None:
    d = Drive()
    d(Registered(A))
    d.start([sandbox("run-a", rv=3, uid="u-1", phase="Ready")])
    (seen,) = deliveries(d(Registered(A)))  # a successor; an unchanged apply makes no event
    assert isinstance(seen, SandboxSeen) and (seen.sandbox.uid, seen.sandbox.phase) == ("u-1", "Ready")


def test_the_first_list_answers_every_restored_waiter_present_or_gone() -> None:
    d = Drive()
    d(Registered(A, restored=True))
    d(Registered(B, restored=True))
    d.start([sandbox("run-a", rv=3)])
    answers = {x.key: type(x).__name__ for x in d.deliveries()}
    assert answers == {A: "SandboxSeen", B: "SandboxGone"}
    late = SandboxKey("run-c", "F-1")
    (answer,) = deliveries(d(Registered(late, restored=True)))
    assert isinstance(answer, SandboxGone)


def test_a_registration_never_postpones_the_stall_deadline() -> None:
    d = Drive()
    d.start([])
    d.at(5.0, FrameReceived(d.stream, Bookmark("11")))
    step = d.at(80.0, Registered(A))
    assert step.deadline == 95.0
    d.at(81.0, Unregistered(A))
    caught = d.at(95.0, StreamTick())
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


def test_while_blind_a_new_waiter_is_told_at_once_and_answered_when_a_list_works() -> None:
    d = Drive(max_failures=2)
    d(Started())
    fail_lists(d, 2, Failure("transport", "refused"))
    (told,) = deliveries(d(Registered(A)))
    assert isinstance(told, WatchFailed)
    assert "refused" in told.message
    d(Listed([sandbox("run-a", rv=3)], "4"))
    assert phases(d.deliveries(), A) == ["WatchFailed", "Pending"]
    assert deliveries(d(Registered(B))) == ()  # not blind any more


def test_the_watch_never_stops_for_good() -> None:
    """Issue 7: past the bound every waiter is told once, `up` turns false and the loop goes on
    re-listing at the cap (never resuming); the first list that works reconciles every waiter."""
    d = Drive(max_failures=3, max_failure_seconds=10_000)
    for key in (A, B):
        d(Registered(key))
    restored = SandboxKey("run-r", "F-1")
    d(Registered(restored, restored=True))
    a, b = sandbox("run-a", rv=3, phase="Ready"), sandbox("run-b", rv=4)
    d.start([a, b], rv="5")
    d.frame(EXPIRED)
    gaps = fail_lists(d, 2, Failure("transport", "refused"))  # the third failure in a row: degraded
    told = [x for x in d.deliveries() if isinstance(x, WatchFailed)]
    assert sorted(x.key for x in told) == sorted([A, B, restored])
    assert not d.up()
    # Ten minutes of a control plane upgrade: every retry a re-list at the cap, nobody told twice.
    more = fail_lists(d, 20, Failure("api", "upgrading", 503, "ServiceUnavailable"))
    assert all(30.0 <= g <= 36.0 for g in more) and sum(more) >= 600
    assert gaps[-1] >= 30.0
    assert [x for x in d.deliveries() if isinstance(x, WatchFailed)] == told
    assert not any(isinstance(x, WatchFrom) for x in d.actions()[-20:])
    # Back: a unchanged, b deleted while blind, the restored one's Sandbox never came back.
    step = d(Listed([a], "90"))
    answers = {x.key: x for x in deliveries(step)}
    seen_a, gone_b, gone_r = answers[A], answers[B], answers[restored]
    assert isinstance(seen_a, SandboxSeen) and seen_a.sandbox.phase == "Ready"
    assert isinstance(gone_b, SandboxGone) and gone_b.reason == "absent"
    assert isinstance(gone_r, SandboxGone)
    assert len(deliveries(step)) == 3
    assert d.up() and step.actions == (WatchFrom("90", d.stream),)


def test_while_degraded_an_opening_error_relists_and_a_waiter_that_never_saw_its_sandbox_is_not_told_gone() -> None:
    d = Drive(max_failures=2, max_failure_seconds=10_000)
    d.start([], rv="5")
    d(Registered(A))  # registered; its Sandbox not applied yet
    d(StreamEnded(d.stream, Failure("transport", "reset")))
    step = d(WatchOpenFailed(d.stream, Failure("api", "unavailable", 503, "ServiceUnavailable")))
    assert [r.action for r in step.reports if isinstance(r, Terminated)] == ["degraded"]
    assert step.deadline is not None
    assert d.at(step.deadline, StreamTick()).actions == (ListNow(),)
    recovered = d(Listed([], "9"))
    assert deliveries(recovered) == ()  # absence is not loss for a Sandbox nobody saw yet
    assert phases(d.deliveries(), A) == ["WatchFailed"]


def test_a_list_that_never_answers_fails_at_its_deadline_and_a_late_answer_is_taken() -> None:
    d = Drive(list_deadline=60)
    d(Registered(A))
    first = d(Started())
    assert first.deadline == 60
    assert d.at(59, StreamTick()).actions == ()
    step = d.at(60, StreamTick())
    (term,) = step.reports
    assert isinstance(term, Terminated)
    assert (term.termination, term.action) == (Termination.TRANSPORT, "relist")
    assert "did not answer within 60s" in term.detail
    assert step.actions == (ListNow(),)
    d.at(61, Listed([sandbox("run-a", rv=3)], "4"))  # the first list, late: a consistent snapshot all the same
    assert phases(d.deliveries(), A) == ["Pending"]
    assert d.core.phase == "watching"


def test_a_lost_sandbox_leaves_no_trace_once_deleted_or_absent() -> None:
    d = Drive()
    d.start([sandbox("run-a", rv=3), sandbox("run-b", rv=4)])
    assert d.core.tracked == 2
    d.frame(event("MODIFIED", sandbox("run-a", rv=5, phase="Lost")))
    d.frame(event("MODIFIED", sandbox("run-b", rv=6, phase="Lost")))
    d.frame(event("DELETED", sandbox("run-a", rv=7, phase="Lost")))
    assert d.core.tracked == 1
    d.frame(EXPIRED)
    d(Listed([], "8"))
    assert d.core.tracked == 0
    assert not any(isinstance(x, SandboxGone) for x in d.deliveries())  # Lost was the last word


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
