"""Admission control (api/budget.py): serve refuses a run with 503 + Retry-After before one more could take it
past its budget of memory, threads or live runs, counts each refusal, and takes the run again once runs
finish; the limits come from the flags, the environment or the pod's cgroup; the CLI says the 503 in one line
and sends the submit again after its Retry-After, then exits 2."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
import requests
from prometheus_client import CollectorRegistry, generate_latest

from jr2_actors.api.app import Api
from jr2_actors.api.budget import Budget, BudgetError, Limits, Usage, configured_limits, read_cgroup_limit
from jr2_actors.api.server import ApiServer
from jr2_actors.values.run_ids import Keyed
from tests.support.backends import QuietBackend
from tests.support.cli_process import jr2
from tests.support.workflows import one_state

TOKEN = "budget-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MIB = 2**20


class Runs(QuietBackend):
    """A Backend whose live runs are a set: a submit adds one, `finish` ends them."""

    def __init__(self) -> None:
        self.live: set[str] = set()
        self.made = 0

    def submit(self, document: object, run_input: Mapping[str, Any] | None, *,
               keyed: Keyed | None = None) -> str:
        self.made += 1
        run_id = f"r-{self.made:012x}"
        self.live.add(run_id)
        return run_id


class Measured:
    """What the process uses, as a test sets it."""

    def __init__(self, rss: int, threads: int) -> None:
        self.now = Usage(rss, threads)

    def __call__(self) -> Usage:
        return self.now


@pytest.fixture
def served() -> Iterator[tuple[str, Runs, Budget, CollectorRegistry]]:
    backend, registry = Runs(), CollectorRegistry()
    # 100 MiB, 85 % of it for the projection: 20 MiB at start and 10 MiB a run admit (85 - 20) / 10 = 6 runs.
    budget = Budget(Limits(memory_bytes=100 * MIB), live=lambda: len(backend.live), usage=Measured(20 * MIB, 10),
                    run_bytes=10 * MIB, registry=registry)
    server = ApiServer(Api(backend, TOKEN, budget=budget))
    server.start()
    try:
        yield server.url, backend, budget, registry
    finally:
        server.stop()


def post(url: str) -> requests.Response:
    return requests.post(url + "/runs", json={"workflow": {"name": "w"}}, headers=AUTH, timeout=30)


def refused(registry: CollectorRegistry, resource: str) -> float:
    text = generate_latest(registry).decode()
    line = next(x for x in text.splitlines() if x.startswith(f'jr2_runs_refused_total{{resource="{resource}"}}'))
    return float(line.rsplit(" ", 1)[1])


def test_past_the_budget_a_run_is_a_503_with_retry_after_and_taken_again_once_runs_finish(
        served: tuple[str, Runs, Budget, CollectorRegistry]) -> None:
    url, backend, budget, registry = served
    assert budget.capacity() == 6
    assert [post(url).status_code for _ in range(6)] == [201] * 6
    past = post(url)
    assert past.status_code == 503 and past.headers["Retry-After"] == "10"
    assert "memory budget" in past.json()["error"] and "7 live runs" in past.json()["error"]
    assert post(url).status_code == 503 and backend.made == 6  # nothing was taken
    assert refused(registry, "memory") == 2 and refused(registry, "threads") == 0
    backend.live.clear()  # the runs finish
    assert post(url).status_code == 201 and backend.made == 7
    text = generate_latest(registry).decode()
    assert 'jr2_budget_limit{resource="memory"} 1.048576e+08' in text and "jr2_budget_runs 6.0" in text
    assert 'jr2_budget_used{resource="runs"} 1.0' in text


def test_a_measure_over_the_projection_refuses_too_and_a_thread_or_run_limit_is_its_own() -> None:
    live: list[int] = [0]
    usage = Measured(10 * MIB, 10)
    budget = Budget(Limits(memory_bytes=100 * MIB, threads=100), live=lambda: live[0], usage=usage,
                    run_bytes=MIB, run_threads=4)
    assert budget.refusal() is None
    usage.now = Usage(90 * MIB, 10)  # the runs grew past what the projection counts
    assert (budget.refusal() or "").startswith("one more run could take serve past its memory budget")
    usage.now = Usage(10 * MIB, 10)
    live[0] = 19  # 10 + 19 × 4 + 4 = 90 threads > 85
    assert "thread budget" in (budget.refusal() or "")
    assert budget.refused == {"memory": 1, "threads": 1, "runs": 0}
    runs = Budget(Limits(runs=2), live=lambda: live[0], usage=usage)
    live[0] = 1
    assert runs.refusal() is None and runs.capacity() == 2
    live[0] = 2
    assert "--max-runs" in (runs.refusal() or "")
    assert Budget(Limits(), live=lambda: 10**6, usage=usage).refusal() is None  # no limit: no bound


@pytest.mark.parametrize(("files", "memory", "threads"), [
    ({"memory.max": "1073741824\n", "pids.max": "4096\n"}, 2**30, 4096),  # cgroup v2
    ({"memory.max": "max\n", "pids.max": "max\n"}, None, None),
    ({"memory/memory.limit_in_bytes": "9223372036854771712\n", "pids/pids.max": "max"}, None, None),  # v1, none
    ({"memory/memory.limit_in_bytes": "536870912\n"}, 512 * MIB, None),
    ({"memory.max": "12abc\n", "pids.max": "-1\n"}, None, None),  # not a count: no limit, said in the log
    ({"memory.max": "9" * 5000}, None, None),  # oversized
    ({"memory.max": "0"}, None, None),
    ({}, None, None),
])
def test_the_pods_limits_are_read_from_its_cgroup(tmp_path: Path, files: dict[str, str], memory: int | None,
                                                  threads: int | None) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert read_cgroup_limit("memory", str(tmp_path)) == memory
    assert read_cgroup_limit("threads", str(tmp_path)) == threads


def test_a_flag_beats_the_environment_which_beats_the_cgroup_and_a_bad_value_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "memory.max").write_text("1073741824")
    (tmp_path / "pids.max").write_text("1000")
    none: dict[str, str | None] = {"memory": None, "threads": None, "runs": None}
    assert configured_limits(none, {}, str(tmp_path)) == Limits(2**30, 1000, None)
    env = {"JR2_MAX_MEMORY": "900Mi", "JR2_MAX_RUNS": "5000"}
    assert configured_limits(none, env, str(tmp_path)) == Limits(900 * MIB, 1000, 5000)
    assert configured_limits({**none, "memory": "2Gi", "threads": "64"}, env, str(tmp_path)) == Limits(
        2 * 2**30, 64, 5000)
    for flags, environ, said in (({**none, "memory": "lots"}, {}, "--max-memory: 'lots' is not a size"),
                                 ({**none, "threads": "-3"}, {}, "--max-threads: '-3' is not a whole number"),
                                 (none, {"JR2_MAX_RUNS": "0"}, "JR2_MAX_RUNS: '0' is not a whole number"),
                                 (none, {"JR2_MAX_MEMORY": "0Mi"}, "JR2_MAX_MEMORY: '0Mi' is not a size"),
                                 ({**none, "runs": "9" * 300}, {}, "--max-runs: '999")):
        with pytest.raises(BudgetError) as e:
            configured_limits(flags, environ, str(tmp_path))
        assert str(e.value).startswith(said) and "\n" not in str(e.value)


def test_serve_refuses_a_bad_limit_in_one_line_and_exit_2(tmp_path: Path) -> None:
    out = jr2("serve", "--fake-cluster", "--state-dir", str(tmp_path / "s"), "--max-memory", "lots", timeout=60)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "--max-memory: 'lots' is not a size" in out.stderr


class AtBudget(http.server.BaseHTTPRequestHandler):
    """Answers POST /runs 503 + Retry-After `refusals` times, then 201; records each request's key."""

    refusals = 0
    keys: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        AtBudget.keys.append(self.headers.get("Idempotency-Key", ""))
        if len(AtBudget.keys) <= AtBudget.refusals:
            code, body, extra = 503, {"error": "one more run could take serve past its memory budget"}, "0"
        else:
            code, body, extra = 201, {"runId": "r-000000000001"}, ""
        data = json.dumps(body).encode()
        self.send_response(code)
        if extra:
            self.send_header("Retry-After", extra)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.slow
@pytest.mark.parametrize(("refusals", "code"), [(1, 0), (3, 2)])
def test_the_cli_says_the_503_in_one_line_sends_it_again_after_retry_after_then_exits_2(
        tmp_path: Path, refusals: int, code: int) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(one_state("cli"))
    AtBudget.refusals, AtBudget.keys = refusals, []
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), AtBudget) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            out = jr2("submit", str(path), "--server", f"http://127.0.0.1:{server.server_address[1]}", "--json",
                      token=TOKEN)
        finally:
            server.shutdown()
    assert out.returncode == code, out.stderr
    keys = AtBudget.keys
    assert len(keys) == min(refusals + 1, 3) and len(set(keys)) == 1  # one key for every try: never a second run
    said = out.stderr.strip().splitlines()
    assert said[0].endswith("answered 503: one more run could take serve past its memory budget; trying again in "
                            "0s (2 of 3, the same Idempotency-Key)"), said
    if code == 0:
        assert json.loads(out.stdout) == {"runId": "r-000000000001"} and len(said) == 1
    else:
        assert len(said) == 3 and said[-1].endswith("answered 503: one more run could take serve past its memory "
                                                    "budget") and out.stdout == ""
