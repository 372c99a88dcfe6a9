"""Failure answers as a real API server words them: a `StatusError` carries the code, reason and details."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jr2_actors.kube.kinds import Kind

Obj = dict[str, Any]


class StatusError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = None if details is None else dict(details)  # {} is sent as {}, None omitted

    def status(self) -> Obj:
        doc: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            doc["details"] = self.details
        return doc


def qualified(kind: Kind) -> str:
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def not_found(kind: Kind, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{qualified(kind)} "{name}" not found',
                       {"name": name, "group": kind.group, "kind": kind.plural})


MODIFIED_SINCE = "the object has been modified; please apply your changes to the latest version and try again"


def conflict(kind: Kind, name: str, why: str) -> StatusError:
    return StatusError(409, "Conflict", f'Operation cannot be fulfilled on {qualified(kind)} "{name}": {why}',
                       {"name": name, "group": kind.group, "kind": kind.plural})


Cause = tuple[str, str, str]  # (field, type as the message starts: "Invalid value" / "Required value" …, detail)
_CAUSE_REASONS = {"Invalid value": "FieldValueInvalid", "Required value": "FieldValueRequired",
                  "Unsupported value": "FieldValueNotSupported", "Forbidden": "FieldValueForbidden",
                  "Too long": "FieldValueTooLong"}


def invalid(kind: Kind, name: str, causes: Sequence[Cause], *,
            group_kind: tuple[str, str] | None = None) -> StatusError:
    """The 422 `Invalid` Status: `Sandbox.core.jr2.dev "x" is invalid: metadata.labels: Invalid value: …`."""
    group, kind_name = group_kind or (kind.group, kind.kind)
    qualified = f"{kind_name}.{group}" if group else kind_name
    texts = [f"{field}: {_words(what, detail)}" for field, what, detail in causes]
    message = f'{qualified} "{name}" is invalid: ' + (texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]")
    return StatusError(422, "Invalid", message, {
        "name": name, "group": group, "kind": kind_name,
        "causes": [{"reason": _CAUSE_REASONS.get(what, "FieldValueInvalid"), "message": _words(what, detail),
                    "field": field} for field, what, detail in causes]})




def _words(what: str, detail: str) -> str:
    """`Required value` alone, or `Invalid value: "x": why` (field.Error's ErrorBody)."""
    return f"{what}: {detail}" if detail else what


def precondition_failed(kind: Kind, name: str, key: str, wanted: str, actual: object) -> StatusError:
    """A delete precondition that fails: rest.BeforeDelete's 409, named by kind, not resource (v1.37)."""
    label, why = {"uid": ("UID", "deleted and then recreated")}.get(key, ("ResourceVersion", "modified"))
    on = f"{kind.kind}.{kind.group}" if kind.group else kind.kind
    return StatusError(409, "Conflict", f'Operation cannot be fulfilled on {on} "{name}": the {label} in the '
                       f"precondition ({wanted}) does not match the {label} in record ({actual}). The object "
                       f"might have been {why}", {"name": name, "group": kind.group, "kind": kind.kind})


def finalizers_forbidden(kind: Kind, name: str, added: Sequence[str]) -> StatusError:
    """A new finalizer on an object being deleted: named as Go prints a []string (%#v), as the real server does."""
    found = "[]string{" + ", ".join(json.dumps(f) for f in added) + "}"
    return invalid(kind, name, [("metadata.finalizers", "Forbidden", "no new finalizers can be added if the "
                                 f"object is being deleted, found new finalizers {found}")])


def patch_refused(code: int, why: str) -> StatusError:
    """A patch that cannot be read (400, its fault named) or applied: the real server's 422 says only this, with
    an empty `details`."""
    if code == 400:
        return StatusError(400, "BadRequest", why)
    return StatusError(422, "Invalid", "the server rejected our request due to an error in our request", {})


def uid_immutable(kind: Kind, name: str, uid: str) -> StatusError:
    """A patch that carries another uid: kube-apiserver's update validation (ValidateObjectMetaUpdate) refuses it
    as an immutable field, 422, and nothing changes — measured on a real v1.37 server (tests/real/
    test_watch_rules.py); a PUT's uid is a storage precondition instead (409)."""
    return invalid(kind, name, [("metadata.uid", "Invalid value", f'"{uid}": field is immutable')])
