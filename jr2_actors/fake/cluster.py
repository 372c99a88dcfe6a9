"""`FakeCluster`: the fake API server (and, as they join, operator and Harness) behind one small API.

    with FakeCluster(namespace="jr2") as cluster:
        client = cluster.client()
        cluster.end_watches()

It is product code: users embed it in their own test harnesses. Everything listens on loopback only.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import secrets
import tempfile
import uuid
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

import pykka
import yaml

from jr2_actors.fake.apiserver import actor as api
from jr2_actors.fake.apiserver import knobs
from jr2_actors.fake.apiserver.state import DEFAULT_HISTORY, ClusterState
from jr2_actors.fake.apiserver.validation import is_namespace_name
from jr2_actors.fake.faults import Faults
from jr2_actors.fake.harness.actor import LONG_POLL_SECONDS, HarnessActor, HarnessHttpServer
from jr2_actors.fake.harness.core import INSTANCE, HarnessCore
from jr2_actors.fake.harness.core import MODES as HARNESS_MODES
from jr2_actors.fake.harness.core import Action as HarnessAction
from jr2_actors.fake.messages import Run
from jr2_actors.fake.operator.actor import OperatorActor
from jr2_actors.fake.operator.core import Node, OperatorCore, Quota, make_nodes
from jr2_actors.fake.tls import TlsMaterial
from jr2_actors.fake.tls import generate as generate_tls
from jr2_actors.harness.tokens import DIGEST_ENV, INSTANCE_HARNESS, harness_token, token_digest
from jr2_actors.kube.access import ClusterAccess
from jr2_actors.kube.client import KubeClient
from jr2_actors.shell.activity import activity
from jr2_actors.shell.clock import Clock, SystemClock

log = logging.getLogger(__name__)
T = TypeVar("T")
ASK_TIMEOUT = api.ASK_TIMEOUT


class FakeCluster:
    def __init__(self, *, namespace: str = "jr2", port: int = 0, history: int = DEFAULT_HISTORY,
                 bookmark_interval: float | None = 60.0, token: str | None = None, clock: Clock | None = None,
                 token_file: str | None = None, tls: bool = True, operator: bool = True,
                 nodes: int | Sequence[Node] | None = None, quota: Quota | None = None,
                 start_seconds: float = 0.2, harness: bool = True, signing_key: bytes | None = None,
                 long_poll: float = LONG_POLL_SECONDS, harness_mode: str = "lenient",
                 harness_ports: int = 1) -> None:
        if not is_namespace_name(namespace):
            raise ValueError(f"{namespace!r} is not a valid namespace name (an RFC 1123 label)")
        if harness_mode not in HARNESS_MODES:
            raise ValueError(f"harness_mode is one of {', '.join(HARNESS_MODES)}, not {harness_mode!r}")
        # `strict`: the fake Harness does only what CONTRACTS.md §3 promises (fake/harness/core.py).
        self.harness_mode = harness_mode
        self.namespace = namespace
        self.clock = clock or SystemClock()
        self._port = port
        self._history = history
        self._bookmark_interval = bookmark_interval
        self._token = token or secrets.token_urlsafe(24)
        self._token_file = token_file
        self._tls_enabled = tls
        self._operator_enabled = operator
        if isinstance(nodes, bool):
            raise TypeError("nodes is a count or a list of Node, not a bool")
        # `nodes=1000`: that many alike (4 cpu, 8 GiB each), as kwok's node template makes them.
        node_list = make_nodes(nodes) if isinstance(nodes, int) else nodes
        self._operator_core = OperatorCore(nodes=node_list, quota=quota, start_seconds=start_seconds,
                                           new_uid=lambda: str(uuid.uuid4()))
        self._operator: pykka.ActorRef[Any] | None = None
        self._harness_enabled = harness
        self.signing_key = signing_key or secrets.token_bytes(32)
        self._long_poll = long_poll
        self._harness_ports = harness_ports  # > 1: each Sandbox's Harness at one of that many addresses in turn
        self._harness: pykka.ActorRef[Any] | None = None
        self._harness_http: HarnessHttpServer | None = None
        self.tls: TlsMaterial | None = None
        self._actor: pykka.ActorRef[Any] | None = None
        self._http: api.ApiHttpServer | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._kubeconfigs: list[str] = []  # what write_kubeconfig wrote: rewritten on a token rotation
        self.faults = Faults(self)  # every fault by name, recorded: a schedule (fake/faults.py)

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> FakeCluster:
        """Start every part; a part that cannot start (a port in use) stops the ones already started and
        raises (`jr2_actors.fake.http.ListenError` for a port), leaving no thread and no key file behind."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="jr2-fake-")
        if self._token_file is None:
            self._token_file = os.path.join(self._tmp.name, "token")
        if self._tls_enabled:
            self.tls = generate_tls(self._tmp.name)
        if self._harness_enabled:
            self._harness_http = HarnessHttpServer(long_poll=self._long_poll, clock=self.clock,
                                                   ports=self._harness_ports)
            self._operator_core.endpoint = self._harness_http.url
            if self._harness_ports > 1:
                self._operator_core.endpoints = tuple(self._harness_http.urls)
        state = ClusterState(namespaces=("default", self.namespace), history=self._history, now=self.clock.wall(),
                             entropy=lambda: uuid.uuid4().int)
        self._actor = api.ApiServerActor.start(state, token=self._token, clock=self.clock,
                                               token_file=self._token_file, on_token=self._token_rotated)
        self._http = api.ApiHttpServer(self._actor, port=self._port, clock=self.clock,
                                       bookmark_interval=self._bookmark_interval,
                                       tls=self.tls.server_context() if self.tls else None)
        self._http.start()
        if self._operator_enabled:
            self._operator = OperatorActor.start(self._actor, self._operator_core, self.clock)
        if self._harness_http is not None:
            instance_digest = token_digest(harness_token(self.signing_key, INSTANCE_HARNESS))
            self._harness = HarnessActor.start(self._actor, self.namespace, self.clock,
                                               base_url=self._harness_http.url, instance_digest=instance_digest,
                                               operator=self._operator, mode=self.harness_mode)
            self._harness_http.start(self._harness)
        # The in-process watchers are registered before start returns, so what a caller writes next is seen:
        # each actor has run its start (which tells the API server to subscribe it), then the API server has.
        for ref in (self._operator, self._harness):
            if ref is not None:
                ref.ask(Run(lambda core: None), timeout=ASK_TIMEOUT)
        self.call(lambda s: None)

    def stop(self) -> None:
        """Stop every part that runs, in order; one that will not stop in time is logged and the rest
        still stop, and the temp folder of keys is removed whatever happens."""
        self.faults.cancel()
        try:
            steps: list[tuple[str, Callable[[], object]]] = []
            if self._harness_http is not None:
                steps.append(("Harness HTTP", self._harness_http.stop))
            for label, ref in (("Harness", self._harness), ("operator", self._operator)):
                if ref is not None:
                    steps.append((label, functools.partial(ref.stop, block=True, timeout=ASK_TIMEOUT)))
            if self._http is not None:
                steps.append(("API server HTTP", self._http.stop))
            if self._actor is not None:
                steps.append(("API server", functools.partial(self._actor.stop, block=True, timeout=ASK_TIMEOUT)))
            self._harness_http = self._harness = self._operator = self._http = self._actor = None
            for label, step in steps:
                try:
                    step()
                except (pykka.Timeout, OSError) as e:
                    log.warning("fake cluster: the %s did not stop cleanly: %r", label, e)
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- how to reach it ---------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._http is not None, "the fake cluster is not started"
        return self._http.url

    @property
    def token(self) -> str:
        return self._token

    @property
    def token_file(self) -> str:
        assert self._token_file is not None
        return self._token_file

    def access(self, *, use_token_file: bool = True) -> ClusterAccess:
        """Access as the orchestrator pod has it: the token as a file, read on every request."""
        ca_file = self.tls.ca_file if self.tls else None
        if use_token_file:
            return ClusterAccess(server=self.url, namespace=self.namespace, source="fake-cluster",
                                 ca_file=ca_file, token_file=self.token_file)
        return ClusterAccess(server=self.url, namespace=self.namespace, source="fake-cluster", ca_file=ca_file,
                             token=self._token)

    def client(self, **kwargs: Any) -> KubeClient:
        """A KubeClient on this cluster; on a driven VirtualClock it reports its requests to the clock."""
        kwargs.setdefault("activity", activity(self.clock))
        return KubeClient(self.access(), **kwargs)

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig every client accepts. The user carries the token inline and names the token file:
        kr8s reads only `token`; client-go (kubectl), the official client, kubernetes_asyncio and jr2 itself
        prefer `tokenFile`, so they pick up a rotation from the file. A rotation also rewrites every
        kubeconfig this cluster wrote (`write_kubeconfig`), so the inline token follows too."""
        cluster: dict[str, Any] = {"server": self.url}
        if self.tls:
            cluster["certificate-authority-data"] = base64.b64encode(self.tls.ca_pem).decode()
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": "jr2-fake", "preferences": {},
            "clusters": [{"name": "jr2-fake", "cluster": cluster}],
            "users": [{"name": "jr2-fake", "user": {"token": self._token, "tokenFile": self.token_file}}],
            "contexts": [{"name": "jr2-fake", "context": {"cluster": "jr2-fake", "user": "jr2-fake",
                                                          "namespace": self.namespace}}],
        }

    def write_kubeconfig(self, path: str) -> str:
        """Write `kubeconfig()` to `path` (mode 0600) atomically: a temp file in the same folder, then
        `os.replace`, so a process that waits for the file never reads half of one, and a failed write
        leaves the file that was there."""
        self._write_kubeconfig(path)
        if path not in self._kubeconfigs:
            self._kubeconfigs.append(path)
        return path

    def _write_kubeconfig(self, path: str) -> None:
        api.write_atomically(path, yaml.safe_dump(self.kubeconfig(), sort_keys=False))

    def _token_rotated(self, token: str) -> None:
        """Called inside the API server actor once it holds a new token (`rotate_token`, or
        `POST /_fake/rotate-token`): the kubeconfigs this cluster wrote now carry it inline."""
        self._token = token
        for path in list(self._kubeconfigs):
            try:
                self._write_kubeconfig(path)
            except OSError as e:  # a folder removed under it: the token file still holds the token
                log.warning("fake cluster: kubeconfig %s not rewritten after a token rotation: %s", path,
                            e.strerror or e)

    # -- the store, in process ---------------------------------------------------------------------------

    def call(self, fn: Callable[[ClusterState], T]) -> T:
        """Run `fn` on the store inside the API server actor (no lock, no race with HTTP callers)."""
        return cast(T, self._ref().ask(Run(fn), timeout=ASK_TIMEOUT))

    @property
    def resource_version(self) -> int:
        return self.call(lambda s: s.rv)

    # -- the operator's model and its scripted faults -----------------------------------------------------

    def operate(self, fn: Callable[[OperatorCore, float], T]) -> T:
        """Change the operator's model (`fn(core, now_wall)`), then let it reconcile before returning."""
        assert self._operator is not None, "the fake operator is off"
        clock = self.clock
        return cast(T, self._operator.ask(Run(lambda core: fn(core, clock.wall())), timeout=ASK_TIMEOUT))

    def reconcile(self) -> None:
        self.operate(lambda core, now: None)

    def kill_harness(self, name: str, *, reason: str = "OOMKilled", message: str = "") -> None:
        """The Harness container ends and restarts (`OOMKilled`/137, or `Error`/1 with other reasons)."""
        self.operate(lambda core, now: core.kill_harness(name, now, reason=reason, message=message))

    def crash_loop(self, name: str, message: str) -> None:
        self.operate(lambda core, now: core.crash_loop(name, now, message=message))

    def evict(self, name: str, *, reason: str = "Evicted",
              message: str = "The node was low on resource: memory.") -> None:
        self.operate(lambda core, now: core.evict(name, reason=reason, message=message))

    def lose_node(self, node: str) -> None:
        self.operate(lambda core, now: core.lose_node(node))

    def add_node(self, node: Node) -> None:
        self.operate(lambda core, now: core.add_node(node))

    def set_quota(self, quota: Quota | None) -> None:
        self.operate(lambda core, now: core.set_quota(quota))

    # -- the Harness ---------------------------------------------------------------------------------------

    @property
    def harness_url(self) -> str:
        assert self._harness_http is not None, "the fake Harness is off"
        return self._harness_http.url

    @property
    def instance_harness_url(self) -> str:
        return f"{self.harness_url}/{INSTANCE}"

    def harness_token(self, sandbox_name: str) -> str:
        """The bearer token the Orchestrator sends to this Sandbox's Harness (derived from the signing key)."""
        return harness_token(self.signing_key, sandbox_name)

    def harness_env(self, sandbox_name: str) -> list[dict[str, str]]:
        """The Sandbox `spec.env` entry that lets its Harness check that token."""
        return [{"name": DIGEST_ENV, "value": token_digest(self.harness_token(sandbox_name))}]

    def harness(self, fn: Callable[[HarnessCore], T]) -> T:
        """Run `fn` on the Harness's model inside its actor: scripts, draining, what it recorded. Every
        long-poll then looks again (`fn` may have changed a stream); `harness_read` for a read."""
        assert self._harness is not None, "the fake Harness is off"
        return cast(T, self._harness.ask(Run(fn), timeout=ASK_TIMEOUT))

    def harness_read(self, fn: Callable[[HarnessCore], T]) -> T:
        """Read the Harness's model inside its actor (`fn` changes nothing): no long-poll is woken."""
        assert self._harness is not None, "the fake Harness is off"
        return cast(T, self._harness.ask(Run(fn, wakes=False), timeout=ASK_TIMEOUT))

    def script(self, agent: str, *turns: Sequence[HarnessAction]) -> None:
        self.harness(lambda core: core.script(agent, turns))

    def admissions(self) -> list[dict[str, Any]]:
        return self.harness_read(lambda core: list(core.admissions))

    def list_kill(self, sandbox: str, **kill: Any) -> str:
        """A guard kill on `sandbox`'s Harness list alone — no Submission ran (`HarnessCore.list_kill`)."""
        now = self.clock.wall()
        return self.harness(lambda core: core.list_kill(sandbox, now, **kill))

    # -- faults (each a Knob of the API server actor: docs/fake-cluster.md "Fault knobs") ----------------

    def fault(self, knob: knobs.Knob) -> Any:
        """Turn any knob: what each method below does, and what `/_fake/` routes do over HTTP."""
        return self._ref().ask(knob, timeout=ASK_TIMEOUT)

    def end_watches(self) -> None:
        self.fault(knobs.EndWatches())

    def stall_watches(self, on: bool = True) -> None:
        self.fault(knobs.StallWatches(on))

    def stream_error(self, status: int = 500, *, reason: str = "InternalError",
                     message: str = "an in-stream error") -> None:
        """Every open watch gets an in-stream ERROR frame with this Status, then ends."""
        self.fault(knobs.StreamError(status, reason, message))

    def compact(self) -> None:
        self.fault(knobs.Compact())

    def fail_next(self, count: int, status: int, *, retry_after: int | None = None, watch_only: bool = False) -> None:
        self.fault(knobs.FailNext(status, count, retry_after, watch_only))

    def away(self, on: bool = True, *, status: int = 503) -> None:
        """The control plane away (every request answered `status`, watches ended) until `away(False)`."""
        self.fault(knobs.Away(on, status))

    def set_latency(self, seconds: float) -> None:
        self.fault(knobs.SetLatency(seconds))

    def restart(self) -> None:
        self.fault(knobs.Restart())

    def rotate_token(self) -> str:
        self._token = cast(str, self.fault(knobs.RotateToken()))
        return self._token

    def requests(self, *, clear: bool = False) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.fault(knobs.RequestLog(clear))["requests"])

    def connections(self, *, reset_peak: bool = False) -> dict[str, tuple[int, int]]:
        """Clients' TCP connections to the API server and to the Harness: (open now, the most open at once
        since the last reset) each — what a bench counts of an orchestrator's pools."""
        assert self._http is not None, "the fake cluster is not started"
        out = {"api": self._http.connections(reset_peak=reset_peak)}
        if self._harness_http is not None:
            out["harness"] = self._harness_http.connections(reset_peak=reset_peak)
        return out

    def accepted(self) -> dict[str, int]:
        """Clients' TCP connections the API server and the Harness have taken, ever: what shows a client
        keeping its connections alive (the orchestrator's one Harness session)."""
        assert self._http is not None, "the fake cluster is not started"
        out = {"api": self._http.accepted}
        if self._harness_http is not None:
            out["harness"] = self._harness_http.accepted
        return out

    def watch_stats(self) -> dict[str, int]:
        return cast(dict[str, int], self.fault(knobs.WatchStats()))

    def _ref(self) -> pykka.ActorRef[Any]:
        assert self._actor is not None, "the fake cluster is not started"
        return self._actor
