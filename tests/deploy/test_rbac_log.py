"""The Role in manifests/ against every request the orchestrator makes, both ways (issue 12): the demo's
whole run — two runs, a wait for capacity, Turns, teardowns — on the fake cluster, and its request log run
through the Role's rules. A new kind of request cannot land without its permission, and a permission
nothing in the demo uses must say here why it stays."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from jr2_actors.commands.demo import demo_cluster, play
from jr2_actors.fake.rbac import Grant, audit, describe
from jr2_actors.orchestrator import Orchestrator
from tests.support.manifests import manifest_role

# The one place a grant the demo's requests do not use may stay, each with its reason: a request the code
# makes on a path the demo does not take, or a kind issue 12 grants for what the contract describes.
# Used on paths whose timing the demo does not fix: the demo may or may not take them.
MAY_GO_UNUSED: dict[Grant, str] = {
    Grant("core.jr2.dev", "sandboxes", "patch"): "the Lease's renewal (ADR-0064: the first within a minute of the "
                                                 "write, at random; the demo may be over sooner) and the apply of a "
                                                 "restored run",
    Grant("core.jr2.dev", "sandboxes", "get"): "workspace/actor.py reads one by name when its create meets a name "
                                               "already taken, before a delete whose write's answer was lost, and "
                                               "when a delete's version moved unseen",
}
# Granted for what the contract describes, used by no code yet: used, they must leave this list.
KEPT_UNUSED: dict[Grant, str] = {
    Grant("core.jr2.dev", "repos", "get"): "issue 12: Repo CRs for fetch asks (ADR-0053); no code reads a Repo yet",
    Grant("core.jr2.dev", "repos", "list"): "issue 12: as repos get",
    Grant("core.jr2.dev", "repos", "watch"): "issue 12: as repos get",
    Grant("core.jr2.dev", "repos", "create"): "issue 12: no code writes a Repo yet",
    Grant("core.jr2.dev", "repos", "patch"): "issue 12: no code writes a Repo yet",
    Grant("", "secrets", "get"): "issue 12; nothing reads a token Secret back yet",
    Grant("", "secrets", "delete"): "issue 12; today the token Secret goes with its Sandbox (owner reference)",
}


@pytest.mark.slow
def test_every_request_of_the_demo_is_allowed_and_every_grant_is_used_or_named(tmp_path: Path) -> None:
    with demo_cluster() as cluster:
        orchestrator = Orchestrator(cluster.client(), state_dir=str(tmp_path / "state"),
                                    signing_key=cluster.signing_key, instance_harness=cluster.instance_harness_url)
        with orchestrator:
            status = play(cluster, orchestrator, io.StringIO(), threading.Event())
        assert status is not None and status["status"] == "done"
        log = cluster.requests()

    assert any(r["watch"] for r in log) and any(r["method"] == "DELETE" for r in log)
    result = audit(manifest_role(), log)
    assert not result.denied, "requests the Role refuses:\n" + describe(result.denied)
    unexplained = result.unused - set(KEPT_UNUSED) - set(MAY_GO_UNUSED)
    assert not unexplained, f"grants nothing used, named nowhere here: {sorted(map(str, unexplained))}"
    used_now = set(KEPT_UNUSED) - result.unused
    assert not used_now, f"named unused but now used (drop them from KEPT_UNUSED): {sorted(map(str, used_now))}"
