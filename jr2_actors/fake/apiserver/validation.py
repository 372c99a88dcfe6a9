"""Object metadata validation, in the API server's words (apimachinery validation, `Invalid` 422 Status).

A 422 names every field at fault in `details.causes[].field`, as a real server does, so a client that
reads causes (kubectl, the official client) shows the same thing on the fake and on a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jr2_actors.fake.apiserver.status import Cause, invalid
from jr2_actors.kube.kinds import NAMESPACE, Kind

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

LABEL_VALUE_MESSAGE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                       "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                       "'my_value',  or '12345', regex used for validation is "
                       "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
NAME_PART_MESSAGE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                     "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
SUBDOMAIN_MESSAGE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                     "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                     "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MESSAGE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                 "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")

def is_dns_subdomain(name: str) -> bool:
    """An RFC 1123 subdomain (at most 253 characters): most kinds' object names."""
    return len(name) <= 253 and bool(_DNS_SUBDOMAIN.match(name))


def is_namespace_name(name: str) -> bool:
    """A namespace name as the API server takes it: an RFC 1123 label (at most 63 characters)."""
    return len(name) <= 63 and bool(_DNS_LABEL.match(name))


def check_metadata(kind: Kind, name: str, meta: Mapping[str, Any], *, creating: bool) -> None:
    causes: list[Cause] = []
    if creating:
        if kind is NAMESPACE:
            if not is_namespace_name(name):
                causes.append(("metadata.name", "Invalid value", f'"{name}": {LABEL_MESSAGE}'))
        elif kind.plural == "events":
            # An Event's strategy checks no name rule of its own: only the generic path-segment one
            # (ValidatePathSegmentName), so `kubectl`'s `<object>.<hex>` and any other segment pass.
            if name in (".", "..") or "/" in name or "%" in name:
                causes.append(("metadata.name", "Invalid value", f'"{name}": may not contain \'/\' or \'%\', '
                                                                 "nor be '.' or '..'"))
        elif not is_dns_subdomain(name):
            causes.append(("metadata.name", "Invalid value", f'"{name}": {SUBDOMAIN_MESSAGE}'))
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and not isinstance(value, dict):
            causes.append((f"metadata.{key}", "Invalid value", "must be a map of strings"))
        elif isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(v, str):
                    causes.append((f"metadata.{key}", "Invalid value", f"{k}: values must be strings"))
                    continue
                causes += [(f"metadata.{key}", "Invalid value", f'"{k}": {problem}') for problem in _key_problems(k)]
                if key == "labels" and (len(v) > 63 or not _LABEL_VALUE.match(v)):
                    detail = "must be no more than 63 characters" if len(v) > 63 else LABEL_VALUE_MESSAGE
                    causes.append(("metadata.labels", "Invalid value", f'"{v}": {detail}'))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and sum(len(k) + len(v) for k, v in annotations.items()
                                             if isinstance(v, str)) > 256 * 1024:
        causes.append(("metadata.annotations", "Too long", "must have at most 262144 bytes"))
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)):
        causes.append(("metadata.finalizers", "Invalid value", "must be a list of strings"))
    if causes:
        raise invalid(kind, name, causes)


def _key_problems(key: str) -> list[str]:
    """A qualified name (`prefix/name` or `name`), as label and annotation keys must be."""
    prefix, slash, part = key.rpartition("/")
    problems = []
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        problems.append(f"prefix part {SUBDOMAIN_MESSAGE}")
    if not part:
        problems.append("name part must be non-empty")
    elif len(part) > 63:
        problems.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.match(part):
        problems.append(NAME_PART_MESSAGE)
    return problems
