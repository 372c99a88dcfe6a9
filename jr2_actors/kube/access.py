"""Where the cluster is: a pure decision over an injected environment and file system.

Theory of operation (dagr T107's precedence, CONTRACTS.md §2):

1. An explicit kubeconfig (the `--kubeconfig` flag, else `KUBECONFIG`, a path list) wins. The first
   existing file of the list is used — files are not merged. A list that names only missing files is
   refused by name: it is never silently replaced by in-cluster access or by `~/.kube/config`.
2. In-cluster: the ServiceAccount's token, ca.crt and namespace files AND both
   `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`. The token is named as a file, never read
   here: the client reads it on every request (ADR-0063).
3. `~/.kube/config`.

When nothing is found the error names every variable and path it probed. This module reads no
environment and no disk of its own: both are arguments, so every case is a function call in a test.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml

from jr2_actors.values.constants import MAX_KUBECONFIG_BYTES
from jr2_actors.values.errors import ClusterAccessError, KubeconfigError, one_line

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
HOST_VAR = "KUBERNETES_SERVICE_HOST"
PORT_VAR = "KUBERNETES_SERVICE_PORT"
KUBECONFIG_VAR = "KUBECONFIG"


class Files(Protocol):
    """The part of a file system the decision reads."""

    def is_file(self, path: str) -> bool: ...

    def size(self, path: str) -> int: ...

    def read_text(self, path: str) -> str: ...


class LocalFiles:
    """The real file system."""

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def read_text(self, path: str) -> str:
        with open(path, encoding="utf-8") as f:
            return f.read()


@dataclass(frozen=True)
class ClusterAccess:
    """Everything the client needs to reach one cluster. Secrets are kept out of `repr`."""

    server: str
    namespace: str
    source: str
    in_cluster: bool = False
    ca_file: str | None = None
    ca_data: bytes | None = field(default=None, repr=False)
    insecure_skip_tls_verify: bool = False
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    client_cert_file: str | None = None
    client_cert_data: bytes | None = field(default=None, repr=False)
    client_key_file: str | None = None
    client_key_data: bytes | None = field(default=None, repr=False)


def resolve(
    env: Mapping[str, str],
    files: Files,
    *,
    home: str | None,
    explicit_path: str | None = None,
    context: str | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
) -> ClusterAccess:
    """Decide where the cluster is, by the precedence in the module docstring."""
    probed: list[str] = []

    if explicit_path:
        if not files.is_file(explicit_path):
            raise ClusterAccessError(f"--kubeconfig {explicit_path} does not exist",
                                     [f"--kubeconfig={explicit_path}"])
        return load_kubeconfig(explicit_path, files, context=context, source=f"--kubeconfig={explicit_path}")

    listed = env.get(KUBECONFIG_VAR, "")
    if listed:
        paths = [p for p in listed.split(os.pathsep) if p]
        for path in paths:
            if files.is_file(path):
                return load_kubeconfig(path, files, context=context, source=f"{KUBECONFIG_VAR}={path}")
        raise ClusterAccessError(
            f"{KUBECONFIG_VAR} names no existing file ({listed}); refusing to fall back to another cluster",
            [f"{KUBECONFIG_VAR}={p}" for p in paths] or [f"{KUBECONFIG_VAR}={listed}"],
        )
    probed.append(f"{KUBECONFIG_VAR} (unset)")

    in_cluster = _in_cluster(env, files, service_account_dir, probed)
    if in_cluster is not None:
        return in_cluster

    if home:
        path = os.path.join(home, ".kube", "config")
        if files.is_file(path):
            return load_kubeconfig(path, files, context=context, source=path)
        probed.append(f"{path} (missing)")
    else:
        probed.append("HOME (unset)")
    raise ClusterAccessError("no cluster access found", probed)


def _in_cluster(env: Mapping[str, str], files: Files, sa_dir: str, probed: list[str]) -> ClusterAccess | None:
    host = env.get(HOST_VAR, "")
    port = env.get(PORT_VAR, "")
    token_path = os.path.join(sa_dir, "token")
    ca_path = os.path.join(sa_dir, "ca.crt")
    ns_path = os.path.join(sa_dir, "namespace")
    present = True
    for var, value in ((HOST_VAR, host), (PORT_VAR, port)):
        if not value:
            probed.append(f"{var} (unset)")
            present = False
    for path in (token_path, ca_path, ns_path):
        if not files.is_file(path):
            probed.append(f"{path} (missing)")
            present = False
    if not present:
        return None
    namespace = files.read_text(ns_path).strip()
    if not namespace:
        raise ClusterAccessError(f"in-cluster namespace file {ns_path} is empty", [ns_path])
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal in a URL is bracketed
    return ClusterAccess(
        server=f"https://{host}:{port}",
        namespace=namespace,
        source="in-cluster",
        in_cluster=True,
        ca_file=ca_path,
        token_file=token_path,
    )


def load_kubeconfig(path: str, files: Files, *, context: str | None = None, source: str = "") -> ClusterAccess:
    """Read one kubeconfig file; every fault names the file and the key."""
    try:
        size = files.size(path)
    except OSError as e:
        raise KubeconfigError(path, "(file)", f"cannot be read: {e.strerror or e}") from e
    if size > MAX_KUBECONFIG_BYTES:
        raise KubeconfigError(path, "(file)", f"is {size} bytes, over the {MAX_KUBECONFIG_BYTES}-byte limit")
    try:
        text = files.read_text(path)
    except (OSError, UnicodeDecodeError) as e:
        raise KubeconfigError(path, "(file)", f"cannot be read: {e}") from e
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise KubeconfigError(path, "(file)", f"is not valid YAML: {one_line(e)}") from e
    except RecursionError as e:
        raise KubeconfigError(path, "(file)", "is nested too deeply") from e
    return parse_kubeconfig(doc, path=path, context=context, source=source or path)


def parse_kubeconfig(doc: object, *, path: str, context: str | None = None, source: str = "") -> ClusterAccess:
    """Resolve the chosen (or current) context of an already-parsed kubeconfig document."""
    if not isinstance(doc, dict):
        raise KubeconfigError(path, "(document)", "is not a mapping")
    base_dir = os.path.dirname(os.path.abspath(path))

    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise KubeconfigError(path, "current-context", "is not set and no context was chosen")
    if not isinstance(ctx_name, str):
        raise KubeconfigError(path, "current-context", "is not a string")
    ctx = _named(doc, path, "contexts", "context", ctx_name)
    cluster_name = _str(ctx, path, f"contexts[{ctx_name}].context.cluster", "cluster", required=True)
    user_name = _str(ctx, path, f"contexts[{ctx_name}].context.user", "user")
    namespace = _str(ctx, path, f"contexts[{ctx_name}].context.namespace", "namespace") or "default"

    assert cluster_name is not None
    cluster = _named(doc, path, "clusters", "cluster", cluster_name)
    ckey = f"clusters[{cluster_name}].cluster"
    server = _str(cluster, path, f"{ckey}.server", "server", required=True)
    assert server is not None
    if not server.startswith(("https://", "http://")):
        raise KubeconfigError(path, f"{ckey}.server", f"{server!r} is not an http(s) URL")
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise KubeconfigError(path, f"{ckey}.insecure-skip-tls-verify", "is not a boolean")
    ca_file = _file(cluster, path, base_dir, f"{ckey}.certificate-authority", "certificate-authority")
    ca_data = _b64(cluster, path, f"{ckey}.certificate-authority-data", "certificate-authority-data")

    token = token_file = cert_file = key_file = None
    cert_data = key_data = None
    if user_name:
        user = _named(doc, path, "users", "user", user_name)
        ukey = f"users[{user_name}].user"
        for unsupported in ("exec", "auth-provider"):
            if unsupported in user:
                raise KubeconfigError(path, f"{ukey}.{unsupported}",
                                      "credential plugins are not supported (the orchestrator runs no subprocess)")
        token = _str(user, path, f"{ukey}.token", "token")
        token_file = _file(user, path, base_dir, f"{ukey}.tokenFile", "tokenFile")
        cert_file = _file(user, path, base_dir, f"{ukey}.client-certificate", "client-certificate")
        cert_data = _b64(user, path, f"{ukey}.client-certificate-data", "client-certificate-data")
        key_file = _file(user, path, base_dir, f"{ukey}.client-key", "client-key")
        key_data = _b64(user, path, f"{ukey}.client-key-data", "client-key-data")
        if bool(cert_file or cert_data) != bool(key_file or key_data):
            raise KubeconfigError(path, ukey, "has a client certificate without a key, or a key without one")

    return ClusterAccess(
        server=server.rstrip("/"),
        namespace=namespace,
        source=source or path,
        ca_file=ca_file,
        ca_data=ca_data,
        insecure_skip_tls_verify=insecure,
        token=token,
        token_file=token_file,
        client_cert_file=cert_file,
        client_cert_data=cert_data,
        client_key_file=key_file,
        client_key_data=key_data,
    )


def _named(doc: dict[str, Any], path: str, list_key: str, inner: str, name: str) -> dict[str, Any]:
    entries = doc.get(list_key)
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise KubeconfigError(path, list_key, "is not a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise KubeconfigError(path, f"{list_key}[{i}]", "is not a mapping")
        if entry.get("name") == name:
            body = entry.get(inner)
            if not isinstance(body, dict):
                raise KubeconfigError(path, f"{list_key}[{name}].{inner}", "is missing or not a mapping")
            return body
    raise KubeconfigError(path, f"{list_key}[{name}]", "is not defined")


def _str(obj: dict[str, Any], path: str, key: str, field_name: str, required: bool = False) -> str | None:
    value = obj.get(field_name)
    if value is None or value == "":
        if required:
            raise KubeconfigError(path, key, "is missing")
        return None
    if not isinstance(value, str):
        raise KubeconfigError(path, key, "is not a string")
    return value


def _file(obj: dict[str, Any], path: str, base_dir: str, key: str, field_name: str) -> str | None:
    value = _str(obj, path, key, field_name)
    if value is None:
        return None
    # kubectl resolves relative paths against the kubeconfig's own directory.
    return value if os.path.isabs(value) else os.path.join(base_dir, value)


def _b64(obj: dict[str, Any], path: str, key: str, field_name: str) -> bytes | None:
    value = _str(obj, path, key, field_name)
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as e:
        raise KubeconfigError(path, key, "is not valid base64") from e


