"""Log lines: the context an actor binds on its thread (inherited by the actors it creates, carried onto
pool jobs), one JSON object per line or readable text, and a bearer token blanked should one slip in."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pykka
import pytest

from jr2_actors.shell import Shell, logs

log = logging.getLogger("jr2_actors.test_logs")


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    installed = logs.install(stream, level="debug", fmt="json")
    yield stream
    logs.uninstall(installed)


def records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


class Child(Shell):
    log_key = "workspace"

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def on_receive(self, message: Any) -> Any:
        log.info("child says %s", message)
        pool: ThreadPoolExecutor = message
        pool.submit(logs.carry(lambda: log.info("a pool job of the child"))).result(10)
        return None


class Parent(Shell):
    log_key = "run"

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.children: list[pykka.ActorRef[Any]] = []

    def on_receive(self, message: Any) -> Any:
        log.info("parent starts a child")
        child = Child.start("F-1")  # created on this actor's thread: it inherits the run's context
        self.children.append(child)
        return child


def test_an_actor_binds_its_context_and_its_children_and_pool_jobs_carry_it(json_lines: io.StringIO) -> None:
    parent = Parent.start("r-42")
    child = cast(pykka.ActorRef[Any], parent.ask("go", timeout=10))
    with ThreadPoolExecutor(1) as pool:
        child.ask(pool, timeout=10)
        pool.submit(lambda: log.info("a pool job of nobody")).result(10)
    log.info("the test's own line")
    lines = {r["message"]: r for r in records(json_lines) if r["logger"] == log.name}
    assert {k: lines["parent starts a child"].get(k) for k in logs.FIELDS} == {
        "run": "r-42", "workspace": None, "agent": None, "actor": "Parent"}
    said = next(r for m, r in lines.items() if m.startswith("child says"))
    assert (said["run"], said["workspace"], said["actor"]) == ("r-42", "F-1", "Child")
    job = lines["a pool job of the child"]
    assert (job["run"], job["workspace"], job["actor"]) == ("r-42", "F-1", "Child")
    assert not {"run", "workspace", "actor"} & set(lines["a pool job of nobody"])  # no context leaks to a pool
    assert not {"run", "workspace", "actor"} & set(lines["the test's own line"])
    child.stop(block=True, timeout=10)
    parent.stop(block=True, timeout=10)


def test_json_lines_carry_level_time_thread_and_the_exception() -> None:
    stream = io.StringIO()
    installed = logs.install(stream, level="info", fmt="json")
    try:
        logs.bind({"run": "r-1", "actor": "RunActor", "ignored": "x"})
        try:
            raise RuntimeError("boom with Bearer abc.def-ghi")
        except RuntimeError:
            log.exception("it failed; the header was %s", "Authorization: Bearer s3cr3t-t0ken")
        log.debug("below the level")
    finally:
        logs.bind({})
        logs.uninstall(installed)
    (doc,) = records(stream)
    assert doc["level"] == "ERROR" and doc["logger"] == log.name and doc["time"].endswith("Z")
    assert doc["run"] == "r-1" and doc["actor"] == "RunActor" and "ignored" not in doc
    assert doc["thread"] == threading.current_thread().name
    assert "s3cr3t-t0ken" not in stream.getvalue() and "abc.def-ghi" not in stream.getvalue()
    assert doc["message"].endswith("Bearer [redacted]")
    assert "RuntimeError: boom with Bearer [redacted]" in doc["exception"]


def test_text_lines_stay_readable_with_the_context_in_brackets() -> None:
    stream = io.StringIO()
    installed = logs.install(stream, level="info", fmt="text")
    try:
        log.info("no context here")
        logs.bind({"run": "r-7", "workspace": "F-1", "actor": "WorkspaceActor"})
        log.warning("placing: %s", "0/1 nodes are available")
    finally:
        logs.bind({})
        logs.uninstall(installed)
    first, second = stream.getvalue().splitlines()
    assert first.endswith(f" INFO {log.name}: no context here")
    assert second.endswith(f" WARNING {log.name} [run=r-7 workspace=F-1 actor=WorkspaceActor]: "
                           "placing: 0/1 nodes are available")


def test_install_refuses_an_unknown_format_and_uninstall_restores_the_level() -> None:
    root = logging.getLogger()
    before = root.level
    with pytest.raises(ValueError, match="yaml"):
        logs.install(io.StringIO(), level="info", fmt="yaml")
    installed = logs.install(io.StringIO(), level="debug", fmt="text")
    assert root.level == logging.DEBUG
    logs.uninstall(installed)
    assert root.level == before and installed[0] not in root.handlers


def test_the_logging_options_also_follow_the_command_as_the_images_entry_point_needs() -> None:
    from jr2_actors.cli import build_parser

    parser = build_parser()
    serve = ["serve", "--namespace", "jr2", "--state-dir", "/tmp/x"]  # ENTRYPOINT ["jr2-actors", "serve"]
    after = parser.parse_args([*serve, "--log-format", "json", "--log-level", "INFO"])
    assert (after.log_format, after.log_level) == ("json", "info")
    before = parser.parse_args(["--log-format", "json", *serve])
    assert (before.log_format, before.log_level) == ("json", None)  # None: the command's own default
    neither = parser.parse_args(serve)
    assert (neither.log_format, neither.log_level) == ("text", None)
