"""The command line's options, as a user meets them: each bad input is one line on stderr and exit 2 —
never a traceback, never a hang — and a stop at any point leaves no temp folder with keys behind."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jr2_actors.cli import build_parser
from tests.support.cli_process import jr2
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return jr2(*args, env=env)


@pytest.fixture
def tmpdir_env(tmp_path: Path) -> dict[str, str]:
    """TMPDIR inside the test's folder, so what the command leaves behind is seen (and nowhere else)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return {**os.environ, "TMPDIR": str(tmp)}


def leftovers(env: dict[str, str]) -> list[str]:
    return sorted(os.listdir(env["TMPDIR"]))


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def running(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """The command as a subprocess, killed if a failed check leaves it running. It starts with SIGINT at its
    default, as a terminal's foreground job does: a suite started in the background (CI, `cmd &`) ignores
    SIGINT, the child inherits that, and a SIGINT sent before the command installs its handler would then be
    ignored by the kernel — a rule of the runner's shell, not of the command under test."""
    inherited_ignore = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=_interruptible if inherited_ignore else None)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.mark.parametrize("args", [
    ["fake-cluster", "--port", "-1", "--kubeconfig-out", "K"],
    ["fake-cluster", "--port", "65536", "--kubeconfig-out", "K"],
    ["fake-cluster", "--port", "http", "--kubeconfig-out", "K"],
    ["fake-cluster", "--namespace", "Not_A_Namespace", "--kubeconfig-out", "K"],
    ["fake-cluster", "--namespace", "x" * 64, "--kubeconfig-out", "K"],
    ["fake-cluster", "--bookmark-seconds", "0", "--kubeconfig-out", "K"],
    ["fake-cluster", "--bookmark-seconds", "-5", "--kubeconfig-out", "K"],
    ["fake-cluster", "--bookmark-seconds", "inf", "--kubeconfig-out", "K"],
    ["fake-cluster", "--kubeconfig-out", "/nonexistent-folder/kubeconfig"],
    ["fake-cluster"],
    ["watch", "--namespace", "jr2", "--stall-seconds", "0"],
    ["watch", "--namespace", "jr2", "--stall-seconds", "-1"],
    ["watch", "--namespace", "jr2", "--stall-seconds", "nan"],
    ["watch", "--namespace", "UPPER"],
    ["watch"],
    ["--log-level", "loud", "watch", "--namespace", "jr2"],
    ["no-such-command"],
])
def test_a_bad_input_is_one_line_and_exit_2(args: list[str], tmp_path: Path, tmpdir_env: dict[str, str]) -> None:
    args = [str(tmp_path / "kubeconfig") if a == "K" else a for a in args]
    result = cli(*args, env=tmpdir_env)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "kubeconfig").exists()
    assert leftovers(tmpdir_env) == []


def test_a_port_in_use_is_one_line_and_exit_2(taken_port: int, tmp_path: Path, tmpdir_env: dict[str, str]) -> None:
    result = cli("fake-cluster", "--port", str(taken_port), "--kubeconfig-out", str(tmp_path / "kc"), env=tmpdir_env)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"127.0.0.1:{taken_port}" in line and "in use" in line
    assert leftovers(tmpdir_env) == []
    assert not (tmp_path / "kc").exists()


def test_an_unwritable_kubeconfig_out_is_one_line_and_exit_2(tmp_path: Path, tmpdir_env: dict[str, str]) -> None:
    target = tmp_path / "a-folder"
    target.mkdir()
    result = cli("fake-cluster", "--kubeconfig-out", str(target), env=tmpdir_env)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert leftovers(tmpdir_env) == []


def test_log_level_takes_lower_and_upper_case() -> None:
    parser = build_parser()
    assert parser.parse_args(["--log-level", "debug", "watch", "--namespace", "a"]).log_level == "debug"
    assert parser.parse_args(["--log-level", "INFO", "watch", "--namespace", "a"]).log_level == "info"


def test_every_option_has_help_text_naming_its_default_or_that_it_is_required() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in [("", parser), *subparsers.choices.items()]:
        for action in sub._actions:
            if not action.option_strings or action.dest in ("help", "version"):
                continue
            assert action.help, f"{name} {action.option_strings} has no help"
            assert "default" in action.help or "required" in action.help, f"{name} {action.option_strings}"


@pytest.mark.parametrize("when", [pytest.param("at once", id="at once"), "while starting", "once serving"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_at_any_point_leaves_no_temp_folder(when: str, sig: signal.Signals, tmp_path: Path,
                                                   tmpdir_env: dict[str, str]) -> None:
    with running(["fake-cluster", "--kubeconfig-out", str(tmp_path / "kc")], tmpdir_env) as proc:
        if when == "while starting":
            wait_until(lambda: leftovers(tmpdir_env) != [] or proc.poll() is not None, timeout=30,
                       what="the temp folder")
        elif when == "once serving":
            wait_until(lambda: (tmp_path / "kc").exists(), timeout=30, what="the kubeconfig")
        proc.send_signal(sig)
        code = proc.wait(30)
    _, err = proc.communicate()
    assert leftovers(tmpdir_env) == []
    if when == "at once" and "Fatal Python error: init_import_site" in err:
        return  # the signal came before Python itself was up: none of our code ran, and nothing was left
    assert "Traceback" not in err
    clean = 130 if sig == signal.SIGINT else 0  # issue 19 item 2: Ctrl-C is 130, SIGTERM a pod's clean stop
    assert code in (clean, -sig) if when == "at once" else code == clean  # at once: perhaps before Python is up


def test_watch_stops_cleanly_on_a_signal_while_starting(tmp_path: Path, tmpdir_env: dict[str, str]) -> None:
    from jr2_actors.fake.cluster import FakeCluster

    with FakeCluster(operator=False, harness=False) as cluster:
        cfg = cluster.write_kubeconfig(str(tmp_path / "kubeconfig"))
        with running(["watch", "--namespace", "jr2", "--kubeconfig", cfg], tmpdir_env) as proc:
            wait_until(lambda: cluster.requests() != [], timeout=30, what="the watch's first request")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 130
        _, err = proc.communicate()
    assert "Traceback" not in err
    assert leftovers(tmpdir_env) == []
