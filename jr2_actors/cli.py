"""The `jr2-actors` command line (CONTRACTS.md §6). Subcommands arrive with the issues that build them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jr2_actors import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jr2-actors", description=__doc__)
    parser.add_argument("--version", action="version", version=f"jr2-actors {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
