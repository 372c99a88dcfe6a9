"""docs/architecture.md's layout map is held to the tree: every module and sub-package of a folder it maps is
named in that folder's entry, and every module an entry names is there — a newcomer finds a behaviour from
the map in one step only while the map is true."""

from __future__ import annotations

import re

from tests.support.paths import DOCS, PACKAGE

ENTRY = re.compile(r"^  ([a-z_]+(?:\.py|/))")  # a top-level entry: `  run/ …` or `  orchestrator.py …`
ROOM = re.compile(r"^    ([a-z_]+)/")  # a folder inside the entry above it: `    feed/ …`
MODULE = re.compile(r"\b([a-z_]+\.py)\b")


def layout_map() -> dict[str, str]:
    """Each entry of the map (a folder or a root module, by its path below jr2_actors/) and its text."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    block = text[text.index("```\njr2_actors/") + 4:]
    entries: dict[str, str] = {}
    current: str | None = None
    for line in block[:block.index("```")].splitlines()[1:]:
        if line.startswith("  -- "):
            current = None
        elif m := ENTRY.match(line):
            current = m.group(1).rstrip("/")
        elif (m := ROOM.match(line)) and current is not None:
            current = f"{current.split('/')[0]}/{m.group(1)}"
        if current is not None:
            entries[current] = entries.get(current, "") + line + "\n"
    return entries


def test_every_module_of_a_mapped_folder_is_named_in_its_entry() -> None:
    entries = layout_map()
    missing = []
    for path, text in entries.items():
        folder = PACKAGE / path
        if not folder.is_dir():
            continue
        missing += [f"{path}/{f.name}" for f in sorted(folder.glob("*.py"))
                    if f.name != "__init__.py" and f.name not in MODULE.findall(text)]
        missing += [f"{path}/{d.name}/" for d in sorted(folder.iterdir())
                    if (d / "__init__.py").exists() and f"{d.name}/" not in text and f"{path}/{d.name}" not in entries]
    assert missing == [], f"name these in docs/architecture.md's layout map: {missing}"


def test_every_folder_and_root_module_of_the_package_has_an_entry() -> None:
    text = "".join(layout_map().values())
    units = sorted(p.name + ("/" if p.is_dir() else "") for p in PACKAGE.iterdir()
                   if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists())
    assert [u for u in units if u not in text] == []


def test_every_module_an_entry_names_is_in_the_tree() -> None:
    """By name anywhere in the package: an entry may point at a neighbour (the Console's at `topview.py`)."""
    present = {p.name for p in PACKAGE.rglob("*.py")}
    gone = [f"{path}: {name}" for path, text in layout_map().items() for name in MODULE.findall(text)
            if name not in present]
    assert gone == [], f"the layout map names modules that are not there: {gone}"
