"""Kubernetes quantities and durations, and jr2's size notation (`1.9Gi` / `512Mi`, CONTRACTS.md §3)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal(1000),
            "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
            "E": Decimal(10**18)}
_QUANTITY = re.compile(r"^([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")
# The guard's size form, as `format_size` writes it: `1.9Gi` (at least 1 GiB, one decimal) or `512Mi`
# (under 1 GiB). A bare number is not a size: its unit is anyone's guess.
_SIZE = re.compile(r"[1-9][0-9]{0,5}(?:\.[0-9])?Gi|(?:0|[1-9][0-9]{0,3})Mi")


class QuantityError(ValueError):
    pass


def parse_quantity(text: object) -> Decimal:
    """A Kubernetes quantity (`500m`, `2Gi`, `1.5`, `1e3` is not accepted) as a Decimal of base units."""
    if isinstance(text, int) and not isinstance(text, bool):
        return Decimal(text)
    if not isinstance(text, str) or len(text) > 64:
        raise QuantityError(f"not a quantity: {text!r}")
    m = _QUANTITY.match(text.strip())
    if not m:
        raise QuantityError(f"not a quantity: {text!r}")
    try:
        number = Decimal(m.group(1))
    except InvalidOperation as e:
        raise QuantityError(f"not a quantity: {text!r}") from e
    suffix = m.group(2)
    return number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def cpu_millis(text: object) -> int:
    return int(parse_quantity(text) * 1000)


def memory_bytes(text: object) -> int:
    return int(parse_quantity(text))


def parse_duration(text: object) -> float:
    """A Go duration as the operator reads `spec.idleTimeout`: `30m`, `1h30m`, `45s`, `500ms`."""
    if not isinstance(text, str) or not text or len(text) > 32:
        raise QuantityError(f"not a duration: {text!r}")
    pos = 0
    total = 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        value = float(m.group(1))
        total += value * {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise QuantityError(f"not a duration: {text!r}")
    return total


def format_size(n_bytes: int) -> str:
    """jr2's size notation: `1.9Gi` at or above 1 GiB (one decimal), else whole `Mi`."""
    if n_bytes >= 2**30:
        return f"{n_bytes / 2**30:.1f}Gi".replace(".0Gi", "Gi")
    return f"{n_bytes // 2**20}Mi"


def is_size(text: object) -> bool:
    """A size in the guard's form (`1.9Gi`, `512Mi`; CONTRACTS.md §3), the only form a notice may carry."""
    if not isinstance(text, str) or not _SIZE.fullmatch(text):
        return False
    return not text.endswith("Mi") or int(text[:-2]) < 1024
