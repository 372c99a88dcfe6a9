"""The repository's folders, for tests that read its files: named here once, so a test file reads the same
wherever its family folder puts it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "jr2_actors"
DOCS = ROOT / "docs"
MANIFESTS = ROOT / "manifests"
BENCH = ROOT / "bench"
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = ROOT / "tests" / "golden"
