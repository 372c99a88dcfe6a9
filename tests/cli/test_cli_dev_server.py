"""`jr2-actors serve --fake-cluster`, the dev server in one command, and the README's recipe for it run
exactly as the README writes it (issue 19 item 1); `serve` waiting for a kubeconfig still being written."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.sim.serve_process import LogTail
from tests.support.readme import clean_env, readme_block
from tests.support.serving import KEY, jr2, serve_env

pytestmark = pytest.mark.slow


def test_the_readme_dev_server_recipe_runs_as_written(tmp_path: Path) -> None:
    """From a folder outside the repository (the example comes from the package), leaving nothing behind."""
    script = readme_block("dev-server-recipe")
    assert "serve --fake-cluster" in script
    temp, cwd = tmp_path / "tmp", tmp_path / "elsewhere"
    temp.mkdir()
    cwd.mkdir()
    out = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=clean_env(temp), capture_output=True,
                         text=True, timeout=240, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"^r-\S+ done$", out.stdout, re.M), out.stdout
    assert re.search(r"^RUN +WORKFLOW .*\nr-\S+ +fix-and-review +done +done ", out.stdout, re.M), out.stdout
    assert "Traceback" not in out.stderr, out.stderr
    assert list(temp.iterdir()) == [] and list(cwd.iterdir()) == []  # no state folder, no token left behind


class DevServer:
    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", "serve", "--fake-cluster", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=clean_env(tmp_path))
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.stdout = LogTail(self.proc.stdout, re.compile(r"^Ctrl-C stops it\."), "dev-server-out")
        self.stderr = LogTail(self.proc.stderr, None, "dev-server-log")  # read to its end, no line waited for
        self.out = self.stdout.lines

    def field(self, name: str) -> str:
        found = re.search(rf"^  {name}\s+(?:\. )?(\S+)", "".join(self.out), re.M)
        assert found, self.out
        return found.group(1)


def test_the_dev_server_prints_its_url_and_token_file_and_serves_the_client_commands(tmp_path: Path) -> None:
    dev = DevServer(tmp_path)
    try:
        assert dev.stdout.ready(60), dev.out
        url, token_file, state = dev.field("API"), dev.field("token"), dev.field("state")
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url) and not url.endswith(":0")  # the port chosen
        assert Path(state).parent == tmp_path and Path(token_file).parent == Path(state)  # a fresh temp folder
        assert os.stat(token_file).st_mode & 0o077 == 0
        env = clean_env(tmp_path) | {"JR2_SERVER": url, "JR2_INSTANCE_TOKEN": Path(token_file).read_text().strip()}
        runs = jr2("runs", env=env)
        assert runs.returncode == 0, runs.stderr
    finally:
        dev.proc.send_signal(signal.SIGINT)
        assert dev.proc.wait(30) == 130  # issue 19 item 2: Ctrl-C leaves every command with 130
    assert not Path(state).exists()  # the folder it made is gone with it


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_serve_leaves_with_130_on_ctrl_c_and_0_on_sigterm_having_stopped_cleanly(
        tmp_path: Path, sig: signal.Signals, code: int) -> None:
    """Issue 19 item 2: Ctrl-C is 130 as in every command; SIGTERM is the clean stop Kubernetes asks of a pod,
    0. Either way the stop is the same: logged at INFO, nothing left behind."""
    dev = DevServer(tmp_path)
    assert dev.stdout.ready(60), dev.out
    state = dev.field("state")
    dev.proc.send_signal(sig)
    assert dev.proc.wait(30) == code
    err = dev.stderr.whole(30)
    assert "Traceback" not in err and " INFO jr2_actors.serve: stopped" in err, err
    assert "restores every live run" not in err and "its temp folder" in err, err  # the folder goes: no restart
    assert not Path(state).exists()


def test_a_kept_state_folder_is_told_what_a_start_on_it_does(tmp_path: Path) -> None:
    """The embedded cluster ends with serve: its stop says a start on the folder keeps the finished runs and
    fails the live ones (not that it restores them), names the way that keeps them, and takes its token."""
    state = tmp_path / "state"
    dev = DevServer(tmp_path, "--state-dir", str(state))
    assert dev.stdout.ready(60), dev.out
    assert (state / "token").exists() and (state / "env").exists()
    dev.proc.send_signal(signal.SIGTERM)
    assert dev.proc.wait(30) == 0
    err = dev.stderr.whole(30)
    assert "Traceback" not in err and "restores every live run" not in err, err
    assert (f"the embedded fake cluster went with it, so a start on {state} keeps the finished runs, but a live "
            "run whose Workspace was placed ends failed (its Sandbox is gone)") in err, err
    assert "jr2-actors fake-cluster --pick-first --kubeconfig-out F, then serve --kubeconfig F" in err, err
    assert not (state / "token").exists() and not (state / "env").exists()  # this start's secret and port
    assert (state / "state.db").exists()  # the folder itself is the user's: kept


@pytest.mark.parametrize(("args", "says"), [
    (("--kubeconfig", "k"), "--kubeconfig has no meaning with --fake-cluster"),
    (("--listen", "127.0.0.1:99999"), "not HOST:PORT"),
    (("--state-dir", "/proc/no/such"), "--state-dir /proc/no/such: cannot create it"),
    (("--state-dir", "/etc/passwd"), "--state-dir /etc/passwd: cannot create it"),  # a file: no hang, no traceback
])
def test_bad_dev_server_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    out = jr2("serve", "--fake-cluster", *args, env=clean_env(tmp_path))
    assert out.returncode == 2, out
    assert says in out.stderr and out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr, out.stderr


def test_serve_without_a_namespace_says_so(tmp_path: Path) -> None:
    out = jr2("serve", "--state-dir", str(tmp_path / "s"))
    assert out.returncode == 2 and out.stderr.strip() == \
        "jr2-actors: --namespace is required (or --fake-cluster, the dev server)", out.stderr


def test_serve_waits_for_a_kubeconfig_being_written(tmp_path: Path) -> None:
    """Also: with no --log-level, serve logs its start and stop at INFO (its default)."""
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jr2_actors", "serve", "--namespace", "jr2", "--state-dir", str(tmp_path / "state"),
         "--kubeconfig", str(kubeconfig), "--kubeconfig-wait", "120", "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=serve_env(TMPDIR=str(tmp_path)))
    lines: list[str] = []
    waiting, serving = threading.Event(), threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "waiting up to 120s for --kubeconfig" in line:
                waiting.set()
            if "serving the API on" in line:
                serving.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert waiting.wait(60), lines
        with FakeCluster(signing_key=KEY.encode(), bookmark_interval=None) as cluster:
            cluster.write_kubeconfig(str(kubeconfig))
            assert serving.wait(60), lines
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:  # once in a full suite: its log is what can explain it
                raise AssertionError("serve did not exit within 30 s of its SIGTERM:\n" + "".join(lines)) from None
            assert code == 0, lines
    finally:
        if proc.poll() is None:
            proc.kill()
    assert any(" INFO jr2_actors.serve: serving the API on" in line for line in lines), lines
    assert any(" INFO jr2_actors.serve: stopping:" in line for line in lines), lines


def test_serve_gives_up_on_a_kubeconfig_never_written(tmp_path: Path) -> None:
    out = jr2("serve", "--namespace", "jr2", "--state-dir", str(tmp_path / "s"), "--kubeconfig",
              str(tmp_path / "never"), "--kubeconfig-wait", "0.3")
    assert out.returncode == 2, out
    last = out.stderr.strip().splitlines()
    assert len(last) == 2 and "waiting up to 0.3s" in last[0] and "does not exist" in last[1], out.stderr
    assert not (tmp_path / "s").exists()
