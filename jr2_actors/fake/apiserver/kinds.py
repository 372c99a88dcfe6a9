"""The kinds the fake API server serves: jr2's own (jr2_actors/kube/kinds.py) and Events.

Events are not jr2's: the Orchestrator neither reads nor writes them. The fake serves them because the
operators a user runs against it post them (kopf posts one per handler) and `kubectl describe` lists them.
`core/v1` and `events.k8s.io/v1` are two views of one stored kind, as on a real API server (one etcd
prefix, converted per request): the store keeps the `core/v1` form (`storage_kind`).
"""

from __future__ import annotations

from jr2_actors.kube.kinds import JR2_KINDS, Kind

CUSTOM_GROUP = "core.jr2.dev"  # the group of jr2's CRDs; every other served kind is built in
EVENTS_GROUP = "events.k8s.io"

EVENT = Kind("v1", "Event", "events")
EVENTS_V1 = Kind(f"{EVENTS_GROUP}/v1", "Event", "events")

SERVED_KINDS: tuple[Kind, ...] = (*JR2_KINDS, EVENT, EVENTS_V1)
STORED_KINDS: dict[str, Kind] = {k.plural: k for k in (*JR2_KINDS, EVENT)}  # by plural: the form stored


def storage_kind(kind: Kind) -> Kind:
    """The kind an object of `kind` is stored as (`events.k8s.io/v1` Events are stored as `core/v1` ones)."""
    return STORED_KINDS[kind.plural]


def is_custom(kind: Kind) -> bool:
    """A custom resource (one of jr2's CRDs), as against a built-in kind: they differ in patch types,
    unconditional updates and the status subresource."""
    return kind.group == CUSTOM_GROUP
