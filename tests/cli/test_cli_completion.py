"""`jr2-actors completion bash|zsh` (issue 19 item 8): a script made from the parser, which bash runs."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support.cli_process import jr2


def complete(script: str, *words: str) -> list[str]:
    """What bash offers for the last of `words` (the command line typed so far) with `script` loaded."""
    line = " ".join(f"'{w}'" for w in ("jr2-actors", *words))
    out = subprocess.run(["bash", "-c", f'eval "$1"; COMP_WORDS=({line}); COMP_CWORD={len(words)}; _jr2_actors; '
                                        'printf "%s\\n" "${COMPREPLY[@]}"', "bash", script],
                         capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 0 and not out.stderr, out.stderr
    return out.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_and_each_commands_flags() -> None:
    out = jr2("completion", "bash")
    assert out.returncode == 0, out.stderr
    assert complete(out.stdout, "su") == ["submit"]
    assert complete(out.stdout, "runs", "--a") == ["--all"]
    assert "--since" in complete(out.stdout, "events", "--s") and "--server" in complete(out.stdout, "events", "--s")
    assert complete(out.stdout, "l") == ["lint"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_zsh_loads_it_through_bashcompinit_and_it_completes_as_in_bash() -> None:
    """No zsh on CI's machine: the script runs in bash with zsh's `autoload` and `bashcompinit` recorded, so
    what it asks of zsh is checked, and the completion function it defines is run as bashcompinit runs it."""
    out = jr2("completion", "zsh")
    assert out.returncode == 0, out.stderr
    zsh_only = 'autoload() { echo "autoload $*" >&2; }; bashcompinit() { echo bashcompinit >&2; }; '
    loaded = subprocess.run(["bash", "-c", zsh_only + 'eval "$1"; complete -p jr2-actors', "bash", out.stdout],
                            capture_output=True, text=True, timeout=30, check=False)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stderr.splitlines() == ["autoload -U +X bashcompinit", "bashcompinit"]
    assert loaded.stdout.strip() == "complete -o default -F _jr2_actors jr2-actors"
    stubbed = "autoload() { :; }; bashcompinit() { :; }; " + out.stdout
    assert complete(stubbed, "su") == ["submit"]
    assert complete(stubbed, "runs", "--a") == ["--all"]


def test_an_unknown_shell_is_one_line_and_exit_2() -> None:
    out = jr2("completion", "fish")
    assert out.returncode == 2 and "invalid choice: 'fish'" in out.stderr and out.stderr.count("\n") == 1
