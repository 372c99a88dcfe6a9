"""Events as a real API server keeps them: one stored form, two API views, its validation and field selectors.

Theory of operation: an Event is stored in its `core/v1` form. A request through `events.k8s.io/v1`
is converted on the way in (`stored`) and on the way out (`view`), field by field as
pkg/apis/events/v1/conversion.go does (`regarding` is `involvedObject`, `note` is `message`, …). On
every write the time fields are normalised as the server's types serialise them (`metav1.Time` to the
second, `metav1.MicroTime` to the microsecond, both UTC); a value that is not an RFC 3339 time is 400.

Validation is pkg/apis/core/validation/events.go: the legacy rules on every write through either view
(`check`), the strict ones on a create or an update through `events.k8s.io/v1` only (`check_v1_create`,
`check_v1_update`). Field selectors are the Event strategy's selectable fields
(pkg/registry/core/event/strategy.go ToSelectableFields), `events.k8s.io/v1` names mapped onto them
(AddFieldLabelConversionsForEvent). Pure.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from jr2_actors.fake.apiserver.kinds import EVENT, EVENTS_V1
from jr2_actors.fake.apiserver.status import Cause, StatusError, invalid
from jr2_actors.fake.apiserver.validation import SUBDOMAIN_MESSAGE, is_dns_subdomain
from jr2_actors.kube.kinds import Kind

Obj = dict[str, Any]

# core/v1 field -> events.k8s.io/v1 field; every other field has one name in both.
_RENAMED = {"involvedObject": "regarding", "message": "note", "source": "deprecatedSource",
            "firstTimestamp": "deprecatedFirstTimestamp", "lastTimestamp": "deprecatedLastTimestamp",
            "count": "deprecatedCount", "reportingComponent": "reportingController"}
_BACK = {v: k for k, v in _RENAMED.items()}

# The JSON type of each field of a core/v1 Event but metadata and the times (checked apart).
_TYPES: dict[str, type] = {"involvedObject": dict, "source": dict, "series": dict, "related": dict, "reason": str,
                           "message": str, "type": str, "action": str, "reportingComponent": str,
                           "reportingInstance": str, "count": int}
_TYPE_NAMES = {dict: "an object", str: "a string", int: "an integer"}
_SECONDS = ("firstTimestamp", "lastTimestamp")  # metav1.Time
_MICROS = ("eventTime",)  # metav1.MicroTime (and series.lastObservedTime)

REPORTING_INSTANCE_LIMIT = ACTION_LIMIT = REASON_LIMIT = 128
NOTE_LIMIT = 1024

# The field selectors `kubectl describe` sends for an object's events are the first four.
CORE_FIELDS = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
               "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
               "reason", "reportingComponent", "source", "type", "metadata.name", "metadata.namespace")
V1_FIELDS = {**{f"regarding.{f.partition('.')[2]}": f for f in CORE_FIELDS if f.startswith("involvedObject.")},
             "reason": "reason", "reportingController": "reportingComponent", "source": "source", "type": "type",
             "metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace"}

_QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def field_labels(kind: Kind) -> Mapping[str, str]:
    """The field selector labels an Event list or watch through `kind` takes, each mapped to the stored field."""
    return V1_FIELDS if kind is EVENTS_V1 else {f: f for f in CORE_FIELDS}


# -- the two views ------------------------------------------------------------------------------------

def stored(kind: Kind, obj: Obj) -> Obj:
    """`obj` as written through `kind`, in the stored (core/v1) form, its times normalised; an object of
    any other kind as it is."""
    if kind.plural != "events":
        return obj
    out = dict(obj)
    if kind is EVENTS_V1:
        out = {_BACK.get(k, k): v for k, v in obj.items()}
        out["apiVersion"], out["kind"] = EVENT.api_version, EVENT.kind
    return _normalised(out, kind)


def view(kind: Kind, obj: Obj) -> Obj:
    """A stored object as read through `kind` (an Event through events.k8s.io/v1 converted; others as they are)."""
    if kind is not EVENTS_V1:
        return obj
    out = {_RENAMED.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = EVENTS_V1.api_version, "Event"
    for key in ("reportingController", "reportingInstance"):  # omitempty in events.k8s.io/v1
        if out.get(key) == "":
            del out[key]
    return out


def _normalised(obj: Obj, kind: Kind) -> Obj:
    """As the server serialises a core/v1 Event: the struct fields always there, empty times null, each
    time in its type's precision."""
    for key, want in _TYPES.items():
        value = obj.get(key)
        if value is not None and (not isinstance(value, want) or isinstance(value, bool)):
            # The decoder's refusal of a field of the wrong JSON type (400, as for a bad time).
            field = _RENAMED.get(key, key) if kind is EVENTS_V1 else key
            raise StatusError(400, "BadRequest", f'Event in version "{kind.version}" cannot be handled as a Event: '
                                                 f"{field}: expected {_TYPE_NAMES[want]}, got {json.dumps(value)[:40]}")
    obj.setdefault("involvedObject", {})
    obj.setdefault("source", {})
    obj.setdefault("reportingComponent", "")
    obj.setdefault("reportingInstance", "")
    for key in _SECONDS:
        obj[key] = _time(kind, key, obj.get(key), micro=False)
    for key in _MICROS:
        obj[key] = _time(kind, key, obj.get(key), micro=True)
    series = obj.get("series")
    if isinstance(series, dict) and "lastObservedTime" in series:
        series = copy.copy(series)
        series["lastObservedTime"] = _time(kind, "series.lastObservedTime", series["lastObservedTime"], micro=True)
        obj["series"] = series
    return obj


