"""Issue 19 item 8: a client command imports only what it needs, so it starts in a fraction of a second (the
figures are in docs/benchmarks.md, "Command start-up"; no test times it). Each command here runs in a fresh
interpreter, with good and bad input, and what it loaded is read off `sys.modules` once it is done."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

EXAMPLE = str(ROOT / "jr2_actors" / "examples" / "fix-and-review.yaml")
# What the orchestrator runs on: no client command needs them.
SERVER_SIDE = {"pykka", "peewee", "cheroot", "prometheus_client", "rich", "kubernetes", "cryptography"}

PROBE = """
import json, sys
import jr2_actors.cli as cli
try:
    code = cli.main(json.loads(sys.argv[1]))
except SystemExit as e:  # --help and argparse's own errors
    code = e.code
with open(sys.argv[2], "w") as f:
    json.dump({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}, f)
"""


def dead_server() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def loaded(tmp_path: Path, *argv: str) -> tuple[int, set[str], str]:
    """(exit code, top-level packages imported, stderr) of `jr2-actors ARGV` in a fresh interpreter."""
    out = tmp_path / "probe.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JR2_")} | {"JR2_INSTANCE_TOKEN": "t-0123456789"}
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), str(out)], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(out.read_text())
    return int(doc["code"]), set(doc["modules"]), proc.stderr


@pytest.mark.parametrize(("argv", "code", "also_absent"), [
    (("runs", "--help"), 0, {"requests", "yaml", "jsonschema"}),
    (("runs", "--bogus"), 2, {"requests", "yaml", "jsonschema"}),
    (("status", "r-0123", "--server", "{dead}"), 2, {"yaml", "jsonschema"}),
    (("submit", EXAMPLE, "--server", "{dead}"), 2, {"jsonschema"}),  # read, sent: the server checks it
    (("submit", "/no/such/workflow.yaml", "--server", "{dead}"), 2, {"requests", "jsonschema"}),
    (("wait", "r-0123", "--server", "{dead}"), 2, {"yaml", "jsonschema"}),
    (("lint", EXAMPLE), 0, {"requests"}),
    (("completion", "bash"), 0, {"requests", "yaml", "jsonschema"}),
])
def test_a_client_command_loads_none_of_the_server_side(tmp_path: Path, argv: tuple[str, ...], code: int,
                                                        also_absent: set[str]) -> None:
    dead = dead_server()
    got, modules, err = loaded(tmp_path, *(a.replace("{dead}", dead) for a in argv))
    assert got == code, err
    assert modules & (SERVER_SIDE | also_absent) == set(), sorted(modules & (SERVER_SIDE | also_absent))
    if code == 2:
        assert err.count("\n") == 1 or (err.startswith("jr2-actors: cannot reach") and "connection refused" in err), err


def test_the_shell_package_still_gives_its_names_on_first_use(tmp_path: Path) -> None:
    """`jr2_actors.shell` loads its names lazily (PEP 562); they are the same objects, and a wrong name is
    still an AttributeError."""
    script = ("import jr2_actors.shell as s, jr2_actors.shell.actor as a, jr2_actors.shell.timers as t\n"
              "assert s.Shell is a.Shell and s.Timers is t.Timers\n"
              "try:\n    s.Nothing\nexcept AttributeError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "has no attribute 'Nothing'" in proc.stdout, proc.stderr
