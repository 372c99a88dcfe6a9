"""What a real API server refuses in a CustomResourceDefinition before it serves a kind from it (the
structural-schema rules, names, versions, printer columns): `crd_problems` names each, by path. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_ALLOWED_KEYWORDS = frozenset({
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
    "multipleOf", "enum", "maxProperties", "minProperties", "required", "items", "allOf", "oneOf", "anyOf",
    "not", "properties", "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type", "x-kubernetes-map-type", "x-kubernetes-validations",
})
_FORBIDDEN_KEYWORDS = {"$ref": "$ref is not supported", "id": "id is not supported",
                       "additionalItems": "additionalItems is not supported",
                       "patternProperties": "patternProperties is not supported",
                       "definitions": "definitions is not supported",
                       "dependencies": "dependencies is not supported"}
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_SCALARS = frozenset({"string", "integer", "number", "boolean"})
JUNCTORS = ("allOf", "anyOf", "oneOf")
# In a logical junctor, a structural schema specifies only value validations (the API server's rule).
_NOT_IN_JUNCTORS = ("type", "description", "title", "default", "nullable", "additionalProperties",
                    "externalDocs", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
                    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
                    "x-kubernetes-map-type", "x-kubernetes-validations")
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_COLUMN_TYPES = frozenset({"integer", "number", "string", "boolean", "date"})
_COLUMN_FORMATS = frozenset({"int32", "int64", "float", "double", "byte", "date", "date-time", "password"})
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def crd_problems(crd: object) -> list[str]:
    """Why a real API server (apiextensions.k8s.io/v1) would refuse `crd`; [] when it would accept it."""
    if not isinstance(crd, Mapping):
        return ["a CRD is a mapping"]
    problems: list[str] = []
    if crd.get("apiVersion") != "apiextensions.k8s.io/v1" or crd.get("kind") != "CustomResourceDefinition":
        problems.append("apiVersion/kind: must be apiextensions.k8s.io/v1 CustomResourceDefinition")
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        return [*problems, "spec: Required value"]
    group, names = spec.get("group"), spec.get("names")
    if not isinstance(group, str) or "." not in group:
        problems.append("spec.group: should be a domain with at least one dot")
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        problems.append("spec.scope: Unsupported value: must be Namespaced or Cluster")
    if not isinstance(names, Mapping):
        problems.append("spec.names: Required value")
        names = {}
    for key in ("plural", "singular"):
        value = names.get(key)
        required = key == "plural" or value is not None
        if required and (not isinstance(value, str) or not _DNS1035.match(value)):
            problems.append(f"spec.names.{key}: Invalid value: must be a lowercase DNS-1035 label")
    for key in ("kind", "listKind"):
        value = names.get(key)
        if not isinstance(value, str) or not _DNS1035.match(value.lower()):
            problems.append(f"spec.names.{key}: Required value: a DNS-1035 label in mixed case")
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        problems.append("spec.names.listKind: kind and listKind may not be the same")
    for i, short in enumerate(names.get("shortNames") or []):
        if not isinstance(short, str) or not _DNS1035.match(short):
            problems.append(f"spec.names.shortNames[{i}]: Invalid value: must be a lowercase DNS-1035 label")
    if get_in(crd, "metadata", "name") != f"{names.get('plural')}.{group}":
        problems.append("metadata.name: must be spec.names.plural + '.' + spec.group")
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        return [*problems, "spec.versions: Required value: at least one version"]
    if sum(1 for v in versions if isinstance(v, Mapping) and v.get("storage") is True) != 1:
        problems.append("spec.versions: Invalid value: exactly one version must be the storage version")
    seen: set[str] = set()
    for i, version in enumerate(versions):
        problems.extend(_version_problems(version, f"spec.versions[{i}]", seen))
    return problems


def _version_problems(version: object, path: str, seen: set[str]) -> list[str]:
    if not isinstance(version, Mapping):
        return [f"{path}: must be a mapping"]
    problems: list[str] = []
    name = version.get("name")
    if not isinstance(name, str) or not _DNS1035.match(name):
        problems.append(f"{path}.name: Invalid value: must be a DNS-1035 label")
    elif name in seen:
        problems.append(f"{path}.name: Duplicate value: {name!r}")
    else:
        seen.add(name)
    if not isinstance(version.get("served"), bool) or not isinstance(version.get("storage"), bool):
        problems.append(f"{path}: served and storage are required booleans")
    subresources = version.get("subresources") or {}
    if not isinstance(subresources, Mapping) or set(subresources) - {"status", "scale"}:
        problems.append(f"{path}.subresources: only status and scale exist")
    columns = version.get("additionalPrinterColumns") or []
    problems.extend(_column_problems(columns, f"{path}.additionalPrinterColumns"))
    schema = get_in(version, "schema", "openAPIV3Schema")
    if not isinstance(schema, Mapping):
        return [*problems, f"{path}.schema.openAPIV3Schema: Required value: v1 CRDs need a structural schema"]
    problems.extend(_schema_problems(schema, f"{path}.schema.openAPIV3Schema", "root"))
    return problems


def _column_problems(columns: object, path: str) -> list[str]:
    if not isinstance(columns, list):
        return [f"{path}: must be a list"]
    problems: list[str] = []
    names: set[str] = set()
    for i, column in enumerate(columns):
        where = f"{path}[{i}]"
        if not isinstance(column, Mapping):
            problems.append(f"{where}: must be a mapping")
            continue
        name, path_ = column.get("name"), column.get("jsonPath")
        if not isinstance(name, str) or not name or name in names:
            problems.append(f"{where}.name: Required value: non-empty and unique")
        names.add(str(name))
        if column.get("type") not in _COLUMN_TYPES:
            problems.append(f"{where}.type: Unsupported value: {column.get('type')!r}")
        if "format" in column and column["format"] not in _COLUMN_FORMATS:
            problems.append(f"{where}.format: Unsupported value: {column['format']!r}")
        if not isinstance(path_, str) or not path_.startswith(".") or ".." in path_:
            problems.append(f"{where}.jsonPath: Invalid value: must be a simple JSONPath starting with '.'")
        priority = column.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool) or priority < 0:
            problems.append(f"{where}.priority: Invalid value: must be a non-negative integer")
    return problems


def _schema_problems(s: object, path: str, level: str) -> list[str]:
    """The structural-schema rules, for a node at `level` (`root`, `field` or `item`)."""
    if not isinstance(s, Mapping):
        return [f"{path}: must be a mapping"]
    problems = [f"{path}: unknown field {k!r}" for k in s if k not in _ALLOWED_KEYWORDS]
    problems += [f"{path}.{k}: Forbidden: {why}" for k, why in _FORBIDDEN_KEYWORDS.items() if k in s]
    type_ = s.get("type")
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    if type_ is not None and type_ not in _TYPES:
        problems.append(f"{path}.type: Unsupported value: {type_!r}")
    if type_ is None and not int_or_string and not preserve:
        problems.append(f"{path}.type: Required value: must not be empty for specified {level} schemas")
    if level == "root" and type_ not in (None, "object"):
        problems.append(f"{path}.type: Invalid value: must be object at the root")
    if int_or_string and type_ is not None:
        problems.append(f"{path}.type: Invalid value: must be empty if x-kubernetes-int-or-string is true")
    if int_or_string and preserve:
        problems.append(f"{path}.x-kubernetes-preserve-unknown-fields: must be false if "
                        "x-kubernetes-int-or-string is true")
    if s.get("uniqueItems") is True:
        problems.append(f"{path}.uniqueItems: Forbidden: cannot be true (quadratic)")
    properties, additional = s.get("properties"), s.get("additionalProperties")
    if additional is not None:
        if level == "root":
            problems.append(f"{path}.additionalProperties: Forbidden: must not be used at the root")
        if properties and (additional is False or isinstance(additional, Mapping)):
            problems.append(f"{path}.additionalProperties: Forbidden: additionalProperties and properties are "
                            "mutual exclusive")
        if isinstance(additional, Mapping):
            problems.extend(_schema_problems(additional, f"{path}.additionalProperties", "field"))
        elif not isinstance(additional, bool):
            problems.append(f"{path}.additionalProperties: must be a schema or a boolean")
    if properties is not None:
        if not isinstance(properties, Mapping):
            problems.append(f"{path}.properties: must be a mapping")
        else:
            for key, sub in properties.items():
                problems.extend(_schema_problems(sub, f"{path}.properties[{key}]", "field"))
    items = s.get("items")
    if isinstance(items, list):
        problems.append(f"{path}.items: Forbidden: items must be a schema object and not an array")
    elif items is not None:
        problems.extend(_schema_problems(items, f"{path}.items", "item"))
    elif type_ == "array":
        problems.append(f"{path}.items: Required value: must be specified")
    if "pattern" in s:
        try:
            re.compile(str(s["pattern"]))
        except re.error as e:
            problems.append(f"{path}.pattern: Invalid value: not a regular expression ({e})")
    problems.extend(_metadata_problems(s, path, level))
    problems.extend(_list_type_problems(s, path))
    problems.extend(_junctor_problems(s, path, int_or_string))
    return problems


def _metadata_problems(s: Mapping[str, Any], path: str, level: str) -> list[str]:
    meta = (s.get("properties") or {}).get("metadata") if isinstance(s.get("properties"), Mapping) else None
    if level != "root" or meta is None:
        return []
    if not isinstance(meta, Mapping) or meta.get("type") != "object":
        return [f"{path}.properties[metadata].type: Invalid value: must be object"]
    extra = set(meta) - {"type", "properties"}
    fields = set(meta.get("properties") or {}) - {"name", "generateName"}
    if extra or fields:
        return [f"{path}.properties[metadata]: Forbidden: must not specify anything other than name and "
                "generateName, but metadata is implicitly specified"]
    return []


def _list_type_problems(s: Mapping[str, Any], path: str) -> list[str]:
    list_type, keys = s.get("x-kubernetes-list-type"), s.get("x-kubernetes-list-map-keys")
    if list_type is None:
        return [f"{path}.x-kubernetes-list-map-keys: Forbidden: only with x-kubernetes-list-type: map"] if keys else []
    if s.get("type") != "array":
        return [f"{path}.x-kubernetes-list-type: Invalid value: only arrays have a list type"]
    if list_type not in ("atomic", "set", "map"):
        return [f"{path}.x-kubernetes-list-type: Unsupported value: {list_type!r}"]
    items: Mapping[str, Any] = s["items"] if isinstance(s.get("items"), Mapping) else {}
    if list_type == "set":
        if items.get("type") not in _SCALARS and items.get("x-kubernetes-map-type") != "atomic":
            return [f"{path}.items: Invalid value: a set's items must be scalars"]
        return []
    if list_type != "map":
        return [f"{path}.x-kubernetes-list-map-keys: Forbidden: only with x-kubernetes-list-type: map"] if keys else []
    if not isinstance(keys, list) or not keys:
        return [f"{path}.x-kubernetes-list-map-keys: Required value: a map list needs its keys"]
    if items.get("type") != "object":
        return [f"{path}.items.type: Invalid value: a map list's items must be objects"]
    problems = []
    props, required = items.get("properties") or {}, items.get("required") or []
    for key in keys:
        prop = props.get(key) if isinstance(key, str) else None
        if not isinstance(prop, Mapping) or prop.get("type") not in _SCALARS:
            problems.append(f"{path}.x-kubernetes-list-map-keys: Invalid value: {key!r} must be a scalar property "
                            "of the items")
        elif key not in required and "default" not in prop:
            problems.append(f"{path}.x-kubernetes-list-map-keys: Invalid value: {key!r} must be required or "
                            "have a default")
    return problems


def _junctor_problems(s: Mapping[str, Any], path: str, int_or_string: bool) -> list[str]:
    problems: list[str] = []
    outer = s.get("properties") if isinstance(s.get("properties"), Mapping) else {}
    for junctor in (*JUNCTORS, "not"):
        if junctor not in s:
            continue
        branches = [s[junctor]] if junctor == "not" else s[junctor]
        if not isinstance(branches, list):
            problems.append(f"{path}.{junctor}: must be a list of schemas")
            continue
        if int_or_string and junctor == "anyOf" and branches == INT_OR_STRING:
            continue  # the int-or-string pattern the API server allows
        for i, branch in enumerate(branches):
            where = f"{path}.{junctor}" if junctor == "not" else f"{path}.{junctor}[{i}]"
            problems.extend(_nested_problems(branch, where, outer or {}, s.get("items")))
    return problems


def _nested_problems(branch: object, path: str, outer: Mapping[str, Any], outer_items: object) -> list[str]:
    if not isinstance(branch, Mapping):
        return [f"{path}: must be a mapping"]
    problems = [f"{path}.{k}: Forbidden: must be undefined to be structural" for k in _NOT_IN_JUNCTORS
                if k in branch]
    for key in branch.get("properties") or {}:
        if key == "metadata":
            problems.append(f"{path}.properties[metadata]: Forbidden: must not be specified in a nested context")
        elif key not in outer:
            problems.append(f"{path}.properties[{key}]: Required value: must be specified outside the junctor too")
    if "items" in branch and outer_items is None:
        problems.append(f"{path}.items: Required value: must be specified outside the junctor too")
    return problems


def get_in(doc: object, *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(key)
    return doc
