"""CRD schemas as a real API server applies them: one source of truth, `manifests/crds/`.

Theory of operation: a `CrdSchema` is built from a CustomResourceDefinition document — the very files a
platform team applies (`manifests/crds/`, shipped in the package as `jr2_actors/crds/`). Building it
first checks the document against the rules a real API server enforces on a CRD (`crd_problems`: the
structural-schema rules, names, versions, printer columns); a CRD it would refuse is a `CrdError`, never a
schema that quietly validates less. Then:

- `validate(obj)` answers the field errors a real server would give the object (types, enums, required
  fields, bounds, patterns, RFC 3339 `date-time`, unique keys of `x-kubernetes-list-type` lists), each
  naming its field as Kubernetes does (`status.conditions[0].status`). The fake answers a non-empty list
  with `invalid_status(...)`: a 422 `Invalid` Status, as a real API server does.
- `prune(obj)` drops the fields the schema does not know (structural pruning) and lists them, as a
  real server does with unknown fields (it warns, or refuses under `fieldValidation=Strict`).

Pure: no I/O but `load_crd`, which reads the packaged file. It validates JSON-shaped data (what
`json.loads` gives); the walk is bounded by the schema's depth, not the object's, so a hostile object
cannot recurse it deep, and at most `MAX_ERRORS` errors are collected.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any, cast

import jsonschema
import yaml

from jr2_actors.fake.apiserver.crd_rules import INT_OR_STRING, JUNCTORS, crd_problems, get_in
from jr2_actors.values.errors import Jr2Error

CRD_FILES = {"sandboxes": "sandboxes.core.jr2.dev.yaml", "repos": "repos.core.jr2.dev.yaml"}
"""The CRDs shipped in `jr2_actors/crds/` (a link to `manifests/crds/`), by plural."""

MAX_ERRORS = 50  # a hostile object gets this many field errors back, not one per bad item
_VALUE_SHOWN = 64  # characters of an offending value quoted in an error

_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


class CrdError(Jr2Error):
    """A CRD document a real API server would refuse: the file's fault, so ours. Lists every problem."""

    def __init__(self, name: str, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__(f"CRD {name or '?'} is not one an API server accepts: " + "; ".join(self.problems))


@dataclass(frozen=True)
class FieldError:
    """One field's fault in an object, as Kubernetes words it (`field.Error`): the client's fault."""

    field: str
    reason: str  # FieldValueRequired, FieldValueInvalid, FieldValueTypeInvalid, FieldValueNotSupported, ...
    detail: str

    @property
    def message(self) -> str:
        return f"{self.field}: {self.detail}" if self.field else self.detail

    def cause(self) -> dict[str, str]:
        """The entry of a Status's `details.causes`: its message without the field (field.Error's ErrorBody),
        which the entry names apart — as a real v1.37 server sends it."""
        return {"reason": self.reason, "message": self.detail, "field": self.field}


@dataclass(frozen=True)
class Column:
    """One of the CRD's printer columns: what `kubectl get` shows (the fake's Tables can print these)."""

    name: str
    type: str  # integer, number, string, boolean or date
    json_path: str  # a simple path: `.status.phase`
    priority: int = 0

    def value(self, obj: object) -> Any:
        """The column's value in `obj`, or None where the path finds nothing."""
        for key in self.json_path.strip(".").split("."):
            if not isinstance(obj, Mapping):
                return None
            obj = obj.get(key)
        return obj


VALID_KEPT = 256  # objects a CrdSchema remembers as valid (each its JSON): a bound, the fake runs for days


class CrdSchema:
    """The served schema of one CRD's storage version, ready to validate and prune objects of its kind."""

    def __init__(self, crd: Mapping[str, Any]) -> None:
        problems = crd_problems(crd)
        if problems:
            raise CrdError(str(get_in(crd, "metadata", "name")), problems)
        spec = crd["spec"]
        self.group: str = spec["group"]
        self.kind: str = spec["names"]["kind"]
        self.plural: str = spec["names"]["plural"]
        version = next(v for v in spec["versions"] if v.get("storage"))
        self.version: str = version["name"]
        self.schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
        self.columns = tuple(Column(c["name"], c["type"], c["jsonPath"], c.get("priority", 0))
                             for c in version.get("additionalPrinterColumns") or [])
        self._validator = _VALIDATOR(_to_json_schema(self.schema), format_checker=_FORMATS)
        # The schema reads `metadata` only when it says something of it (a CRD may constrain name, generateName).
        self._reads_metadata = bool(get_in(self.schema, "properties", "metadata", "properties"))
        # The last objects found valid, as their JSON (insertion-ordered); written by the API server actors'
        # threads (this module stays pure, without a lock: a lost entry is only a walk again).
        self._valid: dict[str, None] = {}

    def validate(self, obj: object) -> list[FieldError]:
        """Every field error in `obj` (at most `MAX_ERRORS`), in a stable order; [] when valid.

        An object found valid before but for `metadata` (a Lease renewal, a status write) is valid again
        without jsonschema's walk, which was most of a renewal PATCH's cost on the fake."""
        if not isinstance(obj, dict):
            return [FieldError("", "FieldValueTypeInvalid", f"Invalid value: {_show(obj)}: must be of type object")]
        seen = obj if self._reads_metadata else {k: v for k, v in obj.items() if k != "metadata"}
        try:
            key = json.dumps(seen, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):  # not JSON, or nested past the encoder: no memo
            key = None
        if key is not None and key in self._valid:
            return []
        errors = self._errors(obj)
        if not errors and key is not None:
            self._valid[key] = None
            if len(self._valid) > VALID_KEPT:  # two clusters' actors may share this schema: no KeyError for a race
                with contextlib.suppress(StopIteration, RuntimeError):
                    self._valid.pop(next(iter(self._valid)), None)
        return errors

    def _errors(self, obj: dict[str, Any]) -> list[FieldError]:
        errors: list[FieldError] = []
        for error in self._validator.iter_errors(obj):
            errors.extend(_field_errors(error))
            if len(errors) >= MAX_ERRORS:
                break
        if len(errors) < MAX_ERRORS:
            errors.extend(_list_key_errors(obj, self.schema, ""))
        unique = list(dict.fromkeys(errors))
        return sorted(unique[:MAX_ERRORS], key=lambda e: (e.field, e.detail))

    def prune(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """`obj` without the fields the schema does not specify, and the paths of those dropped.

        `apiVersion`, `kind` and `metadata` are the API server's and are kept whole."""
        dropped: list[str] = []
        out = {k: v for k, v in obj.items() if k in ("apiVersion", "kind", "metadata")}
        rest = {k: v for k, v in obj.items() if k not in out}
        pruned = _prune(rest, self.schema, "", dropped)
        out.update(pruned if isinstance(pruned, dict) else {})
        return out, dropped

    def invalid_status(self, name: str, errors: Sequence[FieldError]) -> dict[str, Any]:
        """The 422 Status a real API server answers for these errors."""
        qualified = f"{self.kind}.{self.group}"
        words = errors[0].message if len(errors) == 1 else "[" + ", ".join(e.message for e in errors) + "]"
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": f'{qualified} "{name}" is invalid: {words}', "reason": "Invalid",
                "details": {"name": name, "group": self.group, "kind": self.kind,
                            "causes": [e.cause() for e in errors]},
                "code": 422}


def load_crd(plural: str) -> dict[str, Any]:
    """The shipped CRD for `plural` (`sandboxes` or `repos`), read from the package."""
    if plural not in CRD_FILES:
        raise KeyError(f"no CRD is shipped for {plural!r}; shipped: {sorted(CRD_FILES)}")
    text = resources.files("jr2_actors").joinpath("crds", CRD_FILES[plural]).read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise CrdError(CRD_FILES[plural], ["the file does not hold one YAML mapping"])
    return doc


@functools.cache
def schema_for(plural: str) -> CrdSchema:
    """The `CrdSchema` of a shipped CRD, built once per process."""
    return CrdSchema(load_crd(plural))


# -- validation ---------------------------------------------------------------------------------------

def _to_json_schema(s: Any) -> Any:
    """A Kubernetes schema node as JSON Schema (draft 4): int-or-string and nullable spelled out."""
    if not isinstance(s, Mapping):
        return s
    out: dict[str, Any] = {}
    for key, value in s.items():
        if key in ("properties", "definitions"):
            out[key] = {k: _to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _to_json_schema(value)
        elif key in JUNCTORS:
            out[key] = [_to_json_schema(v) for v in value]
        elif not key.startswith("x-kubernetes-") and key not in ("nullable", "default", "example"):
            out[key] = value
    if s.get("x-kubernetes-int-or-string") is True:
        out["type"] = ["integer", "string"]
        if out.get("anyOf") == INT_OR_STRING:
            del out["anyOf"]
    if s.get("nullable") is True and "type" in out:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def _is_integer(checker: object, instance: object) -> bool:
    """JSON `2.0` is an integer to the API server's decoder, as to JSON Schema from draft 6 on."""
    return bool(jsonschema.Draft6Validator.TYPE_CHECKER.is_type(instance, "integer"))


# OpenAPI 3.0's schema dialect is draft 4's (boolean exclusiveMinimum), with the API server's integers.
_VALIDATOR: type[jsonschema.Draft4Validator] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft4Validator, type_checker=jsonschema.Draft4Validator.TYPE_CHECKER.redefine("integer", _is_integer))
_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("date-time")
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True  # the type keyword answers for the wrong type
    if len(value) > 64 or not _DATE_TIME.match(value):
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


@_FORMATS.checks("int32")
def _is_int32(value: object) -> bool:
    return not isinstance(value, int | float) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _is_int64(value: object) -> bool:
    return not isinstance(value, int | float) or -(2**63) <= value < 2**63


_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
               (dict, "object"), (type(None), "null"))


