"""`jr2-actors completion bash|zsh`: a shell completion script, made from the parser itself (so it never
lists a command or a flag the CLI does not have). zsh loads it through its bash completion layer."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash or zsh)",
                       description="Print a completion script for the shell. Examples: "
                                   "source <(jr2-actors completion bash); in ~/.zshrc: "
                                   "source <(jr2-actors completion zsh)")
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete in (required)")


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    top = _flags(parser)
    cases = []
    for name, command in sorted(sub.choices.items()):
        files = any(a.dest in ("workflow", "file", "files") for a in command._actions)
        then = '; [[ $cur != -* ]] && COMPREPLY+=($(compgen -f -- "$cur"))' if files else ""
        cases.append(f'    {name}) COMPREPLY=($(compgen -W "{" ".join(_flags(command))}" -- "$cur")){then};;')
    body = "\n".join(cases)
    lines = [
        "# jr2-actors completion (jr2-actors completion " + shell + ")",
        *(["autoload -U +X bashcompinit && bashcompinit"] if shell == "zsh" else []),
        "_jr2_actors() {",
        '  local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" w',
        '  for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do case "$w" in -*) ;; *) cmd="$w"; break;; esac; done',
        '  case "$cmd" in',
        f'    "") COMPREPLY=($(compgen -W "{" ".join(sorted(sub.choices))} {" ".join(top)}" -- "$cur"));;',
        body,
        "  esac",
        "}",
        "complete -o default -F _jr2_actors jr2-actors",
    ]
    return "\n".join(lines)


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})
