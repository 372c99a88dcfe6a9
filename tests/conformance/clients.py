"""One adapter per client a user brings to the fake cluster, each doing the same few things its own way.

Every adapter drives the client through its public API only, from the kubeconfig the cluster wrote (as a
user's code would), and turns the client's error into `ClientError(code)` so one check reads them all. A
client that offers no way to do something (kubectl has no delete preconditions; kr8s no server-side apply
and it restarts a watch on a 410 by itself) says so in `NOT_OFFERED`, with why: the checks skip nothing
silently, and docs/fake-cluster.md's table shows the same gaps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from importlib import metadata
from typing import Any, ClassVar, Protocol
from urllib.parse import urlencode

GROUP, VERSION, PLURAL, NS = "core.jr2.dev", "v1alpha1", "sandboxes", "jr2"
API_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = f"{PLURAL}.{GROUP}"
MANAGER = "conformance"
WATCH_SECONDS = 5  # a server-side bound on each watch, so a missing event fails the check instead of hanging it

Obj = dict[str, Any]


class ClientError(Exception):
    """What the client raised for an API error, with the HTTP status the server answered."""

    def __init__(self, code: int, detail: object = "") -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code


class Client(Protocol):
    name: ClassVar[str]
    package: ClassVar[str]  # the distribution the version is read from

    def create(self, body: Obj) -> Obj: ...
    def get(self, name: str) -> Obj: ...
    def names(self, selector: str | None = None) -> tuple[list[str], str | None]: ...
    def named(self, field_selector: str) -> list[str]: ...
    def watch(self, rv: str, selector: str, count: int) -> list[tuple[str, str]]: ...
    def watch_expired(self, rv: str) -> int: ...
    def merge_patch(self, name: str, patch: Obj) -> Obj: ...
    def json_patch(self, name: str, ops: list[Obj]) -> Obj: ...
    def apply(self, body: Obj) -> Obj: ...
    def patch_status(self, name: str, status: Obj) -> Obj: ...
    def delete(self, name: str, *, resource_version: str | None = None) -> None: ...
    def create_event(self, body: Obj) -> Obj: ...
    def events_of(self, name: str) -> list[str]: ...
    def close(self) -> None: ...


def version_of(client: type[Client]) -> str:
    if client.package == "kubectl":
        return kubectl_version() or "absent"
    return metadata.version(client.package)


# -- the official client, and kubernetes_asyncio (the same generated API, awaited) ------------------------

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


class _Generated:
    """The calls shared by the official client and kubernetes_asyncio (generated from the same OpenAPI)."""

    def _do(self, fn: Callable[[Any, Any], Any]) -> Any:
        raise NotImplementedError

    def create(self, body: Obj) -> Obj:
        return self._do(lambda custom, core: custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body))  # type: ignore[no-any-return]

    def get(self, name: str) -> Obj:
        return self._do(lambda custom, core: custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name))  # type: ignore[no-any-return]

    def names(self, selector: str | None = None) -> tuple[list[str], str | None]:
        doc = self._do(lambda custom, core: custom.list_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, label_selector=selector or ""))
        return [i["metadata"]["name"] for i in doc["items"]], doc["metadata"]["resourceVersion"]

    def named(self, field_selector: str) -> list[str]:
        doc = self._do(lambda custom, core: custom.list_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, field_selector=field_selector))
        return [i["metadata"]["name"] for i in doc["items"]]

    def merge_patch(self, name: str, patch: Obj) -> Obj:
        return self._do(lambda custom, core: custom.patch_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP, VERSION, NS, PLURAL, name, patch, _content_type=MERGE))

    def json_patch(self, name: str, ops: list[Obj]) -> Obj:
        return self._do(lambda custom, core: custom.patch_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP, VERSION, NS, PLURAL, name, ops, _content_type=JSON_PATCH))

    def apply(self, body: Obj) -> Obj:
        name = body["metadata"]["name"]
        self._do(lambda custom, core: custom.patch_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, name, body, field_manager=MANAGER, force=True, _content_type=APPLY))
        return self.get(name)  # a 201 from an apply that created is mapped to None by these clients

    def patch_status(self, name: str, status: Obj) -> Obj:
        return self._do(lambda custom, core: custom.patch_namespaced_custom_object_status(  # type: ignore[no-any-return]
            GROUP, VERSION, NS, PLURAL, name, {"status": status}, _content_type=MERGE))

    def delete(self, name: str, *, resource_version: str | None = None) -> None:
        options = {"preconditions": {"resourceVersion": resource_version}} if resource_version else {}
        self._do(lambda custom, core: custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name,
                                                                             body=options))

    def create_event(self, body: Obj) -> Obj:
        created = self._do(lambda custom, core: core.create_namespaced_event(NS, body))
        return {"metadata": {"name": created.metadata.name, "resourceVersion": created.metadata.resource_version}}

    def events_of(self, name: str) -> list[str]:
        listed = self._do(lambda custom, core: core.list_namespaced_event(
            NS, field_selector=f"involvedObject.name={name}"))
        return [e.message for e in listed.items]


class Official(_Generated):
    name: ClassVar[str] = "kubernetes"
    package: ClassVar[str] = "kubernetes"

    def __init__(self, kubeconfig: str) -> None:
        from kubernetes import client, config

        self._api = config.new_client_from_config(config_file=kubeconfig)
        self._custom = client.CustomObjectsApi(self._api)
        self._core = client.CoreV1Api(self._api)

    def _do(self, fn: Callable[[Any, Any], Any]) -> Any:
        from kubernetes.client.rest import ApiException

        try:
            return fn(self._custom, self._core)
        except ApiException as e:
            raise ClientError(e.status, e.reason) from e

    def watch(self, rv: str, selector: str, count: int) -> list[tuple[str, str]]:
        from kubernetes import watch

        seen: list[tuple[str, str]] = []
        w = watch.Watch()
        for event in w.stream(self._custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                              resource_version=rv, label_selector=selector, timeout_seconds=WATCH_SECONDS):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == count:
                w.stop()
        return seen

    def watch_expired(self, rv: str) -> int:
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        try:
            for _ in watch.Watch().stream(self._custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                                          resource_version=rv, timeout_seconds=WATCH_SECONDS):
                pass
        except ApiException as e:
            return int(e.status)
        return 0

    def close(self) -> None:
        self._api.close()


class Asyncio(_Generated):
    name: ClassVar[str] = "kubernetes_asyncio"
    package: ClassVar[str] = "kubernetes_asyncio"

    def __init__(self, kubeconfig: str) -> None:
        self._kubeconfig = kubeconfig

    def _run(self, fn: Callable[[Any, Any], Awaitable[Any]]) -> Any:
        """Each call on a loop of its own, with a client of its own (an aiohttp session is bound to its loop)."""
        from kubernetes_asyncio import client, config
        from kubernetes_asyncio.client.exceptions import ApiException

        async def go() -> Any:
            async with await config.new_client_from_config(config_file=self._kubeconfig) as api:
                try:
                    return await fn(client.CustomObjectsApi(api), client.CoreV1Api(api))
                except ApiException as e:
                    raise ClientError(e.status, e.reason) from e

        return asyncio.run(go())

    def _do(self, fn: Callable[[Any, Any], Any]) -> Any:
        async def awaited(custom: Any, core: Any) -> Any:
            return await fn(custom, core)

        return self._run(awaited)

    def watch(self, rv: str, selector: str, count: int) -> list[tuple[str, str]]:
        from kubernetes_asyncio import watch

        async def go(custom: Any, core: Any) -> list[tuple[str, str]]:
            seen: list[tuple[str, str]] = []
            async with watch.Watch() as w:
                async for event in w.stream(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                                            resource_version=rv, label_selector=selector,
                                            timeout_seconds=WATCH_SECONDS):
                    seen.append((event["type"], event["object"]["metadata"]["name"]))
                    if len(seen) == count:
                        break
            return seen

        return self._run(go)  # type: ignore[no-any-return]

    def watch_expired(self, rv: str) -> int:
        from kubernetes_asyncio import watch

        async def go(custom: Any, core: Any) -> int:
            async with watch.Watch() as w:
                async for _ in w.stream(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                                        resource_version=rv, timeout_seconds=WATCH_SECONDS):
                    pass
            return 0

        try:
            return self._run(go)  # type: ignore[no-any-return]
        except ClientError as e:
            return e.code

    def close(self) -> None:
        pass


# -- lightkube ---------------------------------------------------------------------------------------------

class Lightkube:
    name: ClassVar[str] = "lightkube"
    package: ClassVar[str] = "lightkube"

    def __init__(self, kubeconfig: str) -> None:
        from lightkube import Client as LightClient
        from lightkube import KubeConfig
        from lightkube.generic_resource import create_namespaced_resource

        self._client = LightClient(config=KubeConfig.from_file(kubeconfig), namespace=NS, field_manager=MANAGER)
        self._sandbox = create_namespaced_resource(GROUP, VERSION, "Sandbox", PLURAL)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        from lightkube import ApiError

        try:
            yield
        except ApiError as e:
            raise ClientError(int(e.status.code or 0), e.status.message) from e

    def _obj(self, body: Obj) -> Any:
        from lightkube import codecs

        return codecs.from_dict(body)

    def create(self, body: Obj) -> Obj:
        with self._errors():
            return self._client.create(self._obj(body)).to_dict()  # type: ignore[no-any-return]

    def get(self, name: str) -> Obj:
        with self._errors():
            return self._client.get(self._sandbox, name).to_dict()  # type: ignore[no-any-return]

    def names(self, selector: str | None = None) -> tuple[list[str], str | None]:
        labels = dict(part.split("=", 1) for part in selector.split(",")) if selector else None
        with self._errors():
            listed = self._client.list(self._sandbox, labels=labels)
            names = [o.metadata.name for o in listed]
            return names, listed.resourceVersion

    def named(self, field_selector: str) -> list[str]:
        fields = dict(part.split("=", 1) for part in field_selector.split(","))
        with self._errors():
            return [o.metadata.name for o in self._client.list(self._sandbox, fields=fields)]

    def watch(self, rv: str, selector: str, count: int) -> list[tuple[str, str]]:
        labels = dict(part.split("=", 1) for part in selector.split(","))
        seen: list[tuple[str, str]] = []
        with self._errors():
            for event_type, obj in self._client.watch(self._sandbox, labels=labels, resource_version=rv,
                                                      server_timeout=WATCH_SECONDS):
                seen.append((event_type, obj.metadata.name))
                if len(seen) == count:
                    break
        return seen

    def watch_expired(self, rv: str) -> int:
        try:
            with self._errors():
                for _ in self._client.watch(self._sandbox, resource_version=rv, server_timeout=WATCH_SECONDS):
                    break
        except ClientError as e:
            return e.code
        return 0

    def _patch(self, res: Any, name: str, patch: object, patch_type: str) -> Obj:
        from lightkube.types import PatchType

        with self._errors():
            return self._client.patch(res, name, patch, patch_type=PatchType[patch_type]).to_dict()  # type: ignore[no-any-return]

    def merge_patch(self, name: str, patch: Obj) -> Obj:
        return self._patch(self._sandbox, name, patch, "MERGE")

    def json_patch(self, name: str, ops: list[Obj]) -> Obj:
        return self._patch(self._sandbox, name, ops, "JSON")

    def apply(self, body: Obj) -> Obj:
        with self._errors():
            return self._client.apply(self._obj(body), force=True).to_dict()  # type: ignore[no-any-return]

    def patch_status(self, name: str, status: Obj) -> Obj:
        return self._patch(self._sandbox.Status, name, {"status": status}, "MERGE")

    def delete(self, name: str, *, resource_version: str | None = None) -> None:
        assert resource_version is None, "lightkube's delete takes no preconditions"
        with self._errors():
            self._client.delete(self._sandbox, name)

    def create_event(self, body: Obj) -> Obj:
        with self._errors():
            created = self._client.create(self._obj({"apiVersion": "v1", "kind": "Event", **body}))
        return {"metadata": {"name": created.metadata.name, "resourceVersion": created.metadata.resourceVersion}}

    def events_of(self, name: str) -> list[str]:
        from lightkube.resources.core_v1 import Event

        with self._errors():
            return [e.message for e in self._client.list(Event, fields={"involvedObject.name": name})]

    def close(self) -> None:
        self._client.close()


# -- kr8s --------------------------------------------------------------------------------------------------

def _ca_in_a_file(kubeconfig: str) -> str:
    """The kubeconfig, rewritten beside it with each cluster's CA in a file of the test's own folder: kr8s
    copies `certificate-authority-data` into a temp file (TMPDIR) it never removes, one per client made."""
    import base64
    from pathlib import Path

    import yaml

    path = Path(kubeconfig)
    doc = yaml.safe_load(path.read_text())
    for i, entry in enumerate(doc.get("clusters", [])):
        data = entry["cluster"].pop("certificate-authority-data", None)
        if data:
            ca = path.with_name(f"{path.name}-ca-{i}.pem")
            ca.write_bytes(base64.b64decode(data))
            entry["cluster"]["certificate-authority"] = str(ca)
    out = path.with_name(f"{path.name}-kr8s")
    out.write_text(yaml.safe_dump(doc))
    out.chmod(0o600)
    return str(out)


class Kr8s:
    name: ClassVar[str] = "kr8s"
    package: ClassVar[str] = "kr8s"

    def __init__(self, kubeconfig: str) -> None:
        import kr8s
        from kr8s.objects import new_class

        self._api = kr8s.api(kubeconfig=_ca_in_a_file(kubeconfig), namespace=NS)
        self._sandbox = new_class(kind="Sandbox", version=API_VERSION, namespaced=True, asyncio=False,
                                  plural=PLURAL)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        from kr8s import NotFoundError, ServerError

        try:
            yield
        except ServerError as e:
            raise ClientError(e.response.status_code if e.response is not None else 0, e) from e
        except NotFoundError as e:
            raise ClientError(404, e) from e

    def _one(self, name: str) -> Any:
        return self._sandbox.get(name, namespace=NS, api=self._api)

    def create(self, body: Obj) -> Obj:
        with self._errors():
            obj = self._sandbox(body, namespace=NS, api=self._api)
            obj.create()
            return obj.raw  # type: ignore[no-any-return]

    def get(self, name: str) -> Obj:
        with self._errors():
            return self._one(name).raw  # type: ignore[no-any-return]

    def names(self, selector: str | None = None) -> tuple[list[str], str | None]:
        with self._errors():
            found = self._api.get(RESOURCE, namespace=NS, label_selector=selector or None)
            return [o.name for o in found], None  # kr8s gives the objects, not the list's version

    def named(self, field_selector: str) -> list[str]:
        with self._errors():
            return [o.name for o in self._api.get(RESOURCE, namespace=NS, field_selector=field_selector)]

    def watch(self, rv: str, selector: str, count: int) -> list[tuple[str, str]]:
        seen: list[tuple[str, str]] = []
        with self._errors():
            for event_type, obj in self._api.watch(RESOURCE, namespace=NS, label_selector=selector, since=rv):
                seen.append((event_type, obj.name))
                if len(seen) == count:
                    break
        return seen

    def watch_expired(self, rv: str) -> int:
        raise AssertionError("kr8s restarts a watch on a 410 itself; it never surfaces")

    def _patch(self, name: str, patch: object, *, subresource: str | None = None, type_: str | None = None) -> Obj:
        with self._errors():
            obj = self._one(name)
            obj.patch(patch, subresource=subresource, type=type_)
            return obj.raw  # type: ignore[no-any-return]

    def merge_patch(self, name: str, patch: Obj) -> Obj:
        return self._patch(name, patch)

    def json_patch(self, name: str, ops: list[Obj]) -> Obj:
        return self._patch(name, ops, type_="json")

    def apply(self, body: Obj) -> Obj:
        raise AssertionError("kr8s offers no server-side apply")

    def patch_status(self, name: str, status: Obj) -> Obj:
        return self._patch(name, {"status": status}, subresource="status")

    def delete(self, name: str, *, resource_version: str | None = None) -> None:
        assert resource_version is None, "kr8s's delete takes no preconditions"
        with self._errors():
            self._one(name).delete()

    def create_event(self, body: Obj) -> Obj:
        from kr8s.objects import Event

        with self._errors():
            event = Event({"apiVersion": "v1", "kind": "Event", **body}, api=self._api)
            event.create()
            return event.raw  # type: ignore[no-any-return]

    def events_of(self, name: str) -> list[str]:
        with self._errors():
            return [e.raw.get("message", "") for e in
                    self._api.get("events", namespace=NS, field_selector=f"involvedObject.name={name}")]

    def close(self) -> None:
        pass


# -- kubectl -----------------------------------------------------------------------------------------------

def kubectl_path() -> str | None:
    return shutil.which("kubectl")


def kubectl_version() -> str | None:
    path = kubectl_path()
    if path is None:
        return None
    out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60,
                         check=False)
    try:
        return str(json.loads(out.stdout)["clientVersion"]["gitVersion"])
    except (ValueError, KeyError):
        return None


class Kubectl:
    name: ClassVar[str] = "kubectl"
    package: ClassVar[str] = "kubectl"

    def __init__(self, kubeconfig: str) -> None:
        path = kubectl_path()
        assert path is not None, "kubectl is not on PATH"
        self._path = path
        self._kubeconfig = kubeconfig

    def _run(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run([self._path, "--kubeconfig", self._kubeconfig, "-n", NS, *args], input=stdin,
                              capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            # kubectl prints the server's Status as `Error from server (Conflict): ...`: its reason names the code.
            raise ClientError(_code_of(done.stderr), done.stderr.strip())
        return done.stdout

    def _json(self, *args: str, stdin: str | None = None) -> Obj:
        return json.loads(self._run(*args, "-o", "json", stdin=stdin))  # type: ignore[no-any-return]

    def create(self, body: Obj) -> Obj:
        return self._json("create", "-f", "-", stdin=json.dumps(body))

    def get(self, name: str) -> Obj:
        return self._json("get", RESOURCE, name, "--show-managed-fields")

    def names(self, selector: str | None = None) -> tuple[list[str], str | None]:
        doc = self._json("get", RESOURCE, *(["-l", selector] if selector else []))
        return [i["metadata"]["name"] for i in doc["items"]], None  # kubectl builds its own List, versionless

    def named(self, field_selector: str) -> list[str]:
        doc = self._json("get", RESOURCE, "--field-selector", field_selector)
        return [i["metadata"]["name"] for i in doc["items"]]

    def _raw_watch(self, rv: str, selector: str | None) -> list[Obj]:
        """`kubectl get --raw` on the watch URL: kubectl's `get --watch` cannot start at a version."""
        query = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": str(WATCH_SECONDS)}
        if selector:
            query["labelSelector"] = selector
        out = self._run("get", "--raw", f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/{PLURAL}?{urlencode(query)}")
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def watch(self, rv: str, selector: str, count: int) -> list[tuple[str, str]]:
        frames = self._raw_watch(rv, selector)
        return [(f["type"], f["object"]["metadata"]["name"]) for f in frames if f["type"] != "BOOKMARK"][:count]

    def watch_expired(self, rv: str) -> int:
        frames = self._raw_watch(rv, None)
        errors = [f["object"].get("code", 0) for f in frames if f["type"] == "ERROR"]
        return int(errors[0]) if errors else 0

    def merge_patch(self, name: str, patch: Obj) -> Obj:
        return self._json("patch", RESOURCE, name, "--type", "merge", "-p", json.dumps(patch))

    def json_patch(self, name: str, ops: list[Obj]) -> Obj:
        return self._json("patch", RESOURCE, name, "--type", "json", "-p", json.dumps(ops))

    def apply(self, body: Obj) -> Obj:
        return self._json("apply", "--server-side", "--force-conflicts", "--field-manager", MANAGER,
                          "--show-managed-fields", "-f", "-", stdin=json.dumps(body))

    def patch_status(self, name: str, status: Obj) -> Obj:
        return self._json("patch", RESOURCE, name, "--subresource", "status", "--type", "merge", "-p",
                          json.dumps({"status": status}))

    def delete(self, name: str, *, resource_version: str | None = None) -> None:
        assert resource_version is None, "kubectl delete takes no preconditions"
        self._run("delete", RESOURCE, name, "--wait=false")

    def create_event(self, body: Obj) -> Obj:
        return self._json("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "Event", **body}))

    def events_of(self, name: str) -> list[str]:
        doc = self._json("get", "events", "--field-selector", f"involvedObject.name={name}")
        return [e.get("message", "") for e in doc["items"]]

    def close(self) -> None:
        pass


_REASONS = {"NotFound": 404, "Conflict": 409, "AlreadyExists": 409, "Invalid": 422, "BadRequest": 400,
            "Forbidden": 403, "Gone": 410, "Expired": 410}


def _code_of(stderr: str) -> int:
    for reason, code in _REASONS.items():
        if f"({reason})" in stderr:
            return code
    # A 422 is printed without its reason: `The request is invalid: ...` or `The Sandbox "a" is invalid: ...`.
    return 422 if re.search(r"^The .* is invalid", stderr, re.MULTILINE) else 0


CLIENTS: tuple[type[Client], ...] = (Official, Asyncio, Lightkube, Kr8s, Kubectl)

# What a client offers no way to do, and why: the check is not run for it, and the docs table says so.
NOT_OFFERED: dict[tuple[str, str], str] = {
    ("kr8s", "apply"): "no server-side apply in kr8s",
    ("kr8s", "expired_410"): "kr8s restarts a watch on a 410 itself",
    ("kr8s", "delete_precondition"): "kr8s's delete takes no preconditions",
    ("lightkube", "delete_precondition"): "lightkube's delete takes no preconditions",
    ("kubectl", "delete_precondition"): "kubectl delete takes no preconditions",
}
