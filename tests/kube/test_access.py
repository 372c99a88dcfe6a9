"""Cluster access: precedence in both directions, the named refusal, every probed path named."""

from __future__ import annotations

import base64
import os

import pytest

from jr2_actors.kube.access import ClusterAccess, LocalFiles, load_kubeconfig, resolve
from jr2_actors.values.errors import ClusterAccessError, KubeconfigError

SA = "/var/run/secrets/kubernetes.io/serviceaccount"


class DictFiles:
    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def is_file(self, path: str) -> bool:
        return path in self.files

    def size(self, path: str) -> int:
        if path not in self.files:
            raise FileNotFoundError(2, "No such file", path)
        return len(self.files[path].encode())

    def read_text(self, path: str) -> str:
        return self.files[path]


def kubeconfig(server: str = "https://k.example:6443", *, namespace: str = "jr2-dev", user: str = "token: abc",
               extra_cluster: str = "") -> str:
    return f"""
apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {{cluster: c1, user: u1, namespace: {namespace}}}
- name: other
  context: {{cluster: c2, user: u1}}
clusters:
- name: c1
  cluster:
    server: {server}
    {extra_cluster}
- name: c2
  cluster: {{server: "https://other.example:443", insecure-skip-tls-verify: true}}
users:
- name: u1
  user: {{{user}}}
"""


IN_CLUSTER_ENV = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
IN_CLUSTER_FILES = {f"{SA}/token": "t0k", f"{SA}/ca.crt": "CA", f"{SA}/namespace": "jr2-acme\n"}


def test_in_cluster_resolves_token_as_a_file_never_read_here() -> None:
    access = resolve(IN_CLUSTER_ENV, DictFiles(IN_CLUSTER_FILES), home="/root")
    assert access.in_cluster
    assert access.server == "https://10.0.0.1:443"
    assert access.namespace == "jr2-acme"
    assert access.token_file == f"{SA}/token"
    assert access.token is None
    assert access.ca_file == f"{SA}/ca.crt"


def test_in_cluster_ipv6_host_is_bracketed() -> None:
    env = {**IN_CLUSTER_ENV, "KUBERNETES_SERVICE_HOST": "fd00::1"}
    assert resolve(env, DictFiles(IN_CLUSTER_FILES), home=None).server == "https://[fd00::1]:443"


def test_kubeconfig_wins_over_in_cluster() -> None:
    files = DictFiles({**IN_CLUSTER_FILES, "/cfg/a": kubeconfig()})
    access = resolve({**IN_CLUSTER_ENV, "KUBECONFIG": "/cfg/a"}, files, home="/root")
    assert not access.in_cluster
    assert access.server == "https://k.example:6443"
    assert access.source == "KUBECONFIG=/cfg/a"


def test_in_cluster_wins_over_home_config() -> None:
    files = DictFiles({**IN_CLUSTER_FILES, "/root/.kube/config": kubeconfig()})
    access = resolve(IN_CLUSTER_ENV, files, home="/root")
    assert access.in_cluster


def test_home_config_used_when_not_in_cluster() -> None:
    files = DictFiles({"/root/.kube/config": kubeconfig()})
    access = resolve({}, files, home="/root")
    assert access.source == "/root/.kube/config"
    assert access.namespace == "jr2-dev"


def test_kubeconfig_path_list_takes_first_existing() -> None:
    files = DictFiles({"/b": kubeconfig("https://b.example"), "/c": kubeconfig("https://c.example")})
    access = resolve({"KUBECONFIG": f"/a{os.pathsep}/b{os.pathsep}/c"}, files, home=None)
    assert access.server == "https://b.example"


def test_kubeconfig_naming_only_missing_files_is_refused_by_name() -> None:
    files = DictFiles({**IN_CLUSTER_FILES, "/root/.kube/config": kubeconfig()})
    with pytest.raises(ClusterAccessError) as err:
        resolve({**IN_CLUSTER_ENV, "KUBECONFIG": f"/gone/one{os.pathsep}/gone/two"}, files, home="/root")
    text = str(err.value)
    assert "/gone/one" in text and "/gone/two" in text
    assert "refusing" in text


def test_explicit_flag_missing_is_refused_not_substituted() -> None:
    files = DictFiles({"/root/.kube/config": kubeconfig()})
    with pytest.raises(ClusterAccessError, match="/nope"):
        resolve({}, files, home="/root", explicit_path="/nope")


def test_nothing_found_names_every_variable_and_path() -> None:
    with pytest.raises(ClusterAccessError) as err:
        resolve({}, DictFiles({}), home="/home/u")
    probed = err.value.probed
    for expected in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", f"{SA}/token",
                     f"{SA}/ca.crt", f"{SA}/namespace", "/home/u/.kube/config"):
        assert any(expected in p for p in probed), expected
        assert expected in str(err.value)


