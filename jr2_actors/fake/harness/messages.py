"""What the fake Harness's actor is asked by its HTTP threads, and answers: one request, its reply."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from jr2_actors.fake.harness.core import Answer


@dataclass(frozen=True)
class HarnessRequest:
    sandbox: str
    method: str
    parts: tuple[str, ...]
    query: dict[str, str]
    authorization: str
    body: bytes = field(repr=False)
    delayed: bool = False  # the answer latency lever was already waited for
    origin: str = ""  # the scheme, host and port the request came to (one of `listen_more`'s, or the first)


@dataclass(frozen=True)
class HarnessReply:
    answer: Answer
    raw: bytes | None = None
    changed: threading.Event | None = None  # set when its Sandbox's Harness changes (for a long-poll)
    delay: float = 0.0  # wait this long, then ask again with `delayed` (the answer latency lever)
