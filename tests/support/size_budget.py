"""The size budget: an allowance of lines per source file that may come down and never go up.

A file is split where its concepts part, not at a number: each file is held to its own allowance
(`tests/size_budget.toml`), set a little above its size when it was last listed. A file over its
allowance fails tests/test_size_budget.py; one well under it asks for the allowance to come down, which
`--update` does (it lowers allowances, lists new files, drops files gone, and never raises one):

    python -m tests.support.size_budget --update     # or: make size-budget

A file not listed yet (a new one) is held to the default allowance until `--update` lists it. A file that
must grow past its allowance is a decision: raise its line in the budget by hand, with a comment saying why.
"""

from __future__ import annotations

import argparse
import math
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUDGET = ROOT / "tests" / "size_budget.toml"
UPDATE = "python -m tests.support.size_budget --update (or make size-budget)"
HEADROOM = 5  # lines a file may grow before it is over the allowance it was listed at (rounded up to ten)
FLOOR = 100  # no allowance is smaller: a small file's growth is not what the budget is for
SLACK = 20  # a file whose allowance could come down by this much asks for it to come down


@dataclass
class Budget:
    roots: list[str]
    default: int
    files: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # a by-hand allowance's comment, kept by `--update`


def allowance(lines: int) -> int:
    """What a file of `lines` lines is listed at: a little above its size, rounded up to ten."""
    return max(FLOOR, math.ceil((lines + HEADROOM) / 10) * 10)


def load(path: Path = BUDGET) -> Budget:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    head = data["budget"]
    files = {str(k): int(v) for k, v in data.get("files", {}).items()}
    notes: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith('"') and "#" in line:
            notes[line.split('"')[1]] = line[line.index("#"):]
    return Budget([str(r) for r in head["roots"]], int(head["default"]), files, notes)


def sizes(budget: Budget, root: Path = ROOT) -> dict[str, int]:
    """Each source file under the budget's roots (posix path from the checkout) → its number of lines."""
    return {p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for r in budget.roots for p in sorted((root / r).rglob("*.py"))}


def problems(budget: Budget, found: dict[str, int]) -> list[str]:
    """What is wrong with the tree against the budget: each a line saying what to do."""
    out: list[str] = []
    for name, lines in sorted(found.items()):
        allowed = budget.files.get(name)
        if allowed is None:
            if lines > budget.default:
                out.append(f"{name}: {lines} lines, over the default allowance of a new file ({budget.default}): "
                           "split it where its concepts part")
        elif lines > allowed:
            out.append(f"{name}: {lines} lines, over its allowance of {allowed}: split it where its concepts part "
                       "(the budget only shrinks)")
        elif allowance(lines) <= allowed - SLACK:
            out.append(f"{name}: {lines} lines, well under its allowance of {allowed}: bring the allowance down "
                       f"with {UPDATE}")
    for name in sorted(set(budget.files) - set(found)):
        out.append(f"{name}: listed in the budget but gone: drop it with {UPDATE}")
    return out


def updated(budget: Budget, found: dict[str, int]) -> tuple[Budget, list[str]]:
    """The budget brought to the tree: allowances lowered, new files listed, gone ones dropped; never raised.
    Returns it and what it would not do (a file over its allowance, a new file over the default)."""
    files: dict[str, int] = {}
    refused: list[str] = []
    for name, lines in sorted(found.items()):
        allowed = budget.files.get(name, budget.default)
        files[name] = min(allowed, allowance(lines))
        if lines > allowed:
            refused.append(f"{name}: {lines} lines, over its allowance of {allowed}: not raised (split it, or "
                           "raise its line by hand with a comment saying why)")
    notes = {k: v for k, v in budget.notes.items() if files.get(k) == budget.files.get(k)}
    return Budget(budget.roots, budget.default, files, notes), refused


def render(budget: Budget) -> str:
    roots = ", ".join(f'"{r}"' for r in budget.roots)
    head = [
        "# The size budget (tests/support/size_budget.py, held by tests/test_size_budget.py): each file's allowance",
        "# of lines may come down and never go up. Brought to the tree by",
        f"#     {UPDATE}",
        "# A file not listed (a new one) is held to `default`.",
        "",
        "[budget]",
        f"roots = [{roots}]",
        f"default = {budget.default}",
        "",
        "[files]",
    ]
    rows = [f'"{name}" = {n}' + (f"  {budget.notes[name]}" if name in budget.notes else "")
            for name, n in sorted(budget.files.items())]
    return "\n".join(head + rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.size_budget", description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true", help="lower allowances to the tree and write the budget")
    args = parser.parse_args(argv)
    budget = load()
    found = sizes(budget)
    if not args.update:
        wrong = problems(budget, found)
        print("\n".join(wrong) if wrong else f"{len(found)} files within the budget")
        return 1 if wrong else 0
    new, refused = updated(budget, found)
    BUDGET.write_text(render(new), encoding="utf-8")
    lowered = sum(1 for k, v in new.files.items() if k in budget.files and v < budget.files[k])
    listed = len(set(new.files) - set(budget.files))
    dropped = len(set(budget.files) - set(new.files))
    print(f"{BUDGET.relative_to(ROOT)}: {lowered} lowered, {listed} listed, {dropped} dropped")
    for line in refused:
        print(line, file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
