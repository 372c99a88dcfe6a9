"""Issue 20 item 5: an operator written with kopf runs against the fake cluster unchanged.

kopf is a framework, not a client a test calls, so its check is an operator: create, field and delete
handlers on Sandboxes, behind kopf's own finalizer, posting kopf's own Events — what a user's operator
does first. It runs in a thread of its own (kopf's asyncio loop) and is stopped by its stop flag.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
from kubernetes import client as k8s
from kubernetes import config
from kubernetes.client.rest import ApiException

from jr2_actors.fake.cluster import FakeCluster
from tests.conformance.clients import GROUP, NS, PLURAL, VERSION
from tests.support.waiting import wait_until

WAIT = 30.0  # kopf's own start-up (discovery, the first list) under a loaded machine


class KopfOperator:
    """A kopf operator on `cluster`: what its handlers saw, and the thread it runs on."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.seen: list[tuple[str, str, Any]] = []
        self.registry = kopf.OperatorRegistry()
        self.stop_flag: asyncio.Future[None] | None = None
        self.ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        ca = cluster.tls.ca_pem if cluster.tls else None
        seen, registry = self.seen, self.registry

        @kopf.on.startup(registry=registry)
        def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
            # Progress in annotations: the Sandbox CRD's status schema has no field for kopf's own.
            settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()
            settings.posting.loggers = True  # kopf 1.45 posts its handlers' log lines as Events only when asked
            settings.watching.server_timeout = 10

        @kopf.on.login(registry=registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(server=cluster.url, ca_data=ca, token=cluster.token, default_namespace=NS)

        @kopf.on.create(GROUP, VERSION, PLURAL, id="created", registry=registry)
        def created(name: str, spec: Any, patch: kopf.Patch, **_: Any) -> None:
            seen.append(("create", name, spec.get("port")))
            patch.metadata.annotations["conformance/created"] = "yes"

        @kopf.on.field(GROUP, VERSION, PLURAL, field="spec.port", id="port_changed", registry=registry)
        def port_changed(name: str, old: Any, new: Any, **_: Any) -> None:
            seen.append(("field", name, (old, new)))

        @kopf.on.delete(GROUP, VERSION, PLURAL, id="deleted", registry=registry)
        def deleted(name: str, **_: Any) -> None:
            seen.append(("delete", name, None))

    def run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self.stop_flag = loop.create_future()
        loop.run_until_complete(kopf.operator(registry=self.registry, standalone=True, namespaces=[NS],
                                              clusterwide=False, stop_flag=self.stop_flag))
        loop.close()

    def stop(self) -> None:
        loop, flag = self._loop, self.stop_flag
        if loop is not None and flag is not None and not loop.is_closed():
            loop.call_soon_threadsafe(_settle, flag)


def _settle(flag: asyncio.Future[None]) -> None:
    if not flag.done():
        flag.set_result(None)


@pytest.fixture
def operator(tmp_path: Path) -> Iterator[tuple[KopfOperator, FakeCluster, k8s.CustomObjectsApi]]:
    objects_log = logging.getLogger("kopf.objects")  # what kopf posts as Events: its handlers' INFO lines
    level = objects_log.level
    objects_log.setLevel(logging.INFO)
    with FakeCluster(namespace=NS, operator=False, harness=False) as cluster:
        op = KopfOperator(cluster)
        thread = threading.Thread(target=op.run, name="kopf", daemon=True)
        thread.start()
        api = config.new_client_from_config(config_file=cluster.write_kubeconfig(str(tmp_path / "kubeconfig")))
        try:
            yield op, cluster, k8s.CustomObjectsApi(api)
        finally:
            op.stop()
            thread.join(timeout=WAIT)
            api.close()
            objects_log.setLevel(level)
        assert not thread.is_alive(), "kopf did not stop on its stop flag"


def get(custom: k8s.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_a_kopf_operator_creates_follows_a_field_and_finalizes_a_delete(
        operator: tuple[KopfOperator, FakeCluster, k8s.CustomObjectsApi]) -> None:
    op, _cluster, custom = operator
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Sandbox", "metadata": {"name": "a"}, "spec": {"port": 8080}}
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body)
    wait_until(lambda: ("create", "a", 8080) in op.seen, WAIT, "kopf's create handler")
    wait_until(lambda: get(custom, "a")["metadata"].get("annotations", {}).get("conformance/created") == "yes",
               WAIT, "the create handler's patch")
    assert "kopf.zalando.org/KopfFinalizerMarker" in get(custom, "a")["metadata"]["finalizers"]

    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": {"port": 9090}})
    wait_until(lambda: ("field", "a", (8080, 9090)) in op.seen, WAIT, "kopf's field handler")

    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a")
    wait_until(lambda: ("delete", "a", None) in op.seen, WAIT, "kopf's delete handler")

    def gone() -> bool:
        try:
            get(custom, "a")
        except ApiException as e:
            return bool(e.status == 404)
        return False

    wait_until(gone, WAIT, "the Sandbox to go once kopf removed its finalizer")
    core = k8s.CoreV1Api(custom.api_client)

    def messages() -> list[str]:
        return [e.message for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=a").items]

    # kopf posts an Event per handler, from a queue of its own: they arrive after the handlers ran.
    wanted = {"Handler 'created' succeeded.", "Handler 'port_changed/spec.port' succeeded.",
              "Handler 'deleted' succeeded."}
    wait_until(lambda: wanted <= set(messages()), WAIT, "kopf's Events")