def test_partial_in_cluster_is_not_in_cluster() -> None:
    # Files present but no service variables: not in cluster, and the error says which variable lacked.
    with pytest.raises(ClusterAccessError) as err:
        resolve({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, DictFiles(IN_CLUSTER_FILES), home=None)
    assert "KUBERNETES_SERVICE_PORT (unset)" in err.value.probed


def test_chosen_context_overrides_current() -> None:
    access = resolve({}, DictFiles({"/root/.kube/config": kubeconfig()}), home="/root", context="other")
    assert access.server == "https://other.example:443"
    assert access.insecure_skip_tls_verify
    assert access.namespace == "default"


def test_ca_data_and_client_cert_data_decoded() -> None:
    b = base64.b64encode
    user = (f"client-certificate-data: {b(b'CERT').decode()}, client-key-data: {b(b'KEY').decode()}")
    text = kubeconfig(user=user, extra_cluster=f"certificate-authority-data: {b(b'CA').decode()}")
    access = resolve({}, DictFiles({"/root/.kube/config": text}), home="/root")
    assert access.ca_data == b"CA"
    assert access.client_cert_data == b"CERT"
    assert access.client_key_data == b"KEY"
    assert "KEY" not in repr(access) and "abc" not in repr(access)


def test_relative_files_resolve_against_the_kubeconfig_dir() -> None:
    text = kubeconfig(user="tokenFile: tok, client-certificate: c.crt, client-key: /abs/c.key",
                      extra_cluster="certificate-authority: ca.pem")
    access = resolve({"KUBECONFIG": "/etc/k/cfg"}, DictFiles({"/etc/k/cfg": text}), home=None)
    assert access.token_file == "/etc/k/tok"
    assert access.ca_file == "/etc/k/ca.pem"
    assert access.client_cert_file == "/etc/k/c.crt"
    assert access.client_key_file == "/abs/c.key"


def test_inline_token_is_kept_out_of_repr() -> None:
    access = resolve({}, DictFiles({"/root/.kube/config": kubeconfig()}), home="/root")
    assert access.token == "abc"
    assert "abc" not in repr(access)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("just a string", "(document)"),
        ("current-context: x\ncontexts: {}", "contexts"),
        ("contexts: []", "current-context"),
        ("current-context: [1]", "current-context"),
        ("current-context: nope\ncontexts: []", "contexts[nope]"),
        ("current-context: a\ncontexts: [{name: a, context: {user: u}}]", "contexts[a].context.cluster"),
        ("current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {}}]",
         "clusters[c].cluster.server"),
        ("current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n"
         "clusters: [{name: c, cluster: {server: 'ftp://x'}}]", "clusters[c].cluster.server"),
        ("current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x', certificate-authority-data: '!!notb64'}}]",
         "clusters[c].cluster.certificate-authority-data"),
        ("current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x', insecure-skip-tls-verify: 'yes please'}}]",
         "clusters[c].cluster.insecure-skip-tls-verify"),
        ("current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x'}}]\nusers: [{name: u, user: {exec: {command: sh}}}]",
         "users[u].user.exec"),
        ("current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x'}}]\nusers: [{name: u, user: {token: 5}}]",
         "users[u].user.token"),
        ("current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x'}}]\nusers: [{name: u, user: {client-key: k}}]",
         "users[u].user"),
        ("key: [unclosed", "(file)"),
        ("a: &a [1]\nb: !!python/object:os.system ['echo pwned']", "(file)"),
    ],
)
def test_malformed_kubeconfig_names_file_and_key(text: str, key: str) -> None:
    with pytest.raises(KubeconfigError) as err:
        load_kubeconfig("/cfg", DictFiles({"/cfg": text}))
    assert err.value.path == "/cfg"
    assert err.value.key == key
    assert "/cfg" in str(err.value) and key in str(err.value)


def test_oversized_kubeconfig_is_refused_unread() -> None:
    files = DictFiles({"/cfg": "#" * (2 * 1024 * 1024)})
    with pytest.raises(KubeconfigError, match="over the"):
        load_kubeconfig("/cfg", files)


def test_deeply_nested_kubeconfig_is_a_clear_error() -> None:
    with pytest.raises(KubeconfigError, match="/cfg"):
        load_kubeconfig("/cfg", DictFiles({"/cfg": "[" * 20_000 + "]" * 20_000}))


def test_local_files_reads_a_real_kubeconfig(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "config")
    with open(path, "w") as f:
        f.write(kubeconfig())
    access = resolve({"KUBECONFIG": path}, LocalFiles(), home=None)
    assert isinstance(access, ClusterAccess)
    assert access.server == "https://k.example:6443"


def test_unreadable_kubeconfig_names_the_file(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "bin")
    with open(path, "wb") as f:
        f.write(b"\xff\xfe\x00garbage")
    with pytest.raises(KubeconfigError, match="bin"):
        load_kubeconfig(path, LocalFiles())
