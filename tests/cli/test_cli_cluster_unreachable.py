"""Issue 19 item 5: while the watch has not listed (or fails), `status` and `runs` say that the cluster cannot
be reached — since when, and the last error in full — instead of a bare `placing`; once it answers, they
stop saying it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from jr2_actors.values.workflow import read_document
from tests.support import cli_process
from tests.support.api_on_fake import api_on_fake
from tests.support.waiting import wait_until
from tests.support.workflows import one_state

pytestmark = pytest.mark.slow
TOKEN = "unreachable-test-token-0123456789"


def jr2(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_process.jr2(*args, token=TOKEN)


def test_status_and_runs_say_the_cluster_cannot_be_reached_until_it_answers(tmp_path: Path) -> None:
    away = api_on_fake(tmp_path, TOKEN, before=lambda cluster: cluster.away(True, status=503), harness=False)
    with away as (url, cluster, orch):
        run_id = orch.submit(read_document(one_state("cut-off")))
        wait_until(lambda: "error" in ((orch.status(run_id) or {}).get("cluster") or {}), timeout=60,
                   what="status naming the cluster's error")
        doc = json.loads(jr2("status", run_id, "--server", url, "-o", "json").stdout)
        assert doc["cluster"]["reachable"] is False and doc["cluster"]["listed"] is False
        assert "503" in doc["cluster"]["error"] and doc["cluster"]["since"] and doc["cluster"]["failures"] >= 1
        status = jr2("status", run_id, "--server", url)
        assert status.returncode == 0, status.stderr
        assert "  the cluster cannot be reached: the Sandbox watch has not answered a list yet (for " \
            in status.stdout and "503" in status.stdout, status.stdout
        runs = jr2("runs", "--server", url)
        assert runs.stdout.startswith("the cluster cannot be reached: "), runs.stdout
        cluster.away(False)
        wait_until(lambda: "cluster" not in (orch.status(run_id) or {"cluster": 1}), timeout=60,
                   what="the watch listing once the cluster answers")
        assert "cannot be reached" not in jr2("status", run_id, "--server", url).stdout
