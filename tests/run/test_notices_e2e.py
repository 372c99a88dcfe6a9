"""ADR-0062 end to end, through `serve`'s API on the fake cluster: a guard kill during a Turn, a kill while
the workflow waits with no Turn running, and a kernel kill each reach the next admission in scope exactly
once, in the Briefing's exact words; and a SIGKILL between a read and its save loses no notice."""

from __future__ import annotations

import json
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.harness.core import GuardKill, Hang, Pick, Say
from jr2_actors.harness import briefing
from jr2_actors.values.workflow import read_document
from jr2_actors.watch.identity import sandbox_name
from tests.support.serving import KEY, Serve
from tests.support.waiting import wait_until
from tests.support.workflows import NOTICES

pytestmark = pytest.mark.slow

GUARD = ("The Sandbox's processes were killed at its memory limit (peak 1.9Gi of 2Gi) during `coder`'s Turn; "
         "/dev/shm was cleared. Anything that was running in the Sandbox at that time is gone.")
LISTED = ("The Sandbox's processes were killed at its memory limit (peak 1.1Gi of 2Gi); /dev/shm was cleared. "
          "Anything that was running in the Sandbox at that time is gone.")
KERNEL = ("The Sandbox's processes were killed at its memory limit of 2Gi; /dev/shm was cleared. "
          "Anything that was running in the Sandbox at that time is gone.")


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(start_seconds=0.05, long_poll=0.5, bookmark_interval=None, signing_key=KEY.encode()) as c:
        yield c


def rendered(cluster: FakeCluster, agent: str) -> list[str]:
    return [(a.get("briefing") or {}).get("message", "") for a in cluster.admissions() if a["agent"] == agent]


def every_admission(cluster: FakeCluster) -> str:
    return "\n".join((a.get("briefing") or {}).get("message", "") for a in cluster.admissions())


def go(cluster: FakeCluster, agent: str, pick: str) -> None:
    """The model of `agent`'s hung Turn picks, once that Turn is admitted and hangs."""
    wait_until(lambda: cluster.harness(lambda core: core.pick_now(agent, pick)), timeout=30,
               what=f"{agent}'s Turn hanging")


def state_of(serve: Serve, run_id: str) -> Any:
    return serve.call("GET", f"/runs/{run_id}").json().get("state")


def test_each_kill_reaches_the_next_admission_in_scope_exactly_once_in_the_briefings_words(
        cluster: FakeCluster, tmp_path: Path) -> None:
    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    cluster.script("coder", [Say("running the tests"), GuardKill(peak="1.9Gi", limit="2Gi"), Pick("finish")])
    cluster.script("triage", [Hang()], [Hang()])
    cluster.script("reviewer", [Pick("more")], [Pick("approve")])
    serve = Serve(kubeconfig, tmp_path / "state", instance_harness=cluster.instance_harness_url)
    try:
        run_id = serve.call("POST", "/runs", json={"workflow": read_document(NOTICES)}).json()["runId"]
        name = sandbox_name(run_id, "F-1")
        wait_until(lambda: state_of(serve, run_id) == "idle", timeout=30, what="the first wait")
        go(cluster, "triage", "go")
        wait_until(lambda: state_of(serve, run_id) == "idle2", timeout=30, what="the second wait")
        cluster.list_kill(name, agent="", peak="1.1Gi", limit="2Gi")  # a dev server, killed while no Turn runs
        cluster.kill_harness(name, reason="OOMKilled", message="Killed")  # the kernel kills the Harness …
        cluster.harness(lambda core: core.restart(name))  # … and its new container holds no conversation
        wait_until(lambda: any((c.get("phase") == "running") for c in
                               serve.call("GET", f"/runs/{run_id}").json()["children"]), timeout=30,
                   what="F-1 running after the restart")
        go(cluster, "triage", "go")
        wait_until(lambda: serve.call("GET", f"/runs/{run_id}").json().get("status") == "done", timeout=30,
                   what="the run done")
        reviewer = [m for m in rendered(cluster, "reviewer") if m]  # (a refused admission renders nothing)
        everything = every_admission(cluster)
        assert GUARD in reviewer[0] and everything.count(GUARD) == 1  # the guard kill: the next Turn in F-1
        # While no Turn ran: a dev server's kill (listed alone) and a kernel kill (the Sandbox's last end).
        # Both reach the next admission in F-1 — the reviewer's, admitted again as a new conversation.
        assert LISTED in reviewer[-1] and everything.count(LISTED) == 1
        assert KERNEL in reviewer[-1] and everything.count(KERNEL) == 1
        assert briefing.CONVERSATION_NEW in reviewer[-1]
        assert all(GUARD not in m and LISTED not in m for m in rendered(cluster, "triage"))  # not its scope
    finally:
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(10) == 0


