"""Issue 19 item 3: `status RUN -o wide` marks the path a run took — the states it entered, in order, kept
in RunStatus as `path` (and across a restore, in the run's blob) — in its state graph."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from jr2_actors.commands.lint import marked_graph
from jr2_actors.fake.harness.core import Pick
from jr2_actors.run.blob import snapshot
from jr2_actors.run.core import RunCore
from jr2_actors.values.workflow import parse_workflow, read_document
from tests.support.api_on_fake import api_on_fake
from tests.support.client_commands import TOKEN, jr2, one_line_exit_2

EXAMPLE = resources.files("jr2_actors").joinpath("examples/fix-and-review.yaml").read_text()


@pytest.mark.slow
def test_status_wide_marks_the_path_the_run_took_in_its_graph(tmp_path: Path) -> None:
    with api_on_fake(tmp_path, TOKEN) as (url, cluster, orch):
        cluster.script("coder", [Pick("finish")], [Pick("finish")])
        cluster.script("reviewer", [Pick("reject")], [Pick("approve")])
        run_id = orch.submit(read_document(EXAMPLE))
        final = orch.wait_finished(run_id, 60)
        assert final is not None and final["status"] == "done", final
        assert final["path"] == ["code", "review", "code", "review", "done"]
        wide = jr2("status", run_id[:6], "--server", url, "-o", "wide")  # a prefix names it too
        assert wide.returncode == 0, wide.stderr
        lines = wide.stdout.splitlines()
        assert "  path: code → review → code → review → done" in lines, wide.stdout
        for taken in ("    * code --finish--> review (2 times)", "    * review --reject--> code",
                      "    * review --approve--> done", "    * done: final done"):
            assert taken in lines, wide.stdout
        for not_taken in ("      code --dispute--> failed", "      code --after 3600s--> failed",
                          "      failed: final failed"):
            assert not_taken in lines, wide.stdout
        plain = jr2("status", run_id, "--server", url)
        assert plain.returncode == 0 and "path:" not in plain.stdout  # the graph only when asked for
        assert json.loads(jr2("status", run_id, "--server", url, "-o", "json").stdout)["path"][-1] == "done"
        one_line_exit_2(jr2("status", "r-000000000000", "--server", url, "-o", "wide"), "r-000000000000")
        one_line_exit_2(jr2("status", run_id, "--server", url, "-o", "wider"), "invalid choice")


def test_the_path_survives_a_restore_and_an_older_blob_restores_with_its_state() -> None:
    document = read_document(EXAMPLE)
    assert isinstance(document, dict)
    core = RunCore("r-0123456789ab", parse_workflow(document), document)
    core.path = ["code", "review", "code"]
    blob = snapshot(core)
    assert RunCore.restore(json.loads(json.dumps(blob)), 0.0, 0.0)[0].path == ["code", "review", "code"]
    older = {k: v for k, v in blob.items() if k not in ("path", "pathDropped")}
    assert RunCore.restore(older, 0.0, 0.0)[0].path == [core.state]


def test_a_long_path_says_how_many_entries_it_no_longer_holds() -> None:
    workflow = parse_workflow(read_document(EXAMPLE))
    lines = marked_graph(workflow, ["review", "code"], dropped=40)
    assert lines[0] == "  path: … (40 earlier) → review → code"
