"""Built-in Kubernetes objects checked against the official client's models: every field known, every
scalar of its type. What a strict API server refuses (an unknown field under `fieldValidation=Strict`, a
string where an integer goes) is found here, offline, without a cluster."""

from __future__ import annotations

import re
from typing import Any

import kubernetes.client.models as models

_CONTAINER = re.compile(r"^(?:List\[(?P<list>.+)\]|list\[(?P<list2>.+)\]|Dict\[str, (?P<dict>.+)\]|"
                        r"dict\(str, (?P<dict2>.+)\))$")
_SCALARS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,),
                                         "datetime": (str,), "date": (str,), "bytes": (str,)}


def model_problems(obj: dict[str, Any]) -> list[str]:
    """Why a strict API server would refuse `obj` (a built-in kind); [] when every field is its model's."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    version = api_version.rpartition("/")[2]
    model = getattr(models, f"{version.capitalize()}{kind}", None)
    if model is None:
        return [f"{api_version} {kind}: no such kind in the official client"]
    where = f"{kind}/{(obj.get('metadata') or {}).get('name', '?')}"
    return list(_walk(obj, model.__name__, where))


def _walk(value: Any, type_name: str, path: str) -> Any:
    match = _CONTAINER.match(type_name)
    if match:
        inner = match.group("list") or match.group("list2")
        if inner is not None:
            if not isinstance(value, list):
                yield f"{path}: must be a list"
                return
            for i, item in enumerate(value):
                yield from _walk(item, inner, f"{path}[{i}]")
            return
        inner = match.group("dict") or match.group("dict2")
        if not isinstance(value, dict):
            yield f"{path}: must be a mapping"
            return
        for key, item in value.items():
            yield from _walk(item, inner, f"{path}[{key}]")
        return
    if type_name == "object":
        return  # int-or-string, raw extensions and the like: the model does not say
    if type_name in _SCALARS:
        ok = isinstance(value, _SCALARS[type_name]) and not (type_name != "bool" and isinstance(value, bool))
        if not ok:
            yield f"{path}: {value!r} is not of type {type_name}"
        return
    model = getattr(models, type_name, None)
    if model is None:
        yield f"{path}: the official client has no model {type_name}"
        return
    if not isinstance(value, dict):
        yield f"{path}: must be a mapping ({type_name})"
        return
    fields = {json_key: model.openapi_types[attr] for attr, json_key in model.attribute_map.items()}
    for key, item in value.items():
        if key not in fields:
            yield f"{path}: unknown field {key!r} ({type_name})"
        elif item is not None:
            yield from _walk(item, fields[key], f"{path}.{key}")
