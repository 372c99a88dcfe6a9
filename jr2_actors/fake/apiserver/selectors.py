"""Label and field selectors as the API server parses and matches them.

Label selectors follow k8s.io/apimachinery pkg/labels/selector.go: its lexer (identifiers end at
whitespace or one of `=!(),<>`, so `k in(a,b)` and `k>3` need no spaces) and its parser (`k`, `!k`,
`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`), with NewRequirement's checks and
Requirement.Matches' rules; the errors are its words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_INTEGER = re.compile(r"^[+-]?[0-9]+$")  # strconv.ParseInt(s, 10, 64), range checked apart

Op = Literal["exists", "!exists", "=", "!=", "in", "notin", "gt", "lt"]

# selection.Operator spellings, in the order the parser's error lists them (binaryOperators)
_BINARY = "in, notin, =, ==, !=, gt, lt"


class SelectorError(ValueError):
    """A selector the API server would refuse with 400 BadRequest."""


def _int64(text: str) -> int | None:
    if not _INTEGER.match(text):
        return None
    n = int(text)
    return n if -(2**63) <= n < 2**63 else None


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
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        # gt / lt: the label must be there and an integer (else no match), compared as integers
        have = _int64(value) if value is not None else None
        want = _int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if self.op == "gt" else have < want


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)


def parse(text: str | None) -> Selector:
    """A label selector; `SelectorError` with apimachinery's words for one a real server refuses."""
    if not text or not text.strip():
        return Selector()
    return Selector(tuple(sorted(_Parser(text).parse(), key=lambda r: r.key)))


# -- the lexer ----------------------------------------------------------------------------------------

_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_TOKENS = {")": ")", ",": ",", "!": "!", "==": "==", "=": "=", ">": ">", "in": "in", "<": "<", "!=": "!=",
           "notin": "notin", "(": "("}
_ID, _END, _ERROR = "identifier", "end", "error"


