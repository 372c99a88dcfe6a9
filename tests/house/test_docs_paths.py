"""The docs name what is there: every repository path README.md and docs/ name exists (read at test time, so
a file moved without its docs fails here), every doc that cites the wire contract links its page, and the
fake cluster's page names every option of `jr2-actors fake-cluster`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from jr2_actors.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TOP = ("jr2_actors", "tests", "docs", "bench", "manifests", "realcluster", ".ci")
# A path begins with a top folder of the repository (not inside a longer word or path) and ends on a name.
PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(re.escape(t) for t in TOP)})/[\w./-]*[\w/])")
PLACEHOLDERS = {"NAME", "SERIES", "FAMILY", "X", "FILE", "N", "RUN"}  # `docs/bench/NAME.png`: a pattern


def named_paths(text: str) -> list[str]:
    found = []
    for match in PATH.finditer(text):
        path = match.group(1)
        if not PLACEHOLDERS & set(re.split(r"[/.-]", path)):
            found.append(path)
    return found


def test_the_path_finder_reads_what_the_docs_write() -> None:
    text = ("`jr2_actors/values/workflow.py`, (docs/fake-cluster.md, \"Faults\"), tests/real/ and "
            "![x](bench/watch.png); not docs/bench/NAME.png, not /tmp/jr2_actors/x, not my_tests/x.py")
    assert named_paths(text) == ["jr2_actors/values/workflow.py", "docs/fake-cluster.md", "tests/real/",
                                 "bench/watch.png"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_doc_names_exists(doc: Path) -> None:
    """From the repository's root, or (a Markdown link, `![plot](bench/x.png)`) from the doc's own folder."""
    missing = []
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for path in named_paths(line):
            if not (ROOT / path).exists() and not (doc.parent / path).exists():
                missing.append(f"{doc.relative_to(ROOT)}:{number}: {path}")
    assert missing == []


@pytest.mark.parametrize("doc", [d for d in DOCS if "CONTRACTS" in d.read_text(encoding="utf-8")
                                 and d.parent.name != "decisions"], ids=lambda p: str(p.relative_to(ROOT)))
def test_a_doc_citing_the_contract_links_its_page(doc: Path) -> None:
    target = os.path.relpath(ROOT / "docs" / "decisions" / "contracts.md", doc.parent)
    assert f"[CONTRACTS.md]({target})" in doc.read_text(encoding="utf-8")
    assert (doc.parent / target).exists()


def test_the_fake_cluster_page_names_every_option_of_the_command() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    command = sub.choices["fake-cluster"]  # type: ignore[index]
    flags = {f for action in command._actions for f in action.option_strings if f.startswith("--")} - {"--help"}
    text = (ROOT / "docs" / "fake-cluster.md").read_text(encoding="utf-8")
    paragraph = text[text.index("`jr2-actors fake-cluster` options"):]
    paragraph = paragraph[:paragraph.index("\n\n")]
    assert sorted(f for f in flags if f"`{f}" not in paragraph) == []
