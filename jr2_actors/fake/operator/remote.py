"""The fake operator and the fake Harness on any API server: a second shell for `OperatorCore`, over HTTP.

A real API server runs no operator and no kubelet, so a Sandbox applied there would never come to life.
`RemoteOperator` brings the fake's two to it: `OperatorActor` (the core's first shell) and `HarnessActor`
run unchanged, each fed Sandbox changes and writing statuses through `RemoteApi`, an actor that stands where
the fake's API server actor stands for them. It takes the same `Run(fn)` and hands `fn` a `ServerView`,
which does over HTTP (a `KubeClient`, any server) the four things they ask of the fake's `ClusterState`:

- `subscribe`: list the namespace's Sandboxes, then watch from the list's version (bookmarks on, the
  server's `timeoutSeconds`), resuming from the last version seen when a watch ends, re-listing on a 410
  (or any ERROR frame) and telling `DELETED` for what vanished meanwhile — each change to the sink, from
  the feed's own thread;
- `replace_status`: the whole status, as a JSON merge patch of `/status` that sets what changed and nulls
  what went (so a field dropped from a status is gone, as a PUT would leave it), carrying `metadata.uid`,
  which the server takes as a precondition: a successor of the same name is never written (409, skipped);
- `delete` with the uid precondition (the idle GC);
- `unsubscribe`: the feed's stream closed, its thread ended.

A write refused because the world moved (404, 409) is skipped, as the fake's writer skips it: the change
that moved it is already on its way to the operator. Everything binds to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pykka

from jr2_actors.fake.harness.actor import HarnessActor, HarnessHttpServer
from jr2_actors.fake.harness.core import HarnessCore
from jr2_actors.fake.messages import Run
from jr2_actors.fake.operator.actor import OperatorActor
from jr2_actors.fake.operator.core import Node, OperatorCore, Quota
from jr2_actors.harness.tokens import INSTANCE_HARNESS, harness_token, token_digest
from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from jr2_actors.kube.frames import Bookmark, ErrorFrame, WatchEvent
from jr2_actors.kube.kinds import SANDBOX, Kind
from jr2_actors.kube.watch_stream import WatchStream
from jr2_actors.shell import Shell
from jr2_actors.shell.clock import SystemClock
from jr2_actors.values.errors import KubeError, KubeProtocolError, KubeTransportError

log = logging.getLogger(__name__)

Sink = Callable[[dict[str, Any]], None]
ASK_TIMEOUT = 30.0
WATCH_SECONDS = 240  # ADR-0063's timeoutSeconds: the server ends each watch, the feed resumes


def merge_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: a key `new` lacks is nulled, a map in
    both is diffed, anything else is set (a list is replaced whole, as merge patch replaces lists)."""
    patch: dict[str, Any] = {k: None for k in old if k not in new}
    for k, v in new.items():
        was = old.get(k)
        if isinstance(v, Mapping) and isinstance(was, Mapping):
            inner = merge_diff(was, v)
            if inner:
                patch[k] = inner
        elif was != v or k not in old:
            patch[k] = v
    return patch


