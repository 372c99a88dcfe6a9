"""`jr2-actors completion bash|zsh`: a shell completion script, made by shtab from the parser itself (so it
never lists a command or a flag the CLI does not have). zsh gets its own (`_arguments`), not bash's."""

from __future__ import annotations

import argparse
from typing import Any

# shtab's `FILE` (tests/test_cli_completion.py holds them equal), here so that marking an argument at every
# start of the CLI does not import shtab: only the `completion` command does.
FILES = {"bash": "_shtab_compgen_files", "zsh": "_files"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash or zsh)",
                       description="Print a completion script for the shell. Examples: "
                                   "source <(jr2-actors completion bash); in ~/.zshrc, after compinit: "
                                   'eval "$(jr2-actors completion zsh)"')
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete in (required)")


def files(action: argparse.Action) -> argparse.Action:
    """Mark an argument that names files: its completion offers the files there."""
    action.complete = FILES  # type: ignore[attr-defined]  # the attribute shtab reads
    return action


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    import shtab

    return shtab.complete(parser, shell=shell)
