"""The Role in manifests/ against every request the orchestrator makes, both ways (issue 12): a real run
of the actors on the fake cluster — the WatchActor, a Workspace taken placing → running → released and
one released while it waited — and its request log run through the Role's rules. A new kind of request
cannot land without its permission, and a permission nothing uses must say here why it stays."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from jr2_actors.actorkit import Timers
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.fake.operator.core import Node
from jr2_actors.rbac import Grant, audit, describe
from jr2_actors.watch.actor import WatchActor
from jr2_actors.workflow import RepoSlot, WorkspaceDef
from jr2_actors.workspace.actor import Release, WorkspaceActor
from jr2_actors.workspace.core import FeedLine, Running
from jr2_actors.workspace.manifest import WorkspaceSpec
from tests.manifests import manifest_role, unit_namespace
from tests.probes import Inbox
from tests.waiting import wait_until

# The one place a grant no request uses may stay, each with its reason. Issue 12 lists these verbs; no
# code makes these requests yet, so each waits for the demo's request log (the lead decides then).
KEPT_UNUSED: dict[Grant, str] = {
    Grant("core.jr2.dev", "sandboxes", "get"): "issue 12; nothing reads one Sandbox by name yet (the watch lists)",
    Grant("core.jr2.dev", "repos", "get"): "issue 12: Repo CRs for fetch asks (ADR-0053); no code reads a Repo yet",
    Grant("core.jr2.dev", "repos", "list"): "issue 12: as repos get",
    Grant("core.jr2.dev", "repos", "watch"): "issue 12: as repos get",
    Grant("core.jr2.dev", "repos", "create"): "issue 12: no code writes a Repo yet",
    Grant("core.jr2.dev", "repos", "patch"): "issue 12: no code writes a Repo yet",
    Grant("", "secrets", "get"): "issue 12; nothing reads a token Secret back yet",
    Grant("", "secrets", "delete"): "issue 12; today the token Secret goes with its Sandbox (owner reference)",
}


@pytest.mark.slow
def test_every_request_of_a_real_run_is_allowed_and_every_grant_is_used_or_named() -> None:
    namespace = unit_namespace()
    with FakeCluster(namespace=namespace, nodes=[Node("n1", 1000, 4 * 2**30)], start_seconds=0.05,
                     long_poll=0.2) as cluster:
        client = cluster.client()
        watch = WatchActor.start(client, stall_bound=10)
        pool = ThreadPoolExecutor(4, thread_name_prefix="jr2-ws-io")
        timers = Timers(name="jr2-test-rbac-timers")
        try:
            definition = WorkspaceDef("F-1", cpu="1", memory="1Gi", branch="feat/x",
                                      repos=(RepoSlot("app", "https://example.test/app.git", "main"),))
            refs: dict[str, Any] = {}
            inboxes = {run: Inbox() for run in ("run-a", "run-b")}
            for run, inbox in inboxes.items():  # one node: run-a is placed, run-b waits for capacity
                spec = WorkspaceSpec(run_id=run, workflow="wf", definition=definition, image="jr2-sandbox:dev")
                refs[run] = WorkspaceActor.start(spec, client=client, watch=watch, parent=inbox,
                                                 signing_key=cluster.signing_key, kube_pool=pool, attach_pool=pool,
                                                 timers=timers, seed=1,
                                                 lease_interval=0.2)
                if run == "run-a":
                    inbox.wait_for(lambda ms: any(isinstance(m, Running) for m in ms), what="run-a running")
            inboxes["run-b"].wait_for(lambda ms: any(isinstance(m, FeedLine) for m in ms), what="run-b placing")
            wait_until(lambda: sum(r["contentType"] == "application/merge-patch+json"
                                   for r in cluster.requests()) >= 2, what="Lease renewals")
            refs["run-b"].tell(Release("run-stopped"))  # delete what never ran
            refs["run-a"].tell(Release("teardown"))
            wait_until(lambda: not any(ref.is_alive() for ref in refs.values()), what="both released")
        finally:
            watch.stop(block=True, timeout=10)
            pool.shutdown(wait=True)
            timers.stop()
        log = cluster.requests()

    assert any(r["watch"] for r in log) and any(r["method"] == "GET" and not r["watch"] for r in log)
    assert sum(r["method"] == "DELETE" for r in log) == 2  # what never ran, and the teardown
    result = audit(manifest_role(), log)
    assert not result.denied, "requests the Role refuses:\n" + describe(result.denied)
    assert result.unused == set(KEPT_UNUSED), (
        f"grants nothing used, not named in KEPT_UNUSED: {sorted(map(str, result.unused - set(KEPT_UNUSED)))}; "
        f"named but now used (drop them from KEPT_UNUSED): {sorted(map(str, set(KEPT_UNUSED) - result.unused))}")