class _Feed:
    """One subscription: list, then watch and resume, on its own thread, until closed."""

    def __init__(self, client: KubeClient, namespace: str | None, sink: Sink, seen: dict[tuple[str, str], Any],
                 lock: threading.Lock) -> None:
        self.client = client
        self.namespace = namespace
        self.sink = sink
        self._seen = seen  # the view's last seen object per (namespace, name), shared by every feed
        self._lock = lock
        self._known: dict[tuple[str, str], dict[str, Any]] = {}
        self._stream: WatchStream | None = None
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self.version = ""

    def initial(self) -> list[dict[str, Any]]:
        """The namespace's Sandboxes now; none when the list fails (a server still starting answers 429):
        the feed's thread then lists until it works and tells each as it finds it."""
        try:
            return [{"type": "ADDED", "object": o} for o in self._relist(tell=False)]
        except (KubeError, KubeTransportError, KubeProtocolError) as e:
            log.info("remote operator: the first list failed (%s); the feed lists again", e)
            self.version = ""
            return []

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="jr2-remote-operator-feed", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)

    def _note(self, obj: dict[str, Any], deleted: bool = False) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        with self._lock:
            if deleted:
                self._known.pop(key, None)
                self._seen.pop(key, None)
            else:
                self._known[key] = obj
                self._seen[key] = obj

    def _relist(self, *, tell: bool = True) -> list[dict[str, Any]]:
        listed = self.client.list(SANDBOX, self.namespace)
        self.version = listed.resource_version
        now = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in listed.items}
        for key, gone in list(self._known.items()):
            if key not in now:  # deleted while no watch was open: told as the watch would have
                self._note(gone, deleted=True)
                if tell:
                    self.sink({"type": "DELETED", "object": gone})
        for o in listed.items:
            self._note(o)
            if tell:
                self.sink({"type": "MODIFIED", "object": o})
        return listed.items

    def _run(self) -> None:
        failures = itertools.count()
        while not self._closed.is_set():
            try:
                if not self.version:
                    self._relist()
                self._watch_once()
                failures = itertools.count()
            except (KubeError, KubeTransportError, KubeProtocolError) as e:
                if self._closed.is_set():
                    return
                if isinstance(e, KubeError) and e.status == 410:
                    self.version = ""
                n = next(failures)
                log.info("remote operator: the Sandbox feed failed (%s); again in %.1f s", e, min(0.1 * 2 ** n, 5))
                self._closed.wait(min(0.1 * 2 ** n, 5))  # a backoff, not a wait for logic: the server's
            except Exception:
                log.exception("remote operator: the Sandbox feed's thread failed")
                self._closed.wait(1)

    def _watch_once(self) -> None:
        stream = self.client.watch(SANDBOX, self.namespace, resource_version=self.version,
                                   timeout_seconds=WATCH_SECONDS, allow_bookmarks=True)
        self._stream = stream
        if self._closed.is_set():
            stream.close()
        with stream:
            for frame in stream:
                if isinstance(frame, WatchEvent):
                    obj = dict(frame.object)
                    self._note(obj, deleted=frame.type == "DELETED")
                    if frame.resource_version:
                        self.version = frame.resource_version
                    self.sink({"type": frame.type, "object": obj})
                elif isinstance(frame, Bookmark):
                    self.version = frame.resource_version
                elif isinstance(frame, ErrorFrame):
                    # ADR-0063: any ERROR re-lists (a 410 after a compaction above all), never from its version.
                    self.version = ""
                    return
                else:
                    self.version = ""  # an unusable frame: what came after it cannot be trusted
                    return
        self._stream = None


class ServerView:
    """What OperatorActor and HarnessActor ask of `ClusterState`, done over HTTP (module docstring)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._feeds: dict[int, _Feed] = {}
        self._ids = itertools.count(1)
        self._seen: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def subscribe(self, kind: Kind, namespace: str | None, selector: object, since: str | None,
                  sink: Sink) -> tuple[list[dict[str, Any]], int | None]:
        del selector, since  # every Sandbox of the namespace, from now: all either shell asks
        assert kind is SANDBOX, "the remote view feeds Sandboxes only"
        feed = _Feed(self.client, namespace, sink, self._seen, self._lock)
        initial = feed.initial()
        wid = next(self._ids)
        self._feeds[wid] = feed
        feed.start()
        return initial, wid

    def unsubscribe(self, wid: int) -> None:
        feed = self._feeds.pop(wid, None)
        if feed is not None:
            feed.close()

    def close(self) -> None:
        for wid in list(self._feeds):
            self.unsubscribe(wid)

    def replace_status(self, kind: Kind, namespace: str | None, name: str, status: dict[str, Any], *,
                       uid: str | None = None) -> None:
        with self._lock:
            seen = self._seen.get((namespace or "", name))
        old = (seen or {}).get("status") or {}
        patch: dict[str, Any] = {"status": merge_diff(old, status)}
        if uid:
            patch["metadata"] = {"uid": uid}  # the server's precondition: this incarnation only
        with _skipped(kind, name, "status"):
            self.client.merge_patch(kind, name, patch, namespace, status=True)

    def delete(self, kind: Kind, namespace: str | None, name: str, *,
               preconditions: Mapping[str, str] | None = None) -> None:
        with _skipped(kind, name, "delete"):
            self.client.delete(kind, name, namespace, uid=(preconditions or {}).get("uid"))


@contextlib.contextmanager
def _skipped(kind: Kind, name: str, what: str) -> Any:
    try:
        yield
    except KubeError as e:
        # 404 gone, 409 a newer version; 422 on metadata.uid: a successor holds the name (the uid it carries
        # is immutable there). Any other 422 is the CRD refusing the status: an error to see, not to skip.
        if e.status not in (404, 409) and not (e.status == 422 and "metadata.uid" in str(e)):
            raise
        log.info("remote operator: %s of %s %s skipped (%s): the world moved", what, kind.kind, name, e.status)


class RemoteApi(Shell):
    """The actor OperatorActor and HarnessActor talk to in place of the fake's API server actor."""

    name = "remote-api"

    def __init__(self, view: ServerView) -> None:
        super().__init__()
        self.view = view

    def cleanup(self) -> None:
        self.view.close()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Run):
            try:
                return message.fn(self.view)
            except (KubeError, KubeTransportError, KubeProtocolError) as e:
                log.warning("remote operator: a call to the API server failed: %s", e)
        return None


