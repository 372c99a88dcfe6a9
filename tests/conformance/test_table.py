"""docs/fake-cluster.md's "which clients, which versions" table is the suite's own (tests/conformance/table.py)."""

from __future__ import annotations

from pathlib import Path

from tests.conformance.clients import CLIENTS
from tests.conformance.table import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "fake-cluster.md"
START, END = "<!-- conformance-table -->", "<!-- /conformance-table -->"


def cells(table: str) -> dict[str, list[str]]:
    """Each row by client, without the version column (it is what the suite ran where the doc was written)."""
    out = {}
    for line in table.strip().splitlines()[2:]:
        row = [c.strip() for c in line.strip().strip("|").split("|")]
        out[row[0].strip("`")] = [row[0], *row[2:]]
    return out


def test_the_doc_table_names_every_client_the_suite_covers_with_what_it_runs() -> None:
    text = DOC.read_text()
    assert START in text and END in text, "docs/fake-cluster.md lost its conformance table markers"
    in_doc = cells(text.split(START, 1)[1].split(END, 1)[0])
    rendered = cells(render())
    assert {c.name for c in CLIENTS} | {"kopf"} == set(rendered)
    assert in_doc == rendered, "regenerate it: python -m tests.conformance.table"
