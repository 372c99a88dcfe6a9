"""DeliveryCache: what each waiter is told about its Sandbox (ADR-0063, dagr T107) — pure.

Theory of operation. The cache hears the stream keeper's signals — a list's `Snapshot`, a watch
`Change`, the watch going `Blind` — and the registrations, and decides what every waiter is told. It
knows nothing of streams, versions to resume from or backoff.

- Identity: a Sandbox is routed by its annotations (labels only select); one that cannot be is
  reported `Foreign` once per uid and reason, and routed nowhere.
- Dedup: deliveries collapse on (uid, resourceVersion, phase, scheduling reason, waiting reason), so a
  repeat from the API, across a reconnect or during a re-list notifies once; an older version after a
  newer one is dropped. The signature is read straight from the object (`watch/signature.py`); the typed
  `SandboxView` is built only for a frame that is delivered (or recorded as the key's latest).
- Retirement: a deleted object, or one a list no longer returns, is `Gone` exactly once and its uid
  retires (late frames for it are ignored); `Lost` is terminal and retires too, and its traces are
  dropped when the object goes. A new object under the same key re-arms; an older incarnation's
  deletion does not bury the current object.
- The waiter's own Lease renewal: the first change carrying the keepalive stamp the process's renewal
  lane is writing for that key (`own_stamps`, read here: no message per renewal) is not told when nothing
  else the waiter reads changed — the same uid and the same `SandboxView` but for the resourceVersion —
  since the PATCH answer already gave the lane that version. Anything else in the change, a second change
  carrying the same stamp, or the stamp of another writer (another holder) is delivered as ever; the
  object is still recorded as the key's latest.
- The latest delivery per key is kept (bounded) for later waiters, none of an ended run's (`watch/latest.py`).
- Registrations (ADR-0064: a state re-entered gets the same name, so a key comes back): a fresh waiter
  — its Workspace applies the Sandbox after registering — is handed the latest `SandboxSeen` (the
  object its apply may adopt unchanged) but never a cached `SandboxGone`: that can only be an older
  incarnation's end. A restored waiter is answered by the first list after start, present or gone, and
  at once (its cached Gone included) when that list is past. While blind, a registration is told
  `WatchFailed` at once.
- Blind and back: every waiter is told `WatchFailed` once; the first list that works reconciles every
  waiter that had an answer (present: its object again; absent: gone) and every restored one. A waiter
  that never saw its Sandbox waits for it as before: absence is not loss for a Sandbox not yet applied.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from jr2_actors.kube.frames import WatchEvent
from jr2_actors.values.metadata import meta_text
from jr2_actors.watch.identity import KEEPALIVE_ANNOTATION, Foreign, SandboxKey, identify
from jr2_actors.watch.latest import Latest
from jr2_actors.watch.sandbox import SandboxView, view
from jr2_actors.watch.signature import Signature
from jr2_actors.watch.signature import signature as signature_of
from jr2_actors.watch.stream import Blind, Change, Signal, Snapshot, Termination, older

KEEP_LATEST = 10_000


class OwnStampsView(Protocol):
    """Where the renewal lane notes the stamp it is writing per key (`watch.messages.OwnStamps`)."""

    def get(self, key: SandboxKey) -> str | None: ...


@dataclass(frozen=True, slots=True)  # slots: one per event
class SandboxSeen:
    key: SandboxKey
    sandbox: SandboxView
    object: Mapping[str, Any] = field(repr=False, compare=False)
    written_at: float | None = field(default=None, compare=False)  # the event's: see `WatchEvent`


@dataclass(frozen=True, slots=True)
class SandboxGone:
    key: SandboxKey
    name: str
    uid: str
    reason: Literal["deleted", "absent", "replaced"]
    written_at: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class WatchFailed:
    """The watch is blind: the cluster's state is unknown (not lost) until a list works again."""

    key: SandboxKey
    termination: Termination
    message: str


Delivery = SandboxSeen | SandboxGone | WatchFailed


@dataclass(slots=True)
class Told:
    deliveries: list[Delivery] = field(default_factory=list)
    reports: list[Foreign] = field(default_factory=list)


