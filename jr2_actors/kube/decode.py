"""JSON text from the API server → Python values: the one function every watch frame is decoded through.

orjson (the `fast` extra, `pip install jr2-actors[fast]`) when it is installed: 3–4× faster than the standard
library's `json` on a Sandbox event (docs/benchmarks.md), the largest share of the watch's work per event.
Without it, the standard library, made to refuse what orjson refuses, so a frame means one thing either way:
`NaN`/`Infinity` and a number too large for a double are not JSON (RFC 8259 §6) and raise `ValueError`, as
does anything that is not one JSON document. Nesting past the limit raises `ValueError` too (the standard
library's `RecursionError`, turned into one). What still differs, both harmless: orjson reads an integer
beyond 64 bits as a float, and refuses a lone UTF-16 surrogate escape that `json` keeps in the string.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

Loads = Callable[[bytes], Any]


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of a double's range")
    return value


# Built once: `json.loads` with options builds a decoder per call.
_STDLIB = json.JSONDecoder(parse_constant=_constant, parse_float=_finite)


def stdlib_loads(data: bytes) -> Any:
    """The standard library's decoder with orjson's refusals; every failure is a `ValueError`. UTF-8 only,
    strictly (RFC 8259 §8.1), as orjson reads it: an invalid byte is a `UnicodeDecodeError`, a `ValueError`."""
    try:
        return _STDLIB.decode(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deep") from None


def _fast() -> tuple[Loads, str]:
    try:
        import orjson
    except ImportError:
        return stdlib_loads, "json"
    return orjson.loads, "orjson"  # its JSONDecodeError is a ValueError; its depth limit is 1,024


loads, DECODER = _fast()
