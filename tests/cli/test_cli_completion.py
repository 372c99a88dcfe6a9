"""`jr2-actors completion bash|zsh`: a script shtab makes from the parser, which the shell runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import shtab

from jr2_actors.commands import completion
from tests.support.cli_process import jr2

FUNCTION = "_shtab_jr2_actors"  # what shtab names the completion function of the program `jr2-actors`


def complete(script: str, *words: str, cwd: Path | None = None) -> list[str]:
    """What bash offers for the last of `words` (the command line typed so far) with `script` loaded."""
    line = " ".join(f"'{w}'" for w in ("jr2-actors", *words))
    out = subprocess.run(["bash", "-c", f'eval "$1"; COMP_WORDS=({line}); COMP_CWORD={len(words)}; {FUNCTION}; '
                                        'printf "%s\\n" "${COMPREPLY[@]}"', "bash", script],
                         capture_output=True, text=True, timeout=30, check=False, cwd=cwd)
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
    assert complete(out.stdout, "completion", "") == ["bash", "zsh"]  # a positional's choices
    assert out.stdout.rstrip().endswith(f"complete -o bashdefault -F {FUNCTION} jr2-actors")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_offers_files_where_a_command_takes_a_workflow_file(tmp_path: Path) -> None:
    (tmp_path / "fix.yaml").write_text("name: x\n")
    (tmp_path / "notes").mkdir()
    script = jr2("completion", "bash").stdout
    assert complete(script, "submit", "f", cwd=tmp_path) == ["fix.yaml"]
    assert complete(script, "lint", "fix.yaml", "n", cwd=tmp_path) == ["notes"]  # nargs="+": each of them
    assert complete(script, "graph", "", cwd=tmp_path) == sorted(["fix.yaml", "notes"])
    assert complete(script, "cancel", "f", cwd=tmp_path) == []  # a run id is no file


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_gets_its_own_script_and_evaluating_it_registers_the_completion(tmp_path: Path) -> None:
    out = jr2("completion", "zsh")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("#compdef jr2-actors")
    script = tmp_path / "jr2.zsh"
    script.write_text(out.stdout)
    assert subprocess.run(["zsh", "-n", str(script)], capture_output=True, timeout=30, check=False).returncode == 0
    loaded = subprocess.run(["zsh", "-f", "-c", 'autoload -U compinit && compinit -u -D && eval "$(<$1)" && '
                                               'print -r -- "$_comps[jr2-actors]"', "zsh", str(script)],
                            capture_output=True, text=True, timeout=30, check=False, env={"HOME": str(tmp_path)})
    assert loaded.returncode == 0 and loaded.stdout.strip() == FUNCTION, loaded.stdout + loaded.stderr


def test_the_file_mark_is_shtabs_own() -> None:
    assert {shell: shtab.FILE[shell] for shell in completion.FILES} == completion.FILES
    assert set(completion.FILES) == {"bash", "zsh"}


def test_an_unknown_shell_is_one_line_and_exit_2() -> None:
    out = jr2("completion", "fish")
    assert out.returncode == 2 and "invalid choice: 'fish'" in out.stderr and out.stderr.count("\n") == 1
