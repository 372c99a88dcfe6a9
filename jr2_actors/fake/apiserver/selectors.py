"""Label selectors as the API server parses them: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_SET = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)$")
_CMP = re.compile(r"^(?P<key>[^=!\s]+)\s*(?P<op>==|!=|=)\s*(?P<value>\S*)$")

Op = Literal["exists", "!exists", "=", "!=", "in", "notin"]


class SelectorError(ValueError):
    """A selector the API server would refuse with 400 BadRequest."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: Op
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op == "=":
            return value == self.values[0]
        if self.op == "!=":
            return value != self.values[0]
        if self.op == "in":
            return value in self.values
        return value not in self.values  # notin


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)


def parse(text: str | None) -> Selector:
    if not text or not text.strip():
        return Selector()
    return Selector(tuple(_requirement(part.strip()) for part in _split(text)))


def _split(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unable to parse requirement: unbalanced ')' in {text!r}")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if depth:
        raise SelectorError(f"unable to parse requirement: unbalanced '(' in {text!r}")
    parts.append(current)
    return parts


def _requirement(part: str) -> Requirement:
    if not part:
        raise SelectorError("unable to parse requirement: empty requirement")
    m = _SET.match(part)
    if m:
        key = _key(m["key"])
        values = tuple(v.strip() for v in m["values"].split(",")) if m["values"].strip() else ()
        if not values:
            raise SelectorError(f"unable to parse requirement: {part!r}: for 'in', 'notin' operators, "
                                "values set can't be empty")
        for v in values:
            _value(v)
        op: Op = "in" if m["op"] == "in" else "notin"
        return Requirement(key, op, values)
    m = _CMP.match(part)
    if m:
        return Requirement(_key(m["key"]), "!=" if m["op"] == "!=" else "=", (_value(m["value"]),))
    if part.startswith("!"):
        return Requirement(_key(part[1:].strip()), "!exists")
    return Requirement(_key(part), "exists")


def _key(key: str) -> str:
    if not _KEY.match(key) or len(key.rpartition("/")[2]) > 63:
        raise SelectorError(f"unable to parse requirement: invalid label key {key!r}")
    return key


def _value(value: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise SelectorError(f"unable to parse requirement: invalid label value {value!r}")
    return value


# -- field selectors ------------------------------------------------------------------------------------

FIELDS = ("metadata.name", "metadata.namespace")  # what every kind supports; jr2's kinds add none
_FIELD = re.compile(r"^(?P<key>[^=!\s]+)\s*(?P<op>==|!=|=)\s*(?P<value>[^,]*)$")


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str

    def matches(self, obj: Mapping[str, object]) -> bool:
        meta = obj.get("metadata")
        got = meta.get(self.field.removeprefix("metadata.")) if isinstance(meta, dict) else None
        return (got == self.value) if self.equal else (got != self.value)


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, object]) -> bool:
        return all(r.matches(obj) for r in self.requirements)


def parse_fields(text: str | None) -> FieldSelector:
    """`metadata.name=x,metadata.namespace!=y`; any other field is refused as a real server refuses it
    (apimachinery fields.ParseSelector, then the registry's "field label not supported")."""
    if not text or not text.strip():
        return FieldSelector()
    requirements = []
    for part in (p.strip() for p in text.split(",")):
        m = _FIELD.match(part)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        if m["key"] not in FIELDS:
            raise SelectorError(f"field label not supported: {m['key']}")
        requirements.append(FieldRequirement(m["key"], m["op"] != "!=", m["value"].strip()))
    return FieldSelector(tuple(requirements))
