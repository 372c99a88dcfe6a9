"""One API `Backend` for tests of the API alone: it knows no run and is healthy. A test overrides only the
methods it exercises (the protocol is `api/app.py`'s `Backend`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jr2_actors.run.feed.hub import FeedRead
from jr2_actors.values.run_ids import Keyed


class QuietBackend:
    def submit(self, document: object, run_input: Mapping[str, Any] | None, *,
               keyed: Keyed | None = None) -> str:
        raise AssertionError("not called")

    def status(self, run_id: str) -> dict[str, Any] | None:
        return None

    def runs_encoded(self, prefix: str = "") -> Sequence[Mapping[str, Any] | bytes]:
        return []

    def finished_runs(self, prefix: str = "", limit: int = 500) -> list[dict[str, Any]]:
        return []

    def document(self, run_id: str) -> dict[str, Any] | None:
        return None

    def cancel(self, run_id: str) -> dict[str, Any] | None:
        return None

    def feed(self, run_id: str, after: int, wait: float) -> FeedRead | None:
        return None

    def health(self) -> tuple[bool, str]:
        return True, ""

    def metrics(self) -> str:
        return ""

    def interrupt_feeds(self) -> None:
        pass

    def made_by(self, key: str) -> tuple[str, Keyed] | None:
        return None
