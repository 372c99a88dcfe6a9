"""One Agent in consecutive states, end to end on the fake cluster (issue 16, items 1 and 2): the seat
admits its next Turn only after the previous Submission settled, against a Harness whose answers take
0, 50 or 500 ms and whose Submissions run on after an `over: true` answer or an abort (CONTRACTS.md §3);
an answer refused 503 fails no run; a restored Turn waits for its old Submission's abort to settle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import Hang, Pick, Say
from jr2_actors.harness import briefing
from jr2_actors.values.workflow import read_document
from tests.support.orchestrators import on_fake
from tests.support.waiting import wait_until
from tests.support.workflows import CODE_THEN_POLISH, ONE_CODER, SELF_LOOP

pytestmark = pytest.mark.slow


RUN_ON_SECONDS = 0.3  # each Submission runs on this long after its `over: true` answer


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None) as c:
        yield c


def run_to_end(cluster: FakeCluster, tmp_path: Path, text: str) -> dict[str, Any]:
    with on_fake(cluster, tmp_path) as orch:
        run_id = orch.submit(read_document(text))
        assert orch.wait_finished(run_id, 30)
        status = orch.status(run_id)
        assert status is not None
        return status


@pytest.mark.parametrize(("latency", "run_on"), [(0.0, RUN_ON_SECONDS), (0.05, RUN_ON_SECONDS),
                                               (0.5, RUN_ON_SECONDS), (0.05, 0.0)],
                         ids=["0ms", "50ms", "500ms", "50ms-no-run-on"])
@pytest.mark.parametrize(("text", "first"), [(CODE_THEN_POLISH, "next"), (SELF_LOOP, "retry")],
                         ids=["code-then-code", "self-loop"])
def test_one_agent_in_consecutive_states_waits_for_its_submission_to_settle(
        cluster: FakeCluster, tmp_path: Path, text: str, first: str, latency: float, run_on: float) -> None:
    cluster.script("coder", [Say("first"), Pick(first)], [Say("second"), Pick("finish")])
    cluster.harness(lambda core: core.set_run_on(run_on))
    cluster.harness(lambda core: core.set_answer_latency(latency))
    status = run_to_end(cluster, tmp_path, text)
    assert (status["status"], status.get("fault")) == ("done", None)
    admissions = cluster.admissions()
    # One admission per Turn: none was refused 409 (each would be recorded as received, then sent again).
    assert len(admissions) == 2, [a.get("briefing", {}).get("message") for a in admissions]
    assert "kept" not in admissions[0]["body"] and admissions[1]["body"]["kept"] is True
    answer = cluster.harness_read(lambda core: core.answers[0])
    target = "polish" if first == "next" else "code"
    assert (answer["over"], answer["answer"]) == (True, {"reply": f"moved to {target}"})


def test_an_answer_refused_503_fails_no_run_and_the_next_turn_hears_it(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.script("coder", [Say("first"), Pick("next")], [Say("second"), Pick("finish")])
    cluster.harness(lambda core: core.set_run_on(RUN_ON_SECONDS))
    cluster.harness(lambda core: core.refuse_answers(1, 503))  # the first answer never reaches its call
    status = run_to_end(cluster, tmp_path, CODE_THEN_POLISH)
    assert (status["status"], status.get("fault")) == ("done", None)
    first, second = cluster.admissions()  # the Submission that waited for the answer was aborted first
    assert "notices" not in first["body"]
    assert second["body"]["notices"] == [{"kind": "pick-answer", "pick": "next", "cut": True,
                                          "answer": {"reply": "moved to polish"}}]
    words, _ = briefing.notice_text(second["body"]["notices"][0])
    assert words is not None and words in second["briefing"]["message"]  # the Harness words it (ADR-0062)


def test_a_restored_turn_is_admitted_once_the_abort_of_its_old_submission_settled(cluster: FakeCluster,
                                                                                  tmp_path: Path) -> None:
    cluster.script("coder", [Hang()], [Say("resumed"), Pick("finish")])
    cluster.harness(lambda core: core.set_run_on(RUN_ON_SECONDS))  # an abort settles only this much later
    first = on_fake(cluster, tmp_path).start()
    run_id = first.submit(read_document(ONE_CODER))
    wait_until(lambda: ((first.status(run_id) or {}).get("turn") or {}).get("phase") == "running",
               what="the Turn admitted and saved")
    first.stop()  # a stop is not a cancel: the Submission runs on in the Harness
    with on_fake(cluster, tmp_path) as again:
        assert again.wait_finished(run_id, 30)
        status = again.status(run_id)
    assert status is not None and (status["status"], status.get("fault")) == ("done", None)
    resumed = [a for a in cluster.admissions() if a["body"].get("kept")]
    assert resumed and all(a["body"]["message"] == briefing.readmit("Code.") for a in resumed)