def _time(kind: Kind, field: str, value: object, *, micro: bool) -> str | None:
    if value in (None, ""):
        return None
    parsed = parse_time(value)
    if parsed is None:
        # The decoder's refusal: the body cannot be read as the kind at all (400, not 422).
        raise StatusError(400, "BadRequest", f'Event in version "{kind.version}" cannot be handled as a Event: '
                                             f"{field}: parsing time {json.dumps(value)[:80]}: not an RFC 3339 time")
    utc = parsed.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if micro else utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 date-time (with a zone), or None."""
    if not isinstance(value, str) or len(value) > 64 or "T" not in value.upper():
        return None
    try:
        parsed = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


# -- validation ---------------------------------------------------------------------------------------

def check(obj: Obj) -> None:
    """legacyValidateEvent, on every write of an Event (the stored form, its namespace final). A 422 names
    the internal kind, `Event` of group "", through either view."""
    causes = _legacy(obj)
    if causes:
        raise invalid(EVENT, obj["metadata"].get("name", ""), causes)


def check_v1_create(obj: Obj, namespace: str | None) -> None:
    """ValidateEventCreate's strict rules for a create through events.k8s.io/v1 (the stored form)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    causes = _legacy({**obj, "metadata": {**meta, "namespace": namespace}})
    # ValidateObjectMeta with NameIsDNSSubdomain: stricter than a core/v1 Event's name (a path segment).
    candidate = name or (str(meta.get("generateName") or "") + "x")
    if not is_dns_subdomain(candidate):
        causes.append(("metadata.name", "Invalid value", f'"{name}": {SUBDOMAIN_MESSAGE}'))
    causes += _series(obj)
    if not obj.get("eventTime"):
        causes.append(("eventTime", "Required value", ""))
    if obj.get("type") not in ("Normal", "Warning"):
        causes.append(("type", "Invalid value", f'"": has invalid value: {obj.get("type") or ""}'))
    for key in ("firstTimestamp", "lastTimestamp", "count"):
        if obj.get(key):
            causes.append((key, "Invalid value", '"": needs to be unset'))
    source = obj.get("source")
    if isinstance(source, dict) and (source.get("component") or source.get("host")):
        causes.append(("source", "Invalid value", '"": needs to be unset'))
    if causes:
        raise invalid(EVENT, name, causes)


_IMMUTABLE = ("involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count", "type",
              "eventTime", "action", "related", "reportingComponent", "reportingInstance")


def check_v1_update(new: Obj, old: Obj) -> None:
    """ValidateEventUpdate's strict rules for an update through events.k8s.io/v1: only the series (and
    metadata) may change."""
    causes = _legacy(new)
    if new.get("series") != old.get("series"):
        causes += _series(new)
    for key in _IMMUTABLE:
        if new.get(key) != old.get(key):
            field = "reportingController" if key == "reportingComponent" else key  # the internal name
            causes.append((field, "Invalid value", f"{json.dumps(new.get(key))[:80]}: field is immutable"))
    if causes:
        raise invalid(EVENT, old["metadata"]["name"], causes)


def _legacy(obj: Obj) -> list[Cause]:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    involved = _map(obj.get("involvedObject"))
    involved_ns = str(involved.get("namespace") or "")
    mismatch = ("involvedObject.namespace", "Invalid value", f'"{involved_ns}": does not match event.namespace')
    causes: list[Cause] = []
    if not obj.get("eventTime"):
        # An old-style event: its namespace and its object's agree ("default" for a cluster-scoped object).
        if (not involved_ns and namespace not in ("", "default")) or (involved_ns and namespace != involved_ns):
            causes.append(mismatch)
        return causes
    if not involved_ns and namespace not in ("default", "kube-system"):
        causes.append(mismatch)
    controller = str(obj.get("reportingComponent") or "")
    if not controller:
        causes.append(("reportingController", "Required value", ""))
    elif len(controller) > 316 or not _QUALIFIED_NAME.match(controller):
        causes.append(("reportingController", "Invalid value", f'"{controller}": must be a qualified name'))
    for key, limit in (("reportingInstance", REPORTING_INSTANCE_LIMIT), ("action", ACTION_LIMIT),
                       ("reason", REASON_LIMIT)):
        value = str(obj.get(key) or "")
        if not value:
            causes.append((key, "Required value", ""))
        elif len(value) > limit:
            causes.append((key, "Invalid value", f'"": can have at most {limit} characters'))
    if len(str(obj.get("message") or "")) > NOTE_LIMIT:
        causes.append(("message", "Invalid value", f'"": can have at most {NOTE_LIMIT} characters'))
    return causes


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _series(obj: Obj) -> list[Cause]:
    series = obj.get("series")
    if not isinstance(series, dict):
        return []
    causes: list[Cause] = []
    count = series.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 2:
        causes.append(("series.count", "Invalid value", '"": should be at least 2'))
    if not series.get("lastObservedTime"):
        causes.append(("series.lastObservedTime", "Required value", ""))
    return causes


# -- printing -----------------------------------------------------------------------------------------

COLUMNS = ("Last Seen", "Type", "Reason", "Object", "Message")


def row(obj: Mapping[str, Any], now_wall: float, age: Any) -> list[str]:
    """A `kubectl get events` row (the server's event printer): last seen, type, reason, kind/name, message;
    `obj` in either view."""
    involved = _map(obj.get("involvedObject") or obj.get("regarding"))
    last = (_map(obj.get("series")).get("lastObservedTime") or obj.get("lastTimestamp")
            or obj.get("deprecatedLastTimestamp") or obj.get("eventTime") or _map(obj.get("metadata")).get(
                "creationTimestamp"))
    seen = parse_time(last)
    return ["<unknown>" if seen is None else age(max(int(now_wall - seen.timestamp()), 0)), str(obj.get("type", "")),
            str(obj.get("reason", "")), f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            str(obj.get("message") or obj.get("note") or "")]