def _type_name(value: object) -> str:
    return next((name for t, name in _JSON_TYPES if isinstance(value, t)), type(value).__name__)


def _show(value: object) -> str:
    """An offending value, quoted as Kubernetes quotes it and cut short: the value may be hostile."""
    try:
        text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= _VALUE_SHOWN else text[:_VALUE_SHOWN] + "…"


def _field(error: jsonschema.ValidationError) -> str:
    """The Kubernetes field path of an error: `.name` for a property, `[key]` for a map entry or index."""
    instance = list(error.absolute_path)
    schema = list(error.absolute_schema_path)
    out, i, k = "", 0, 0
    while i < len(schema) and k <= len(instance):
        step = schema[i]
        if step == "properties" and i + 1 < len(schema) and k < len(instance):
            out += f".{instance[k]}"
            i, k = i + 2, k + 1
        elif step in ("additionalProperties", "items") and k < len(instance):
            out += f"[{instance[k]}]"
            i, k = i + 1, k + 1
        else:
            i += 1
    return out.lstrip(".")


def _field_errors(error: jsonschema.ValidationError) -> Iterator[FieldError]:
    path = _field(error)
    where = path or "<root>"
    value, rule = error.instance, cast(Any, error.validator_value)
    if error.validator == "required":
        present = value if isinstance(value, dict) else {}
        for key in rule:
            if key not in present:
                yield FieldError(f"{path}.{key}".lstrip("."), "FieldValueRequired", "Required value")
        return
    if error.validator == "type":
        kinds = " or ".join(rule) if isinstance(rule, list) else rule
        yield FieldError(path, "FieldValueTypeInvalid",
                         # The real server shows the value's type twice (its type error holds no value).
                         f"Invalid value: {_show(_type_name(value))}: {where} in body must be of type {kinds}: "
                         f"{_show(_type_name(value))}")
    elif error.validator == "enum":
        supported = ", ".join(_show(v) for v in rule)
        yield FieldError(path, "FieldValueNotSupported",
                         f"Unsupported value: {_show(value)}: supported values: {supported}")
    elif error.validator == "format":
        yield FieldError(path, "FieldValueInvalid",
                         f"Invalid value: {_show(value)}: {where} in body must be of type {rule}: {_show(value)}")
    elif error.validator == "maxLength":
        yield FieldError(path, "FieldValueTooLong", f"Too long: may not be more than {rule} bytes")
    elif error.validator == "maxItems":
        yield FieldError(path, "FieldValueTooMany",
                         f"Too many: {len(value) if isinstance(value, list) else '?'}: must have at most {rule} items")
    elif error.validator == "pattern":
        yield FieldError(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {where} in body should match "
                                                    f"'{rule}'")
    elif error.validator in ("minimum", "maximum"):
        side = "greater" if error.validator == "minimum" else "less"
        yield FieldError(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {where} in body should be "
                                                    f"{side} than or equal to {rule}")
    elif error.validator == "minLength":
        yield FieldError(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {where} in body should be at "
                                                    f"least {rule} chars long")
    else:
        yield FieldError(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {error.validator} {_show(rule)}")


def _list_key_errors(value: object, s: Mapping[str, Any], path: str) -> Iterator[FieldError]:
    """Duplicate entries of `x-kubernetes-list-type` map and set lists (the API server refuses them)."""
    if isinstance(value, dict):
        props = s.get("properties") or {}
        additional = s.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                yield from _list_key_errors(sub, props[key], f"{path}.{key}".lstrip("."))
            elif isinstance(additional, Mapping):
                yield from _list_key_errors(sub, additional, f"{path}[{key}]")
    elif isinstance(value, list) and isinstance(s.get("items"), Mapping):
        list_type, keys = s.get("x-kubernetes-list-type"), s.get("x-kubernetes-list-map-keys") or []
        seen: set[str] = set()
        for i, item in enumerate(value):
            if list_type == "map" and isinstance(item, dict):
                identity = _show({k: item.get(k) for k in keys})
            elif list_type == "set":
                identity = _show(item)
            else:
                identity = ""
            if identity and identity in seen:
                yield FieldError(f"{path}[{i}]", "FieldValueDuplicate", f"Duplicate value: {identity}")
            seen.add(identity)
            yield from _list_key_errors(item, s["items"], f"{path}[{i}]")


def _prune(value: Any, s: Mapping[str, Any], path: str, dropped: list[str]) -> Any:
    if isinstance(value, dict):
        props = s.get("properties")
        additional = s.get("additionalProperties")
        preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
        if preserve and not props and not isinstance(additional, Mapping):
            return value
        out: dict[str, Any] = {}
        for key, sub in value.items():
            if isinstance(props, Mapping) and key in props:
                out[key] = _prune(sub, props[key], f"{path}.{key}".lstrip("."), dropped)
            elif isinstance(additional, Mapping):
                out[key] = _prune(sub, additional, f"{path}[{key}]", dropped)
            elif preserve or additional is True:
                out[key] = sub
            else:
                dropped.append(f"{path}.{key}".lstrip("."))
        return out
    if isinstance(value, list) and isinstance(s.get("items"), Mapping):
        return [_prune(item, s["items"], f"{path}[{i}]", dropped) for i, item in enumerate(value)]
    return value
