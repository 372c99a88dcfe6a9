"""Issue 19 item 5: every log line keeps its cause whole. A chained error names its cause last (urllib3's
`(Caused by NewConnectionError(…: [Errno 111] Connection refused))`); a long one used to be cut at 300
characters of its start, mid-word, so the line ended before saying why."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from jr2_actors.values.errors import ELISION, one_line
from tests.support.serving import serve_env

CAUSE = "[Errno 111] Connection refused"


def test_a_long_error_loses_words_from_its_middle_never_its_cause() -> None:
    text = "HTTPSConnectionPool(host='127.0.0.1', port=1): Max retries exceeded with url: " + "/segment" * 60 \
        + f" (Caused by NewConnectionError('Failed to establish a new connection: {CAUSE}'))"
    shown = one_line(text)
    assert len(shown) <= 300 and shown.endswith(f"{CAUSE}'))") and ELISION in shown
    head, tail = shown.split(ELISION)
    assert text.startswith(head) and text.endswith(tail)
    assert text[len(head)] == " " and text[-len(tail) - 1] == " "  # cut between words, never inside one
    assert one_line("short\n  and\tspread") == "short and spread"  # what fits is only joined onto one line


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_serve_logs_a_refused_api_server_with_its_cause_whole(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{dead_port()}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: not-a-real-token}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    namespace = "jr2-" + "n" * 59  # the longest a namespace can be: the URL in the error is long too
    proc = subprocess.Popen([sys.executable, "-m", "jr2_actors", "serve", "--namespace", namespace, "--state-dir",
                             str(tmp_path / "state"), "--kubeconfig", str(kubeconfig), "--listen", "127.0.0.1:0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env=serve_env(TMPDIR=str(tmp_path)))
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "Max retries exceeded" in line:
                seen.set()
        seen.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert seen.wait(60), "".join(lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    failed = next(line for line in lines if "Max retries exceeded" in line)
    assert failed.rstrip().endswith(f'{CAUSE}"))'), failed
