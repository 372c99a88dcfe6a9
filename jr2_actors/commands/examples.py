"""`jr2-actors examples [NAME] [--path]`: the workflows that ship inside the package (`jr2_actors.examples`),
listed, printed, or located — so a recipe or a test in another project can use one without a checkout."""

from __future__ import annotations

import argparse
from typing import Any

from jr2_actors.commands.common import UsageError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("examples", help="list the packaged example workflows, or print one",
                       description="The example workflows installed with jr2-actors. Examples: jr2-actors examples; "
                                   "jr2-actors examples fix-and-review > fix.yaml; "
                                   "jr2-actors submit \"$(jr2-actors examples fix-and-review --path)\"")
    p.add_argument("name", metavar="NAME", nargs="?", help="an example to print (default: list them all)")
    p.add_argument("--path", action="store_true",
                   help="print where the example's file is installed, not its text (default: its text)")


def run(args: argparse.Namespace) -> int:
    from jr2_actors import examples

    if args.name is None:
        if args.path:
            raise UsageError("--path needs an example's NAME (jr2-actors examples lists them)")
        listed = examples.names()
        width = max(map(len, listed), default=0)
        for name in listed:
            print(f"{name.ljust(width)}  {examples.summary(name)}", flush=True)
        return 0
    try:
        where = examples.path(args.name)
    except examples.UnknownExample as e:
        raise UsageError(str(e)) from None
    print(where if args.path else examples.text(args.name).rstrip("\n"), flush=True)
    return 0