def test_a_sigkill_between_a_read_and_its_save_loses_no_notice(cluster: FakeCluster, tmp_path: Path) -> None:
    kubeconfig = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
    cluster.script("coder", [Hang()], [Hang()])
    cluster.script("triage", [Pick("go")])
    cluster.script("reviewer", [Pick("approve")])
    first = Serve(kubeconfig, tmp_path / "state", instance_harness=cluster.instance_harness_url)
    run_id = first.call("POST", "/runs", json={"workflow": read_document(NOTICES)}).json()["runId"]
    name = sandbox_name(run_id, "F-1")
    cluster.list_kill(name, agent="", peak="1.1Gi", limit="2Gi")
    wait_until(lambda: cluster.harness_read(lambda core: core.reads.get(name, 0)) >= 1, timeout=30,
               what="the coder's read of the list")
    first.proc.send_signal(signal.SIGKILL)  # at once: the save that keeps the raise may not have happened yet
    first.proc.wait(10)
    with sqlite3.connect(tmp_path / "state" / "state.db") as db:
        (blob,) = db.execute("SELECT blob FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    saved = json.loads(blob)
    ledger = saved["ledger"]
    source = f"F-1|{kill_id(cluster, name)}"
    ledgered = source in ledger["seen"]
    pending = any(e["source"] == source for e in ledger["pending"])  # raised and saved, not yet admitted
    turn = saved.get("turn") or {}
    unread = not turn.get("heard") and any(e["source"] == source for e in turn.get("carried") or [])
    sent_before = [m for m in rendered(cluster, "coder") if LISTED in m]
    admitted_before = len(rendered(cluster, "coder"))
    second = Serve(kubeconfig, tmp_path / "state", instance_harness=cluster.instance_harness_url)
    try:
        # The restored Turn is admitted again (after its old Submission is aborted) and hangs until its
        # model picks: pick only once that admission is in, never on the old Submission.
        wait_until(lambda: len(rendered(cluster, "coder")) > admitted_before, timeout=30, what="the re-admission")
        go(cluster, "coder", "finish")
        wait_until(lambda: second.call("GET", f"/runs/{run_id}").json().get("status") == "done", timeout=30,
                   what="the restored run done")
        carried = [m for m in rendered(cluster, "coder") + rendered(cluster, "reviewer") if LISTED in m]
        # Every point the SIGKILL can land on has its rule (ADR-0062), and each is checked where it landed:
        if not ledgered or pending:
            # before the raise was saved (the list still holds the kill, read again), or raised and saved but
            # not yet admitted (the restored ledger still holds it): delivered once after the restart
            assert len(carried) == 1
        elif unread and not sent_before:
            # its admission was ledgered and never reached the Harness: the restored Turn's re-admission
            # carries it, once
            assert len(carried) == 1 and LISTED in rendered(cluster, "coder")[-1]
        elif unread:
            # ledgered, taken by the Harness (it rendered it: answered 200), its 200 not saved before the kill:
            # judged by what the Harness holds (CONTRACTS §3) — the restored Turn's abort finds its Submission
            # running, so it was heard and is never told again
            assert carried == sent_before and len(carried) == 1
        else:
            # its admission was ledgered and heard: delivered, so the restart raises it no more — never twice
            assert carried == sent_before and len(carried) == 1
    finally:
        second.proc.send_signal(signal.SIGTERM)
        second.proc.wait(10)


def kill_id(cluster: FakeCluster, sandbox: str) -> str:
    listed = cluster.harness_read(lambda core: core.kills_of(sandbox))
    return str(listed[-1]["id"])
