"""The fake API server's object store and watch history: pure, single-threaded, deterministic.

Theory of operation: the store holds objects of jr2's kinds and Events by (plural, namespace, name) and
one increasing resourceVersion counter. An Event is held in its core/v1 form; a call through
`events.k8s.io/v1` is converted on the way in and out (events.py), so both views share objects, versions
and watches, as on a real API server. Every change that alters an object bumps the counter, stamps the
object, appends an event to a bounded history, and hands the event to each matching watcher's sink. A
change that alters nothing (a no-op patch or apply) bumps nothing and notifies no one, as on a real
API server — which is what makes "the operator writes status only when it changes" observable.

Writes follow the API conventions where a client can tell: server-managed metadata (uid,
creationTimestamp, resourceVersion, generation) is never taken from a client; `dryRun=All` validates
and answers without storing; PUT replaces; delete honours preconditions, finalizers and the
propagation policy. Server-side apply tracks field ownership per manager (apiserver/apply.py).

Watch semantics follow the API server's watch cache: no version (or "0") replays the current objects
as ADDED; a version at or after the oldest retained event replays what came after it; an older one is
answered with the 410 `Expired` ERROR frame (inside an HTTP 200, written by the HTTP layer). A watch
with a selector sees an object relabelled out of it as DELETED and one relabelled into it as ADDED. The
history is bounded (the last 256 events by default) and can be compacted at once.

Errors are `StatusError`s carrying the code and reason a real API server answers with. The store
never reads a clock of its own: times are passed in.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

from jr2_actors.fake.apiserver import apply as ssa
from jr2_actors.fake.apiserver import events, patches
from jr2_actors.fake.apiserver import status as statuses
from jr2_actors.fake.apiserver.kinds import EVENT, EVENTS_V1, is_custom, storage_kind
from jr2_actors.fake.apiserver.objects import (
    FOREGROUND,
    GENERATION_KINDS,
    SERVER_META,
    STATUS_KINDS,
    Event,
    History,
    Obj,
    Sink,
    Watcher,
    WriteOptions,
    check_body,
    check_immutable,
    check_namespace,
    check_subresource,
    decode_continue,
    dependents,
    encode_continue,
    expired_frame,
    fold_string_data,
    json_copy,
    key_of,
    key_text,
    kind_named,
    list_answer,
    name_suffix,
    set_defaults,
    sort_key,
    spec_of,
    uid_text,
    validate_object,
)
from jr2_actors.fake.apiserver.selectors import FieldSelector, Selector
from jr2_actors.fake.apiserver.status import MODIFIED_SINCE, StatusError, conflict, invalid, not_found, qualified
from jr2_actors.fake.apiserver.validation import check_metadata
from jr2_actors.kube.kinds import NAMESPACE, Kind
from jr2_actors.values.timefmt import rfc3339

DEFAULT_HISTORY = 256
DEFAULT_OPTIONS = WriteOptions()
class ClusterState:
    def __init__(self, *, namespaces: tuple[str, ...] = ("default",), history: int = DEFAULT_HISTORY,
                 now: float = 0.0, entropy: Callable[[], int] | None = None) -> None:
        """`entropy`: 128 bits for each uid and generated name (the shell's, from `uuid.uuid4`); by
        default a counter's, unique in this state only, so the store draws no randomness of its own."""
        if history < 1:
            raise ValueError("history must hold at least one event")
        counter = itertools.count(1)
        self._entropy = entropy or (lambda: (4 << 76) | next(counter))
        self.rv = 0
        self._objects: dict[tuple[str, str | None, str], Obj] = {}
        self.history = History(history)
        for ns in namespaces:
            if not self.exists(NAMESPACE, None, ns):
                self.create(NAMESPACE, None, {"metadata": {"name": ns}}, now=now)

    # -- reads ---------------------------------------------------------------------------------------

    def exists(self, kind: Kind, namespace: str | None, name: str) -> bool:
        return (kind.plural, namespace, name) in self._objects

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self._objects.get((kind.plural, namespace, name))
        if obj is None:
            raise not_found(kind, name)
        return events.view(kind, json_copy(obj))

    def list_objects(self, kind: Kind, namespace: str | None, selector: Selector | None = None,
                     fields: FieldSelector | None = None, *, limit: int | None = None,
                     continue_token: str | None = None) -> Obj:
        """A list; with `limit`, one page and a `continue` token for the next. As the etcd store does, every
        page shows the objects as they were at the first page's version (a token from before the retained
        history is 410 Expired; a token this server did not write is 400)."""
        selector = selector or Selector()
        fields = fields or FieldSelector()
        start, list_rv = ("", self.rv) if not continue_token else decode_continue(continue_token)
        items: list[Obj] = []
        remaining = 0
        meta: Obj = {"resourceVersion": str(list_rv)}
        for key, o in sorted(self._as_of(list_rv, kind).items(), key=sort_key):
            if key[0] != kind.plural or (namespace is not None and key[1] != namespace):
                continue
            if start and key_text(key) <= start:
                continue
            if not (selector.matches(o["metadata"].get("labels")) and fields.matches(o)):
                continue
            if limit is not None and len(items) == limit:
                meta["continue"] = encode_continue(key_text(key_of(kind, items[-1])), list_rv)
                remaining += 1
                continue
            items.append(events.view(kind, json_copy(o)))
        return list_answer(kind, meta, items, remaining if not (selector.requirements or fields.requirements) else 0)

    def _as_of(self, rv: int, kind: Kind) -> dict[tuple[str, str | None, str], Obj]:
        """The objects of `kind` as they were at `rv`, undoing the retained history after it."""
        objects = {k: o for k, o in self._objects.items() if k[0] == kind.plural}
        if rv >= self.rv:
            return objects
        if rv < self.history.compacted_through:
            raise StatusError(410, "Expired", "The provided continue parameter is too old to display a consistent "
                                              "list result. You can start a new list without the continue "
                                              "parameter.")
        self.history.undo_after(rv, kind.plural, objects)
        return objects

    def objects(self, kind: Kind) -> list[Obj]:
        return [events.view(kind, json_copy(o))
                for (plural, _, _), o in sorted(self._objects.items(), key=sort_key) if plural == kind.plural]

    @property
    def oldest_retained(self) -> int:
        return self.history.oldest(self.rv)

    # -- writes --------------------------------------------------------------------------------------

    def create(self, kind: Kind, namespace: str | None, body: Obj, *, now: float,
               options: WriteOptions = DEFAULT_OPTIONS) -> Obj:
        check_body(kind, namespace, body)
        if kind is EVENTS_V1:
            core = events.stored(kind, body)
            events.check_v1_create(core, namespace)  # the strict rules of a create through events.k8s.io
            return events.view(kind, self.create(EVENT, namespace, core, now=now, options=options))
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not name and isinstance(meta.get("generateName"), str) and meta["generateName"]:
            name = meta["generateName"] + name_suffix(self._entropy())  # the API server's five random characters
        if not name:
            raise invalid(kind, "", [("metadata.name", "Required value", "name or generateName is required")])
        check_metadata(kind, name, {**meta, "name": name}, creating=True)
        check_namespace(self._objects, kind, namespace)
        if (kind.plural, namespace, name) in self._objects:
            raise StatusError(409, "AlreadyExists", f'{qualified(kind)} "{name}" already exists',
                              {"name": name, "group": kind.group, "kind": kind.plural})
        obj = events.stored(kind, fold_string_data(kind, json_copy(body)))
        obj["apiVersion"] = kind.api_version
        obj["kind"] = kind.kind
        m = obj.setdefault("metadata", {})
        for key in SERVER_META:
            m.pop(key, None)
        m["name"] = name
        m["uid"] = uid_text(self._entropy())
        m["creationTimestamp"] = rfc3339(now)
        if kind.plural in GENERATION_KINDS:
            m["generation"] = 1
        set_defaults(kind, obj)
        if kind.namespaced:
            m["namespace"] = namespace
        if kind.plural in STATUS_KINDS:
            obj.pop("status", None)
        if kind is NAMESPACE:  # the strategy's label, its writer's field too (its defaults below are nobody's)
            m["labels"] = {**(m.get("labels") or {}), "kubernetes.io/metadata.name": name}
        if options.manager:
            ssa.record_update(obj, None, options.manager, kind.api_version, now)
        if kind is NAMESPACE:
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
        validate_object(kind, obj)
        if options.dry_run:
            return obj  # as a real server answers a dry-run create: no resourceVersion, nothing stored
        return self._commit("ADDED", kind, namespace, obj)

    def apply(self, kind: Kind, namespace: str | None, name: str, body: Obj, *, manager: str, now: float,
              force: bool = True, subresource: str | None = None, options: WriteOptions = DEFAULT_OPTIONS) -> Obj:
        """Server-side apply: create when absent, else merge what `manager` applies, taking ownership of
        those fields and removing the ones it applied before and applies no longer (apply.py)."""
        if not manager:
            raise StatusError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                                              "Required value: is required for apply patch")
        check_body(kind, namespace, body)
        view, kind = kind, storage_kind(kind)
        body_name = (body.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise StatusError(400, "BadRequest", "the name of the object "
                                                 f"({body_name}) does not match the name on the URL ({name})")
        existing = self._objects.get((kind.plural, namespace, name))
        if existing is None:
            if subresource is not None:
                raise not_found(kind, name)
            applied = json_copy(body)
            applied.setdefault("metadata", {})["name"] = name
            created = self.create(view, namespace, applied, now=now, options=WriteOptions(dry_run=True))
            ssa.record_apply(created, None, applied, manager, view.api_version, now, subresource=None)
            if options.dry_run:
                return created
            return events.view(view, self._commit("ADDED", kind, namespace, events.stored(view, created)))
        merged = ssa.apply(view, events.view(view, json_copy(existing)),
                           fold_string_data(kind, json_copy(body)), manager, force=force, subresource=subresource,
                           status_kind=kind.plural in STATUS_KINDS, api_version=view.api_version, now=now)
        result = events.stored(view, merged)
        if view is EVENTS_V1:
            events.check_v1_update(result, existing)
        return events.view(view, self._update(kind, namespace, existing, result, options=options, manager="",
                                              now=now))

    def merge_patch(self, kind: Kind, namespace: str | None, name: str, patch: object, *,
                    subresource: str | None = None, options: WriteOptions = DEFAULT_OPTIONS, now: float = 0.0) -> Obj:
        return self.patch(kind, namespace, name, patch, patch_type="merge", subresource=subresource,
                          options=options, now=now)

    def patch(self, kind: Kind, namespace: str | None, name: str, patch: object, *, patch_type: str,
              subresource: str | None = None, options: WriteOptions = DEFAULT_OPTIONS, now: float = 0.0) -> Obj:
        """A JSON merge patch, a JSON patch (RFC 6902) or, for built-in kinds, a strategic merge patch."""
        check_subresource(kind, subresource)
        existing = self._objects.get((kind.plural, namespace, name))
        if existing is None:
            raise not_found(kind, name)
        try:
            patched = patches.apply_patch(patch_type, events.view(kind, json_copy(existing)), patch)
        except patches.PatchError as e:
            raise statuses.patch_refused(e.code, str(e)) from None
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise invalid(kind, name, [("metadata", "Invalid value", "must be an object")])
        sent_rv = patched["metadata"].get("resourceVersion")
        if sent_rv not in (None, "") and sent_rv != existing["metadata"].get("resourceVersion"):
            raise conflict(kind, name, MODIFIED_SINCE)  # optimistic locking by patch
        return self._write_view(kind, namespace, existing, patched, subresource, options, now)

    def replace(self, kind: Kind, namespace: str | None, name: str, body: Obj, *, subresource: str | None = None,
                options: WriteOptions = DEFAULT_OPTIONS, now: float = 0.0) -> Obj:
        """PUT: the object becomes `body` (what it leaves out is removed); the other half of a status kind
        (status on the main resource, the rest on /status) is kept."""
        check_subresource(kind, subresource)
        check_body(kind, namespace, body)
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise StatusError(400, "BadRequest", f"the name of the object ({meta.get('name')}) does not match "
                                                 f"the name on the URL ({name})")
        existing = self._objects.get((kind.plural, namespace, name))
        if existing is None and kind.plural == "events" and subresource is None:
            # The Event strategy's AllowCreateOnUpdate: a PUT of a missing Event creates it.
            return self.create(kind, namespace, {**body, "metadata": {**meta, "name": name}}, now=now,
                               options=options)
        if existing is None:
            raise not_found(kind, name)
        sent_rv = meta.get("resourceVersion")
        if not sent_rv and is_custom(kind):
            # Custom resources allow no unconditional update (the CRD strategy), built-in kinds do.
            raise invalid(kind, name, [("metadata.resourceVersion", "Invalid value",
                                        "0: must be specified for an update")],
                          group_kind=(kind.group, kind.plural))  # the store's words: by resource, not kind
        if sent_rv and sent_rv != existing["metadata"]["resourceVersion"]:
            raise conflict(kind, name, MODIFIED_SINCE)
        uid = meta.get("uid")
        if uid and uid != existing["metadata"]["uid"]:
            raise conflict(kind, name, f"Precondition failed: UID in precondition: {uid}, "
                                       f"UID in object meta: {existing['metadata']['uid']}")
        return self._write_view(kind, namespace, existing, json_copy(body), subresource, options, now)

    def replace_status(self, kind: Kind, namespace: str | None, name: str, status: Obj, *,
                       uid: str | None = None) -> Obj:
        """Set the whole status (how a controller writes it); an unchanged status writes nothing. With
        `uid`, only that incarnation of the object is written."""
        existing = self._objects.get((kind.plural, namespace, name))
        if existing is None or (uid is not None and existing["metadata"]["uid"] != uid):
            raise not_found(kind, name)
        result = json_copy(existing)
        result["status"] = json_copy(status)
        return self._update(kind, namespace, existing, result)

    def delete(self, kind: Kind, namespace: str | None, name: str, *,
               preconditions: Mapping[str, str] | None = None, propagation: str | None = None,
               options: WriteOptions = DEFAULT_OPTIONS, now: float = 0.0) -> Obj:
        """Delete, as a real server does: preconditions first (a mismatch is 409 and the object stays); an
        object with finalizers only gets its deletionTimestamp; dependents are collected (Background),
        orphaned (Orphan) or deleted before their owner (Foreground)."""
        if kind is not storage_kind(kind):
            return events.view(kind, self.delete(storage_kind(kind), namespace, name, preconditions=preconditions,
                                                 propagation=propagation, options=options, now=now))
        existing = self._objects.get((kind.plural, namespace, name))
        if existing is None:
            raise not_found(kind, name)
        meta = existing["metadata"]
        for key, wanted in (preconditions or {}).items():
            if key in ("uid", "resourceVersion") and wanted is not None and wanted != meta.get(key):
                raise statuses.precondition_failed(kind, name, key, wanted, meta.get(key))
        if propagation not in (None, "Orphan", "Background", "Foreground"):
            raise invalid(kind, name, [("propagationPolicy", "Unsupported value",
                                        f'"{propagation}": supported values: "Foreground", "Background", '
                                        '"Orphan"')], group_kind=("meta.k8s.io", "DeleteOptions"))
        if options.dry_run:
            return json_copy(existing)
        if kind is NAMESPACE and not meta.get("finalizers"):
            return self._terminate(existing, now)
        finalizers = list(meta.get("finalizers") or [])
        if propagation == "Orphan":
            self._orphan(meta["uid"])
        elif propagation == "Foreground" and dependents(self._objects, meta["uid"]):
            finalizers = [*finalizers, FOREGROUND] if FOREGROUND not in finalizers else finalizers
        if finalizers:
            if meta.get("deletionTimestamp") and finalizers == meta.get("finalizers"):
                return json_copy(existing)
            marked = json_copy(existing)
            marked["metadata"]["finalizers"] = finalizers
            marked["metadata"].setdefault("deletionTimestamp", rfc3339(now))
            marked["metadata"].setdefault("deletionGracePeriodSeconds", 0)
            updated = self._update(kind, namespace, existing, marked, deleting=True)
            if FOREGROUND in finalizers:
                # The garbage collector deletes the dependents first, then lifts its own finalizer.
                self._collect(meta["uid"], now)
                held = self._objects[(kind.plural, namespace, name)]
                lifted = json_copy(held)
                lifted["metadata"]["finalizers"] = [f for f in finalizers if f != FOREGROUND]
                self._update(kind, namespace, held, lifted, now=now)
            return updated
        return self._remove(kind, namespace, name, now)

    def delete_collection(self, kind: Kind, namespace: str | None, labels: Selector, fields: FieldSelector, *,
                          propagation: str | None = None, options: WriteOptions = DEFAULT_OPTIONS,
                          now: float = 0.0) -> Obj:
        doc = self.list_objects(kind, namespace, labels, fields)
        for item in doc["items"]:
            m = item["metadata"]
            if self.exists(kind, m.get("namespace"), m["name"]):
                self.delete(kind, m.get("namespace"), m["name"], propagation=propagation, options=options, now=now)
        return doc

    # -- watches -------------------------------------------------------------------------------------

    def subscribe(self, kind: Kind, namespace: str | None, selector: Selector, since: str | None,
                  sink: Sink, fields: FieldSelector | None = None) -> tuple[list[Obj], int | None]:
        """Initial frames to send, and the watcher id (None when the answer is the 410 frame)."""
        watcher = Watcher(kind, namespace, selector, sink, fields or FieldSelector())
        if since in (None, "", "0"):
            initial = [{"type": "ADDED", "object": o}
                       for o in self.list_objects(kind, namespace, selector, watcher.fields)["items"]]
        else:
            assert since is not None
            try:
                wanted = int(since)
            except ValueError:
                raise StatusError(400, "BadRequest", f"resourceVersion: Invalid value: {since!r}") from None
            if wanted < self.history.compacted_through:
                return [expired_frame(since, self.oldest_retained)], None
            initial = self.history.since(wanted, watcher)
        return initial, self.history.add(watcher)

    def unsubscribe(self, wid: int) -> None:
        self.history.remove(wid)

    def compact(self) -> None:
        """Forget every retained event: any resume from before now gets the 410."""
        self.history.compact(self.rv)

    # -- internals -----------------------------------------------------------------------------------

    def _write_view(self, kind: Kind, namespace: str | None, existing: Obj, result: Obj, subresource: str | None,
                    options: WriteOptions, now: float) -> Obj:
        """`_write_whole` of a result written through `kind`'s view: stored, checked, answered in the view."""
        stored = events.stored(kind, result)
        if kind is EVENTS_V1:
            events.check_v1_update(stored, existing)
        return events.view(kind, self._write_whole(storage_kind(kind), namespace, existing, stored, subresource,
                                                   options, now))

    def _write_whole(self, kind: Kind, namespace: str | None, existing: Obj, result: Obj, subresource: str | None,
                     options: WriteOptions, now: float) -> Obj:
        """Keep what the target does not own: /status writes only status, the main resource of a status
        kind never writes status; then update."""
        if subresource == "status":
            kept = json_copy(existing)
            if "status" in result:
                kept["status"] = result["status"]
            else:
                kept.pop("status", None)
            result = kept
        elif kind.plural in STATUS_KINDS or kind is NAMESPACE:
            if "status" in existing:
                result["status"] = json_copy(existing["status"])
            else:
                result.pop("status", None)
        result["apiVersion"], result["kind"] = kind.api_version, kind.kind
        check_metadata(kind, existing["metadata"]["name"], result["metadata"], creating=False)
        return self._update(kind, namespace, existing, fold_string_data(kind, result), options=options,
                            manager=options.manager, now=now, subresource=subresource or "")

    def _update(self, kind: Kind, namespace: str | None, existing: Obj, result: Obj, *,
                options: WriteOptions = DEFAULT_OPTIONS, manager: str = "", now: float = 0.0,
                deleting: bool = False, subresource: str = "") -> Obj:
        old = existing["metadata"]
        new = result.setdefault("metadata", {})
        if new.get("uid") and new["uid"] != old.get("uid"):  # a patch carrying another uid (a PUT's: `replace`)
            raise statuses.uid_immutable(kind, old["name"], new["uid"])
        kept = ("uid", "creationTimestamp", "name", "namespace", "generation")
        for key in kept if deleting else (*kept, "deletionTimestamp", "deletionGracePeriodSeconds"):
            if key in old:
                new[key] = old[key]
            else:
                new.pop(key, None)
        if deleting and not old.get("deletionTimestamp") and new.get("deletionTimestamp") and "generation" in old:
            new["generation"] = old["generation"] + 1  # the graceful delete moves it (rest.BeforeDelete)
        new["resourceVersion"] = old.get("resourceVersion")
        if "managedFields" not in new and "managedFields" in old:
            new["managedFields"] = old["managedFields"]
        added = [f for f in new.get("finalizers") or [] if f not in (old.get("finalizers") or [])]
        if old.get("deletionTimestamp") and added:
            raise statuses.finalizers_forbidden(kind, old["name"], added)
        if kind.plural in GENERATION_KINDS and spec_of(result) != spec_of(existing):
            new["generation"] = old.get("generation", 1) + 1
        set_defaults(kind, result)
        check_immutable(kind, existing, result)
        if manager:  # a write through /status is an entry of its own (subresource "status"), as on a real server
            ssa.record_update(result, existing, manager, kind.api_version, now, subresource=subresource)
        if result == existing:
            return json_copy(existing)  # a no-op writes nothing and tells no watcher
        validate_object(kind, result)
        if options.dry_run:
            return result
        if new.get("deletionTimestamp") and not new.get("finalizers") and kind is not NAMESPACE:
            # The last finalizer went: deleted in that write, one DELETED and no MODIFIED (as a v1.37 server).
            self._objects[(kind.plural, namespace, new["name"])] = result
            return self._remove(kind, namespace, new["name"], now)
        return self._commit("MODIFIED", kind, namespace, result, previous=existing)

    def _remove(self, kind: Kind, namespace: str | None, name: str, now: float) -> Obj:
        previous = self._objects.pop((kind.plural, namespace, name))
        final = self._commit("DELETED", kind, namespace, json_copy(previous), store=False, previous=previous)
        self._collect(previous["metadata"]["uid"], now)
        if namespace is not None and not any(k[1] == namespace for k in self._objects):
            home = self._objects.get((NAMESPACE.plural, None, namespace))
            if home is not None and home["metadata"].get("deletionTimestamp"):
                self._remove(NAMESPACE, None, namespace, now)  # the last of a terminating namespace's content
        return final

    def _terminate(self, namespace: Obj, now: float) -> Obj:
        """A namespace's delete: Terminating (new content refused) while what it holds is deleted, each
        object as its own delete would go (finalizers hold it); gone once it is empty."""
        name = namespace["metadata"]["name"]
        marked = json_copy(namespace)
        marked["metadata"]["deletionTimestamp"] = namespace["metadata"].get("deletionTimestamp") or rfc3339(now)
        marked["metadata"].setdefault("deletionGracePeriodSeconds", 0)
        marked["status"] = {"phase": "Terminating"}
        answer = self._update(NAMESPACE, None, namespace, marked, deleting=True)
        for plural, ns, dep_name in sorted(k for k in self._objects if k[1] == name):
            if (plural, ns, dep_name) in self._objects:
                self.delete(kind_named(plural), ns, dep_name, now=now)
        if self.exists(NAMESPACE, None, name) and not any(k[1] == name for k in self._objects):
            self._remove(NAMESPACE, None, name, now)  # it held nothing (else its last object's removal took it)
        return answer

    def _collect(self, uid: str, now: float) -> None:
        """The garbage collector, at once: every dependent of `uid` is deleted (in the background)."""
        for plural, ns, dep_name in dependents(self._objects, uid):
            if (plural, ns, dep_name) in self._objects:
                self.delete(kind_named(plural), ns, dep_name, now=now)

    def _orphan(self, uid: str) -> None:
        for plural, ns, dep_name in dependents(self._objects, uid):
            dep = self._objects[(plural, ns, dep_name)]
            orphaned = json_copy(dep)
            refs = [o for o in dep["metadata"]["ownerReferences"] if not (isinstance(o, dict) and o.get("uid") == uid)]
            if refs:
                orphaned["metadata"]["ownerReferences"] = refs
            else:
                orphaned["metadata"].pop("ownerReferences", None)
            self._update(kind_named(plural), ns, dep, orphaned)

    def _commit(self, type_: str, kind: Kind, namespace: str | None, obj: Obj, *, store: bool = True,
                previous: Obj | None = None) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if store:
            self._objects[(kind.plural, namespace, obj["metadata"]["name"])] = obj
        # One copy serves the history and every watcher: nobody downstream changes an event's object.
        event = Event(self.rv, type_, kind.plural, namespace, json_copy(obj), previous)
        self.history.record(event)
        return json_copy(obj)