class DeliveryCache:
    def __init__(self, *, keep_latest: int = KEEP_LATEST, deliver_all: bool = False,
                 own_stamps: OwnStampsView | None = None) -> None:
        self._keep = keep_latest
        self.deliver_all = deliver_all  # a tap (the `watch` command) hears every key, registered or not
        self.waiters: set[SandboxKey] = set()
        self._restored: set[SandboxKey] = set()
        self._answered: set[SandboxKey] = set()  # waiters handed an object delivery since they registered
        self._last: Latest[SandboxSeen | SandboxGone] = Latest(keep_latest)
        self._signature: dict[SandboxKey, tuple[str, Signature]] = {}  # key → (uid, signature)
        self._known: dict[str, tuple[SandboxKey, str]] = {}  # name → (key, uid) of objects present
        self._retired: OrderedDict[str, None] = OrderedDict()  # uids (bounded)
        self._foreign_reported: OrderedDict[str, None] = OrderedDict()
        self._listed_once = False
        self._blind: Blind | None = None
        self._own_stamps = own_stamps
        self._held: dict[SandboxKey, str] = {}  # the own stamp whose change was held back, per waiter

    @property
    def listed_once(self) -> bool:
        """A list has answered since start: until then nothing the watch says is the cluster's word."""
        return self._listed_once

    @property
    def tracked(self) -> int:
        """Objects the cache follows now: bounded by what the cluster holds."""
        return len(self._signature)

    # -- registrations ---------------------------------------------------------------------------------

    def register(self, key: SandboxKey, restored: bool) -> Told:
        told = Told()
        self.waiters.add(key)
        self._answered.discard(key)
        if restored:
            self._restored.add(key)
        else:
            self._restored.discard(key)
        if self._blind is not None:
            told.deliveries.append(WatchFailed(key, self._blind.termination, self._blind.message))
            return told
        last = self._last.get(key)
        if isinstance(last, SandboxSeen) or (restored and last is not None):
            told.deliveries.append(_replayed(last))
            self._answered.add(key)
        elif restored and self._listed_once:
            self._deliver(SandboxGone(key, "", "", "absent"), told)
        return told

    def unregister(self, key: SandboxKey) -> None:
        self.waiters.discard(key)
        self._restored.discard(key)
        self._answered.discard(key)
        self._held.pop(key, None)
        self._last.left(key)

    def run_ended(self, run_id: str) -> None:
        """The run is over for good: none of its keys' deliveries is kept for a waiter (none comes)."""
        self._last.run_ended(run_id, self.waiters)

    # -- signals ---------------------------------------------------------------------------------------

    def hear(self, signal: Signal) -> Told:
        told = Told()
        if isinstance(signal, Snapshot):
            self._snapshot(signal, told)
        elif isinstance(signal, Change):
            return self.change(signal.event)
        else:
            self._go_blind(signal, told)
        return told

    def change(self, event: WatchEvent) -> Told:
        """A watch event (`hear(Change(event))`, which the core calls straight for a frame off the stream)."""
        told = Told()
        if event.type == "DELETED":
            self._deleted(event.object, told, event.written_at)
        else:
            self._observe(event.object, told, event.written_at)
        return told

    def _snapshot(self, snapshot: Snapshot, told: Told) -> None:
        present: dict[SandboxKey, Mapping[str, Any]] = {}
        names: set[str] = set()
        for obj in snapshot.items:
            names.add(_name(obj))
            key = self._observe(obj, told)
            if key is not None:
                present[key] = obj
        for name, (key, uid) in list(self._known.items()):
            if name not in names:
                self._gone(key, name, uid, "absent", told)
        first = not self._listed_once
        self._listed_once = True
        if snapshot.recovered:
            self._blind = None
            self._reconcile(present, told)
        elif first:
            for key in sorted(self._restored - present.keys()):
                if key in self.waiters and key not in self._last:
                    self._deliver(SandboxGone(key, "", "", "absent"), told)

    def _reconcile(self, present: Mapping[SandboxKey, Mapping[str, Any]], told: Told) -> None:
        """After blindness, every waiter this list has not answered yet hears where its Sandbox stands."""
        answered_now = {d.key for d in told.deliveries}
        for key in sorted(self.waiters - answered_now):
            obj = present.get(key)
            if obj is not None:
                self._deliver(SandboxSeen(key, view(obj), obj), told)
            elif key in self._answered or key in self._restored:
                last = self._last.get(key)
                if isinstance(last, SandboxGone):
                    self._deliver(_replayed(last), told)
                elif isinstance(last, SandboxSeen):
                    self._deliver(SandboxGone(key, last.sandbox.name, last.sandbox.uid, "absent"), told)
                else:
                    self._deliver(SandboxGone(key, "", "", "absent"), told)

    def _go_blind(self, blind: Blind, told: Told) -> None:
        self._blind = blind
        keys = self.waiters | (set(self._last) if self.deliver_all else set())
        told.deliveries.extend(WatchFailed(key, blind.termination, blind.message) for key in sorted(keys))

    # -- objects ---------------------------------------------------------------------------------------

    def _observe(self, obj: Mapping[str, Any], told: Told, written_at: float | None = None) -> SandboxKey | None:
        ident = identify(obj)
        if isinstance(ident, Foreign):
            self._foreign(ident, told)
            return None
        key = ident
        uid = _uid(obj)
        if uid in self._retired:
            return key  # a late frame for a retired object
        previous = self._signature.get(key)
        signature = signature_of(obj)  # read from the object: the typed view is built only for a delivery
        if previous is not None and previous[0] != uid:
            if previous[0] not in self._retired:
                self._gone(key, _name(obj), previous[0], "replaced", told, written_at)
        elif previous is not None and (previous[1] == signature or older(signature[0], previous[1][0])):
            return key
        elif previous is not None and self._own_stamps is not None and self._own_stamps.get(key) is not None \
                and self._own_renewal(key, sandbox := view(obj), obj):  # a view only when a stamp is noted
            self._signature[key] = (uid, signature)
            self._last.keep(SandboxSeen(key, sandbox, obj), key in self.waiters)  # for a later registration
            return key
        sandbox = view(obj)
        self._signature[key] = (uid, signature)
        self._known[sandbox.name] = (key, uid)
        self._deliver(SandboxSeen(key, sandbox, obj, written_at), told)
        if sandbox.terminal:
            self._retire(uid)  # Lost is the last word; its traces go when the object does
        return key

    def _own_renewal(self, key: SandboxKey, sandbox: SandboxView, obj: Mapping[str, Any]) -> bool:
        """The first change carrying the stamp the lane is writing for the waiter, nothing else it reads changed."""
        own = self._own_stamps
        stamp = None if own is None or key not in self.waiters else own.get(key)
        if stamp is None or _keepalive(obj) != stamp or self._held.get(key) == stamp:
            return False
        self._held[key] = stamp  # one change per stamp: a later one carrying it is someone else's write
        last = self._last.get(key)
        return isinstance(last, SandboxSeen) and sandbox._replace(resource_version=last.sandbox.resource_version) \
            == last.sandbox

    def _deleted(self, obj: Mapping[str, Any], told: Told, written_at: float | None) -> None:
        ident = identify(obj)
        if isinstance(ident, Foreign):
            self._foreign(ident, told)
            return
        uid = _uid(obj)
        current = self._signature.get(ident)
        if current is not None and current[0] != uid:
            self._retire(uid)  # an older incarnation's deletion: the key's current object lives on
            return
        self._gone(ident, _name(obj), uid, "deleted", told, written_at)

    def _gone(self, key: SandboxKey, name: str, uid: str, reason: Literal["deleted", "absent", "replaced"],
              told: Told, written_at: float | None = None) -> None:
        known = self._known.get(name)
        if known is not None and known[1] == uid:
            del self._known[name]
        current = self._signature.get(key)
        if current is not None and current[0] == uid:
            del self._signature[key]
        if uid in self._retired:
            return
        self._retire(uid)
        self._deliver(SandboxGone(key, name, uid, reason, written_at), told)

    def _deliver(self, delivery: SandboxSeen | SandboxGone, told: Told) -> None:
        key = delivery.key
        self._last.keep(delivery, key in self.waiters)
        if key in self.waiters:
            self._answered.add(key)
            told.deliveries.append(delivery)
        elif self.deliver_all:
            told.deliveries.append(delivery)

    def _retire(self, uid: str) -> None:
        self._retired[uid] = None
        while len(self._retired) > self._keep:
            self._retired.popitem(last=False)

    def _foreign(self, foreign: Foreign, told: Told) -> None:
        tag = f"{foreign.uid}:{foreign.why}"
        if tag in self._foreign_reported:
            return
        self._foreign_reported[tag] = None
        while len(self._foreign_reported) > self._keep:
            self._foreign_reported.popitem(last=False)
        told.reports.append(foreign)


def _replayed(delivery: SandboxSeen | SandboxGone) -> SandboxSeen | SandboxGone:
    """A cached delivery told again later: its event's write time is not this delivery's."""
    return delivery if delivery.written_at is None else replace(delivery, written_at=None)


def _name(obj: Mapping[str, Any]) -> str:
    return meta_text(obj, "name")


def _uid(obj: Mapping[str, Any]) -> str:
    return meta_text(obj, "uid")


def _keepalive(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    value = annotations.get(KEEPALIVE_ANNOTATION) if isinstance(annotations, dict) else None
    return value if isinstance(value, str) else None