def _lex(text: str) -> list[tuple[str, str]]:
    """(token, literal) pairs ending in the end token, as the Lexer scans them."""
    items: list[tuple[str, str]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos == len(text):
            items.append((_END, ""))
            return items
        if text[pos] in _SPECIAL:
            # the longest run of special symbols that is still a token ("!=", "=="), as scanSpecialSymbol
            buffer, best = "", None
            while pos < len(text) and text[pos] in _SPECIAL:
                buffer += text[pos]
                if buffer in _TOKENS:
                    best = buffer
                elif best is not None:
                    break
                pos += 1
            if best is None:
                items.append((_ERROR, f"error expected: keyword found '{buffer}'"))
            else:
                items.append((_TOKENS[best], best))
            continue
        start = pos
        while pos < len(text) and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        items.append((_TOKENS.get(word, _ID), word))


# -- the parser ---------------------------------------------------------------------------------------

class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def _look(self, values: bool = True) -> tuple[str, str]:
        return self._as(self.items[self.position], values)

    def _take(self, values: bool = True) -> tuple[str, str]:
        self.position += 1
        return self._as(self.items[self.position - 1], values)

    @staticmethod
    def _as(item: tuple[str, str], values: bool) -> tuple[str, str]:
        # In the Values context `in` and `notin` are identifiers: `value in (in)`.
        tok, lit = item
        return (_ID, lit) if values and tok in ("in", "notin") else (tok, lit)

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self._look()
            if tok == _END:
                return requirements
            if tok not in (_ID, "!"):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except SelectorError as e:
                raise SelectorError(f"unable to parse requirement: {e}") from None
            tok, lit = self._take()
            if tok == _END:
                return requirements
            if tok != ",":
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self._look()
            if tok not in (_ID, "!"):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        tok, key = self._take()
        negated = tok == "!"
        if negated:
            tok, key = self._take()
        if tok != _ID:
            raise SelectorError(f"found '{key}', expected: identifier")
        _check_key(key)
        if negated:
            return Requirement(key, "!exists")  # whatever follows is the caller's to refuse (`!k=v`)
        if self._look()[0] in (_END, ","):
            return Requirement(key, "exists")
        op = self._operator()
        values = self._set() if op in ("in", "notin") else self._exact()
        return _new_requirement(key, op, values)

    def _operator(self) -> Op:
        tok, lit = self._take(values=False)
        ops: dict[str, Op] = {"in": "in", "=": "=", "==": "=", ">": "gt", "<": "lt", "notin": "notin", "!=": "!="}
        if tok not in ops:
            raise SelectorError(f"found '{lit}', expected: {_BINARY}")
        return ops[tok]

    def _set(self) -> list[str]:
        tok, lit = self._take()
        if tok != "(":
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self._look()
        if tok == ")":  # "()" is the set of the empty value
            self._take()
            return [""]
        if tok not in (_ID, ","):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self._identifiers()
        if self._take()[0] != ")":
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def _identifiers(self) -> list[str]:
        """A comma-separated list of possibly empty values, up to (not taking) its ')'."""
        values: set[str] = set()
        while True:
            tok, lit = self._take()
            if tok == _ID:
                values.add(lit)
                nxt, nlit = self._look()
                if nxt == ")":
                    return sorted(values)
                if nxt != ",":
                    raise SelectorError(f"found '{nlit}', expected: ',' or ')'")
            elif tok == ",":
                if not values:
                    values.add("")  # "(,"
                nxt = self._look()[0]
                if nxt == ")":
                    values.add("")  # ",)"
                    return sorted(values)
                if nxt == ",":
                    values.add("")  # ",,"
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def _exact(self) -> list[str]:
        if self._look()[0] in (_END, ","):
            return [""]  # `k=` selects the empty value
        tok, lit = self._take()
        if tok != _ID:
            raise SelectorError(f"found '{lit}', expected: identifier")
        return [lit]


def _new_requirement(key: str, op: Op, values: list[str]) -> Requirement:
    """NewRequirement's checks, in its words: a `gt`/`lt` value is an integer; each value a label value.
    (The parser gives `gt`/`lt` exactly one value and a set at least one, so their count checks never fire.)"""
    problems = []
    if op in ("gt", "lt") and _int64(values[0]) is None:
        problems.append(f"values[0]: Invalid value: \"{values[0]}\": for 'Gt', 'Lt' operators, the value must be "
                        "an integer")
    problems += [f'values[{i}][{key}]: Invalid value: "{v}": {_VALUE_PROBLEM}' for i, v in enumerate(values)
                 if len(v) > 63 or not _VALUE.match(v)]
    if problems:
        raise SelectorError(problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
    return Requirement(key, op, tuple(values))


_VALUE_PROBLEM = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                  "and must start and end with an alphanumeric character")


def _check_key(key: str) -> str:
    if not _KEY.match(key) or len(key.rpartition("/")[2]) > 63:
        raise SelectorError(f'Invalid value: "{key}": invalid label key')
    return key


# -- field selectors ------------------------------------------------------------------------------------

META_FIELDS: Mapping[str, str] = {"metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace"}
"""What every kind supports (generic.ObjectMetaFieldsSet); jr2's kinds add none, Events add theirs (events.py)."""
_FIELD = re.compile(r"^(?P<key>[^=!\s]+)\s*(?P<op>==|!=|=)\s*(?P<value>[^,]*)$")


def field_value(obj: Mapping[str, object], field: str) -> str:
    """An object's selectable field, "" where it has none (a fields.Set holds every field, empty or not).
    `source`, an Event's, is `source.component`, else `reportingComponent` (the Event strategy's rule)."""
    if field == "source":
        source = obj.get("source")
        component = source.get("component") if isinstance(source, dict) else None
        return str(component or obj.get("reportingComponent") or "")
    head, _, rest = field.partition(".")
    value = obj.get(head)
    if rest:
        value = value.get(rest) if isinstance(value, dict) else None
    return "" if value is None else str(value)


@dataclass(frozen=True)
class FieldRequirement:
    field: str  # the stored object's field (a label another version names differently is mapped at parse)
    equal: bool
    value: str

    def matches(self, obj: Mapping[str, object]) -> bool:
        return (field_value(obj, self.field) == self.value) is self.equal


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, object]) -> bool:
        return all(r.matches(obj) for r in self.requirements)


def parse_fields(text: str | None, labels: Mapping[str, str] = META_FIELDS) -> FieldSelector:
    """`metadata.name=x,metadata.namespace!=y`; `labels` maps each field label the kind supports to the
    stored field it selects on. Any other label is refused as a real server refuses it (apimachinery
    fields.ParseSelector, then the field label conversion's "field label not supported")."""
    if not text or not text.strip():
        return FieldSelector()
    requirements = []
    for part in (p.strip() for p in text.split(",")):
        m = _FIELD.match(part)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        if m["key"] not in labels:
            raise SelectorError(f"field label not supported: {m['key']}")
        requirements.append(FieldRequirement(labels[m["key"]], m["op"] != "!=", m["value"].strip()))
    return FieldSelector(tuple(requirements))
