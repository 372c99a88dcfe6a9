"""KubeClient: plain REST for jr2's own kinds on requests/urllib3 (ADR-0063).

Theory of operation: one instance, shared by every actor of the process, safe to call from any thread.

- Credentials: a token file is read on **every** request, never cached (the kubelet rotates the
  ServiceAccount token about 50 s before expiry). A 401 re-reads it and retries exactly once; a second
  401 is the answer. An inline token (kubeconfig `token`) is sent as is.
- Writes (create, apply, merge patch, delete) pass a first-come first-served gate of 8–16 slots
  (default 12); reads (get, list, watch) never wait behind it. The connection pool holds the write cap
  plus a few reads plus the one watch, so reads find a connection while writes are at the cap.
- Every call has connect and read timeouts. The watch's read timeout sits above `timeoutSeconds`, so
  the server closes a healthy watch first; the stall bound above this client catches a silent one.
- A watch's answer is a `WatchStream` (kube/watch_stream.py): read off its socket 64 KiB at a time and
  de-chunked there; broken framing is a `KubeProtocolError` after the frames that came whole; a
  clean end gives the connection back to the pool, so a re-open costs no TCP or TLS handshake (client-go's
  re-opens share one HTTP/2 connection); any other end closes it.
- Answers are read with a size cap; a failure answer becomes a `KubeError` carrying the Status.
- The merge patch (the Lease, the most frequent write) goes on urllib3 straight over the same pool
  (`kube/direct.py`): 0.49 ms of client CPU a call against 0.81 through `Session.request`.
- Metrics: every request is counted by verb and answer code, every 401 retried, in the
  `metrics` an orchestrator attaches (`KubeMetrics.attach`); a client alone records nothing.
- `interrupt()` ends every call in flight at once — connecting, waiting for the answer, reading it — with
  a transport error: each request runs under a `Cut` (`harness/cut.py`). A stopping orchestrator calls it
  once its actors are stopped, so an API server that does not answer cannot hold the stop for a read
  timeout; the client stays usable.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import requests
import urllib3.exceptions

from jr2_actors import __version__
from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.direct import DirectCall
from jr2_actors.kube.gate import FifoGate
from jr2_actors.kube.kinds import Kind
from jr2_actors.kube.metrics import OFF, KubeMetrics
from jr2_actors.kube.watch_stream import WatchStream, transport_error
from jr2_actors.net.cookies import NoCookies
from jr2_actors.net.cut import Cut, mount_cuts  # one way to end a request from outside, for both clients
from jr2_actors.net.http_body import TooLarge, read_capped, retry_after
from jr2_actors.shell.activity import QUIET, Reporter
from jr2_actors.values.constants import (
    CONNECT_TIMEOUT_SECONDS,
    FIELD_MANAGER,
    MAX_BODY_BYTES,
    READ_POOL_SIZE,
    READ_TIMEOUT_SECONDS,
    WATCH_READ_MARGIN_SECONDS,
    WATCH_TIMEOUT_SECONDS,
    WRITE_CAP_DEFAULT,
    WRITE_CAP_MAX,
    WRITE_CAP_MIN,
)
from jr2_actors.values.errors import (
    ApiStatus,
    ClusterAccessError,
    KubeError,
    KubeProtocolError,
)

log = logging.getLogger(__name__)

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
MERGE_PATCH_CONTENT_TYPE = "application/merge-patch+json"
JSON_CONTENT_TYPE = "application/json"


@dataclass(frozen=True)
class ListResult:
    items: list[dict[str, Any]] = field(repr=False)
    resource_version: str


_APPLY_QUERY = f"?{urlencode({'fieldManager': FIELD_MANAGER, 'force': 'true'})}"  # server-side apply, forced


class _Credentials:
    def __init__(self, access: ClusterAccess) -> None:
        self._token = access.token
        self._token_file = access.token_file

    @property
    def refreshable(self) -> bool:
        return self._token_file is not None

    def authorization(self) -> str | None:
        if self._token_file is not None:
            try:
                with open(self._token_file, encoding="utf-8") as f:
                    token = f.read().strip()
            except OSError as e:
                raise ClusterAccessError(f"token file {self._token_file} cannot be read: {e.strerror}") from e
            return f"Bearer {token}" if token else None
        return f"Bearer {self._token}" if self._token else None


class KubeClient:
    def __init__(self, access: ClusterAccess, *, write_cap: int = WRITE_CAP_DEFAULT,
                 connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
                 read_timeout: float = READ_TIMEOUT_SECONDS, max_body_bytes: int = MAX_BODY_BYTES,
                 activity: Reporter = QUIET) -> None:
        """`activity`: where each request is reported while it is sent and answered (a driven VirtualClock's,
        so its clock never jumps while a request is in flight)."""
        if not WRITE_CAP_MIN <= write_cap <= WRITE_CAP_MAX:
            raise ValueError(f"write_cap must be within {WRITE_CAP_MIN}–{WRITE_CAP_MAX}, not {write_cap}")
        self.access = access
        self.namespace = access.namespace
        self._base = access.server.rstrip("/")
        self._credentials = _Credentials(access)
        self._timeout = (connect_timeout, read_timeout)
        self._connect_timeout = connect_timeout
        self._max_body = max_body_bytes
        self._activity = activity
        self.writes = FifoGate(write_cap)
        self.metrics: KubeMetrics = OFF  # the orchestrator's, once it calls `measure`
        self.pool_size = write_cap + READ_POOL_SIZE + 1  # + the one watch
        self._tmpdir: str | None = None

        session = requests.Session()
        session.trust_env = False  # no ~/.netrc or proxy variables overriding the bearer token
        session.cookies = NoCookies()  # the API server sets none; no jar lock on each answer
        mount_cuts(session, pool_connections=1, pool_maxsize=self.pool_size, max_retries=0)
        self._cuts_lock = threading.Lock()
        self._cuts: weakref.WeakSet[Cut] = weakref.WeakSet()  # each request's, while it or its answer lives
        session.verify = self._verify(access)
        session.cert = self._cert(access)
        session.headers.update({"Accept": JSON_CONTENT_TYPE, "User-Agent": f"jr2-actors/{__version__}"})
        self._session = session
        self._direct = DirectCall(session, self._base, connect_timeout=connect_timeout, read_timeout=read_timeout)
        self._finalizer = weakref.finalize(self, _cleanup, session, self._tmpdir)

    def measure(self, metrics: KubeMetrics) -> None:
        """Record every request in `metrics` from now on, and let it read the write gate at scrape time."""
        self.metrics = metrics
        metrics.read_gate(self.writes)

    # -- reads ---------------------------------------------------------------------------------------

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return self._json("GET", kind.path(self._ns(kind, namespace), name), verb="get")
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def list(self, kind: Kind, namespace: str | None = None, *, label_selector: str | None = None) -> ListResult:
        params = {"labelSelector": label_selector} if label_selector else None
        doc = self._json("GET", kind.path(self._ns(kind, namespace)), params=params, verb="list")
        items = doc.get("items")
        meta = doc.get("metadata")
        if not isinstance(items, list) or not isinstance(meta, dict):
            raise KubeProtocolError(f"list of {kind.plural} lacks items or metadata")
        if not all(isinstance(i, dict) for i in items):
            raise KubeProtocolError(f"list of {kind.plural} holds an item that is not an object")
        rv = meta.get("resourceVersion")
        if not isinstance(rv, str) or not rv:
            raise KubeProtocolError(f"list of {kind.plural} carries no resourceVersion")
        return ListResult(items=items, resource_version=rv)

    def watch(self, kind: Kind, namespace: str | None = None, *, resource_version: str | None = None,
              label_selector: str | None = None, timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
              allow_bookmarks: bool = True) -> WatchStream:
        """Open a watch; iterate the answer for decoded frames. A failure to open raises."""
        params: dict[str, str] = {"watch": "true", "timeoutSeconds": str(timeout_seconds)}
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if resource_version:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        path = kind.path(self._ns(kind, namespace))
        # The answer's headers get the ordinary read timeout, so a server that accepts and never answers
        # cannot hold the opener (and a shutdown waiting for it) for minutes; the body gets the long one.
        resp = self._send("GET", path, params=params, stream=True, timeout=self._timeout, verb="watch")
        if resp.status_code != 200:
            self._raise_for(resp, "GET", path)
        _set_read_timeout(resp, timeout_seconds + WATCH_READ_MARGIN_SECONDS)
        return WatchStream(resp, path)

    # -- writes --------------------------------------------------------------------------------------

    # Every write goes on urllib3 straight (`kube/direct.py`): requests' own work was 60 % of a write's client
    # CPU, and a run's start writes a Sandbox and a Secret, its end deletes both, its life renews a Lease.

    def create(self, kind: Kind, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        with self.writes:
            return self._direct_json("POST", kind.path(self._ns(kind, namespace)),
                                     json.dumps(_typed(kind, body)).encode(), JSON_CONTENT_TYPE, verb="create")

    def apply(self, kind: Kind, name: str, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Server-side apply as field manager `jr2`, forcing conflicts (JSON is YAML)."""
        doc = _typed(kind, body)
        doc.setdefault("metadata", {})
        doc["metadata"] = {**doc["metadata"], "name": name}
        with self.writes:
            return self._direct_json("PATCH", kind.path(self._ns(kind, namespace), name) + _APPLY_QUERY,
                                     json.dumps(doc).encode(), APPLY_CONTENT_TYPE, verb="apply")

    def merge_patch(self, kind: Kind, name: str, patch: Mapping[str, Any], namespace: str | None = None,
                    *, status: bool = False) -> dict[str, Any]:
        """A JSON merge patch of the main resource, or of `/status` when `status` is set (the Lease's call)."""
        path = kind.path(self._ns(kind, namespace), name, "status" if status else None)
        with self.writes:
            return self._direct_json("PATCH", path, json.dumps(dict(patch)).encode(), MERGE_PATCH_CONTENT_TYPE,
                                     verb="patch")

    def delete(self, kind: Kind, name: str, namespace: str | None = None, *, uid: str | None = None,
               resource_version: str | None = None) -> bool:
        """Delete; True when it existed. An absent object counts as success.

        `uid` / `resource_version` become the DeleteOptions' preconditions: the server deletes only the
        object they name, so a caller can never delete a successor that took the same name since
        (ADR-0064). A mismatch is the server's 409 Conflict, raised as `KubeError`: the caller decides.
        """
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            body["preconditions"] = preconditions
        with self.writes:
            try:
                self._direct_json("DELETE", kind.path(self._ns(kind, namespace), name), json.dumps(body).encode(),
                                  JSON_CONTENT_TYPE, verb="delete")
            except KubeError as e:
                if e.status == 404:
                    return False
                raise
        return True

    def close(self) -> None:
        self._finalizer()

    def interrupt(self) -> None:
        """End every call in flight now (each raises a transport error); later calls go as ever."""
        with self._cuts_lock:
            cuts = list(self._cuts)
        for cut in cuts:
            cut.fire()

    # -- plumbing ------------------------------------------------------------------------------------

    def _ns(self, kind: Kind, namespace: str | None) -> str | None:
        return (namespace or self.namespace) if kind.namespaced else None

    def _json(self, method: str, path: str, *, verb: str, body: Mapping[str, Any] | None = None,
              params: Mapping[str, str] | None = None, content_type: str | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        resp = self._send(method, path, params=params, data=data, content_type=content_type, stream=True,
                          timeout=self._timeout, verb=verb)
        if resp.status_code >= 400:
            self._raise_for(resp, method, path)
        return _object(_read_capped(resp, method, path, self._max_body), resp.status_code, method, path)

    def _direct_json(self, method: str, path: str, data: bytes, content_type: str, *, verb: str) -> dict[str, Any]:
        """`_json`'s contract (the same answers, errors, metrics, Cut and 401 retry), on `DirectCall`."""
        for attempt in (1, 2):
            headers = self._headers(content_type)
            try:
                with self._in_flight(method, path):
                    answer = self._direct.send(method, path, data, headers, cap=self._max_body,
                                               failure_cap=FAILURE_BODY_CAP)
            except TooLarge as e:
                self.metrics.request(verb, None)
                raise KubeProtocolError(f"{method} {path}: answer larger than {self._max_body} bytes") from e
            except (urllib3.exceptions.HTTPError, OSError) as e:
                self.metrics.request(verb, None)
                raise transport_error(e, method, path) from e
            if self._retry_unauthorized(verb, answer.status, attempt, method, path):
                continue
            if answer.status >= 400:
                raise _failure(answer.status, answer.reason, answer.body, answer.headers.get("Retry-After"),
                               answer.headers.get("Date"), method, path)
            return _object(answer.body, answer.status, method, path)
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(self, method: str, path: str, *, params: Mapping[str, str] | None = None, data: bytes | None = None,
              content_type: str | None = None, stream: bool, timeout: tuple[float, float],
              verb: str) -> requests.Response:
        url = self._base + path
        for attempt in (1, 2):
            headers = self._headers(content_type)
            try:
                with self._in_flight(method, path):
                    resp = self._session.request(method, url, params=params, data=data, headers=headers,
                                                 stream=stream, timeout=timeout)
            except requests.exceptions.RequestException as e:
                self.metrics.request(verb, None)
                raise transport_error(e, method, path) from e
            if self._retry_unauthorized(verb, resp.status_code, attempt, method, path):
                resp.close()
                continue
            return resp
        raise AssertionError("unreachable")  # pragma: no cover

    def _headers(self, content_type: str | None) -> dict[str, str]:
        """A request's own headers: the token read now (a token file on every request), the body's type."""
        headers: dict[str, str] = {}
        authorization = self._credentials.authorization()
        if authorization:
            headers["Authorization"] = authorization
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    @contextlib.contextmanager
    def _in_flight(self, method: str, path: str) -> Iterator[None]:
        """A request under its own `Cut` (`interrupt()` ends it, and the reading of its answer: its connection
        holds the Cut) and reported to a driven VirtualClock while it is sent."""
        cut = Cut()
        with self._cuts_lock:
            self._cuts.add(cut)
        with cut.active(), self._activity.busy(f"KubeClient {method} {path}"):
            yield

    def _retry_unauthorized(self, verb: str, status: int, attempt: int, method: str, path: str) -> bool:
        """Count the answer; True for a first 401 with a token file to read again (ADR-0063: once)."""
        self.metrics.request(verb, status)
        if status == 401 and attempt == 1 and self._credentials.refreshable:
            self.metrics.unauthorized_retry()
            log.info("401 on %s %s: re-reading the token file and retrying once", method, path)
            return True
        return False

    def _raise_for(self, resp: requests.Response, method: str, path: str) -> None:
        try:
            raw = read_capped(resp, FAILURE_BODY_CAP, truncate=True)
        except requests.exceptions.RequestException:
            raw = b""
        raise _failure(resp.status_code, resp.reason, raw, resp.headers.get("Retry-After"), resp.headers.get("Date"),
                       method, path)

    def _verify(self, access: ClusterAccess) -> bool | str:
        if access.insecure_skip_tls_verify:
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            return False
        if access.ca_file:
            return access.ca_file
        if access.ca_data:
            return self._private_file("ca.crt", access.ca_data)
        return True

    def _cert(self, access: ClusterAccess) -> tuple[str, str] | None:
        cert = access.client_cert_file or (
            self._private_file("client.crt", access.client_cert_data) if access.client_cert_data else None)
        key = access.client_key_file or (
            self._private_file("client.key", access.client_key_data) if access.client_key_data else None)
        return (cert, key) if cert and key else None

    def _private_file(self, name: str, data: bytes) -> str:
        """requests takes TLS material only as paths: keep inline data in a 0700 dir, removed on close."""
        if self._tmpdir is None:
            self._tmpdir = tempfile.mkdtemp(prefix="jr2-kube-")
        path = os.path.join(self._tmpdir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path


FAILURE_BODY_CAP = 64 * 1024  # what of a failure answer is read for its Status


def _object(raw: bytes, code: int, method: str, path: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise KubeProtocolError(f"{method} {path}: answer is not JSON ({code})") from e
    if not isinstance(doc, dict):
        raise KubeProtocolError(f"{method} {path}: answer is not a JSON object")
    return doc


def _failure(code: int, http_reason: str | None, raw: bytes, retry: str | None, date: str | None, method: str,
             path: str) -> KubeError:
    """A failure answer as `KubeError`, carrying its Status (or what of the body there is)."""
    status: ApiStatus | None = None
    try:
        status = ApiStatus.from_object(json.loads(raw))
    except (ValueError, RecursionError):
        status = None
    reason = (status.reason if status else "") or http_reason or "Failure"
    message = (status.message if status else "") or raw[:200].decode("utf-8", "replace").strip()
    return KubeError(code, reason, message, method=method, path=path, retry_after=retry_after(retry, date))


def _read_capped(resp: requests.Response, method: str, path: str, cap: int) -> bytes:
    try:
        return read_capped(resp, cap)
    except TooLarge as e:
        raise KubeProtocolError(f"{method} {path}: answer larger than {cap} bytes") from e
    except requests.exceptions.RequestException as e:
        raise transport_error(e, method, path) from e


def _set_read_timeout(resp: requests.Response, seconds: float) -> None:
    connection = getattr(resp.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def _typed(kind: Kind, body: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": kind.api_version, "kind": kind.kind, **body}


def _cleanup(session: requests.Session, tmpdir: str | None) -> None:
    session.close()
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)
