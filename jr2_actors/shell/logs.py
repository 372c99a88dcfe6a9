"""Log lines for whoever runs the pod: readable text, or one JSON object per line (`--log-format json`).

Every line says which run, Workspace, Agent seat and actor it is about, when it has them — and no call
passes them along. Each actor binds its context on its own thread as it starts (`actorkit.Shell`): its
kind and name, over what its creator had bound, so a run's Workspace and Agent actors carry the run's id.
A pool job carries the context of the actor that submitted it (`carry`). A logging filter copies the
context of the thread that logs onto each record (`ContextFilter`), and the formatters write it.

No secret is logged: no token, key or Secret value is ever formatted into a message (their reprs hide
them), and both formats blank whatever follows `Bearer ` as a last guard (`scrub`);
tests/test_logs.py runs the whole demo at DEBUG and finds none of the run's tokens or keys.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import TextIO, TypeVar

T = TypeVar("T")

FIELDS = ("run", "workspace", "agent", "actor")
FORMATS = ("text", "json")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
_local = threading.local()


def context() -> dict[str, str]:
    """The context bound on this thread (empty outside an actor)."""
    return dict(getattr(_local, "context", None) or {})


def bind(fields: Mapping[str, str]) -> None:
    """Bind `fields` as this thread's context, for every line it logs from now on."""
    _local.context = {k: v for k, v in fields.items() if k in FIELDS and v}


def carry(job: Callable[[], T]) -> Callable[[], T]:
    """`job`, run on another thread (a pool's) with the context of the thread that made it here."""
    carried = context()

    def run() -> T:
        previous = context()
        bind(carried)
        try:
            return job()
        finally:
            bind(previous)

    return run


def scrub(text: str) -> str:
    """Blank a bearer token, should one ever reach a line (an exception quoting a header, say)."""
    return _BEARER.sub(r"\1[redacted]", text)


class ContextFilter(logging.Filter):
    """Copies the logging thread's context onto the record: `run`, `workspace`, `agent`, `actor`."""

    def filter(self, record: logging.LogRecord) -> bool:
        bound = getattr(_local, "context", None) or {}
        for name in FIELDS:
            setattr(record, name, bound.get(name))
        record.jr2_context = " ".join(f"{name}={bound[name]}" for name in FIELDS if name in bound)
        return True


class TextFormatter(logging.Formatter):
    """`time LEVEL logger [run=… workspace=… agent=… actor=…]: message`, the context only when there is one."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(jr2_bracket)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        where = getattr(record, "jr2_context", "")
        record.jr2_bracket = f" [{where}]" if where else ""
        return scrub(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ms), level, logger, message, the context, thread, exception."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value:
                doc[name] = value
        doc["thread"] = record.threadName
        if record.exc_info:
            doc["exception"] = scrub(self.formatException(record.exc_info))
        if record.stack_info:
            doc["stack"] = scrub(self.formatStack(record.stack_info))
        return json.dumps(doc, ensure_ascii=False, default=str)


def install(stream: TextIO, *, level: str, fmt: str) -> tuple[logging.Handler, int]:
    """Log to `stream` in `fmt` from `level` up, on the root logger; returns what `uninstall` needs."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler, previous


def uninstall(installed: tuple[logging.Handler, int]) -> None:
    handler, previous = installed
    root = logging.getLogger()
    root.removeHandler(handler)
    root.setLevel(previous)
    handler.close()
