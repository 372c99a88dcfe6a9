"""Issue 19 item 8: every command's --help shows an example, and cites nothing outside the repository."""

from __future__ import annotations

import argparse

from jr2_actors.cli import build_parser


def test_every_command_has_an_example_and_no_outside_reference() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        text = command.format_help()
        assert "Example" in text, f"{name} --help shows no example"
        assert "CONTRACTS" not in text, f"{name} --help cites CONTRACTS, which is not in the repository"