class RemoteOperator:
    """The fake operator and Harness on the API server `access` names (as an identity that may write
    Sandboxes' status in `namespace`): `start()`, then Sandboxes applied there get a status — Scheduled,
    Ready, an endpoint at this Harness on 127.0.0.1 — and their Harness answers the orchestrator."""

    def __init__(self, access: ClusterAccess, *, signing_key: bytes, namespace: str | None = None,
                 nodes: list[Node] | None = None, quota: Quota | None = None, start_seconds: float = 0.2) -> None:
        self.access = access
        self.namespace = namespace or access.namespace
        self.signing_key = signing_key
        self.clock = SystemClock()
        self.core = OperatorCore(nodes=nodes, quota=quota, start_seconds=start_seconds)
        self._client: KubeClient | None = None
        self._api: pykka.ActorRef[Any] | None = None
        self._operator: pykka.ActorRef[Any] | None = None
        self._harness: pykka.ActorRef[Any] | None = None
        self._harness_http: HarnessHttpServer | None = None

    def start(self) -> RemoteOperator:
        try:
            self._client = KubeClient(self.access)
            self._harness_http = HarnessHttpServer(clock=self.clock)
            self.core.endpoint = self._harness_http.url
            self._api = RemoteApi.start(ServerView(self._client))
            self._operator = OperatorActor.start(self._api, self.core, self.clock)
            digest = token_digest(harness_token(self.signing_key, INSTANCE_HARNESS))
            self._harness = HarnessActor.start(self._api, self.namespace, self.clock, base_url=self._harness_http.url,
                                               instance_digest=digest, operator=self._operator)
            self._harness_http.start(self._harness)
            # Both subscribed (each told the API its start, which lists) before start returns.
            for ref in (self._operator, self._harness, self._api):
                ref.ask(Run(lambda _: None), timeout=ASK_TIMEOUT)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._harness_http is not None:
            self._harness_http.stop()
        for ref in (self._harness, self._operator, self._api):
            if ref is not None:
                with contextlib.suppress(pykka.ActorDeadError):
                    ref.stop(timeout=ASK_TIMEOUT)
        if self._client is not None:
            self._client.close()
        self._harness_http = self._harness = self._operator = self._api = self._client = None

    def __enter__(self) -> RemoteOperator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def harness_url(self) -> str:
        assert self._harness_http is not None, "not started"
        return self._harness_http.url

    @property
    def instance_harness_url(self) -> str:
        return f"{self.harness_url}/_instance"

    def operate(self, fn: Callable[[OperatorCore, float], Any]) -> Any:
        """`fn(core, now)` inside the operator actor (a scripted fault), then a step: as `FakeCluster.operate`."""
        assert self._operator is not None, "not started"
        return self._operator.ask(Run(lambda core: fn(core, self.clock.wall())), timeout=ASK_TIMEOUT)

    def harness(self, fn: Callable[[HarnessCore], Any]) -> Any:
        assert self._harness is not None, "not started"
        return self._harness.ask(Run(fn), timeout=ASK_TIMEOUT)

    def harness_read(self, fn: Callable[[HarnessCore], Any]) -> Any:
        """A read of the Harness's model: no long-poll is woken (as `FakeCluster.harness_read`)."""
        assert self._harness is not None, "not started"
        return self._harness.ask(Run(fn, wakes=False), timeout=ASK_TIMEOUT)
