"""`RealCluster`: the real control plane (etcd + kube-apiserver, realcluster/main.go) on loopback, set up
as the orchestrator's namespace is in production.

Start: a temp folder outside the checkout; a generated CA and serving certificate (jr2_actors.fake.tls);
a service-account signing key; a static token file (`--token-auth-file`) naming three users — an admin in
`system:masters` (the test's own hand, and the fake operator's), the orchestrator as its ServiceAccount
(`system:serviceaccount:<its own ns>:jr2-orchestrator`, which the shipped RoleBinding names), and nobody
else; `--authorization-mode=RBAC` alone. Once `/readyz` answers, the project's CRDs (jr2_actors/crds/), the
two namespaces — the Sandboxes' (`namespace`) and the orchestrator's own (`home_namespace`) — its
ServiceAccount there (manifests/orchestrator/serviceaccount.yaml) and its Role and RoleBinding in the
Sandboxes' (manifests/sandboxes/rbac.yaml, the subject's namespace set as an overlay does) are applied as
the admin. So the orchestrator runs with exactly the rights `manifests/` gives it.

Stop: SIGTERM to the process group, SIGKILL after 10 s, the temp folder removed — also when start fails
part way or is interrupted (Ctrl-C), so nothing is left behind.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from jr2_actors.fake import tls
from jr2_actors.kube.access import ClusterAccess
from realcluster.build import Built, build

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "jr2_actors" / "crds"
SERVICE_ACCOUNT_FILE = REPO / "manifests" / "orchestrator" / "serviceaccount.yaml"
RBAC = REPO / "manifests" / "sandboxes" / "rbac.yaml"
SERVICE_ACCOUNT = "jr2-orchestrator"
ORCHESTRATOR_UIDS = ("jr2-orchestrator-token-1", "jr2-orchestrator-token-2")  # the token file's two, in order
READY_WITHIN = 120.0  # seconds: a cold start on a loaded 2-core machine takes 5-15


class StartFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class Identity:
    user: str
    token_file: str


def _free_port() -> int:
    # A port the kernel picked, handed to kube-apiserver (it takes no port 0); the gap is milliseconds.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


class RealCluster:
    def __init__(self, *, namespace: str = "jr2", home_namespace: str = "", binary: Path | None = None,
                 log_to: Path | None = None) -> None:
        self.namespace = namespace  # the Sandboxes'
        self.home_namespace = home_namespace or f"{namespace}-system"  # the orchestrator's own (manifests/)
        self._binary = binary
        self._log_to = log_to
        self.dir: Path | None = None
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self.built: Built | None = None
        self.start_seconds = 0.0  # from spawning the process to the namespace set up
        self.ready_seconds = 0.0  # from spawning the process to /readyz ok
        self.admin: Identity | None = None
        self.orchestrator: Identity | None = None
        self.ca_file = ""
        self._args: list[str] = []

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> RealCluster:
        try:
            self._start()
        except BaseException:  # Ctrl-C while starting too: nothing stays behind
            self.stop()
            raise
        return self

    def _start(self) -> None:
        if self._binary is None:
            self.built = build()
            self._binary = self.built.path
        self.dir = Path(tempfile.mkdtemp(prefix="jr2-realcluster-"))
        d = self.dir
        material = tls.generate(str(d))
        self.ca_file = material.ca_file
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write(d / "sa.key", sa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()).decode())
        _write(d / "sa.pub", sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode())
        admin_token, orch_token, next_token = (base64.b32encode(os.urandom(20)).decode() for _ in range(3))
        orch_user = f"system:serviceaccount:{self.home_namespace}:{SERVICE_ACCOUNT}"
        groups = f'"system:serviceaccounts,system:serviceaccounts:{self.home_namespace}"'
        # Two tokens for the orchestrator's one identity, told apart by their uid in the audit log: the second
        # is what `rotate_orchestrator_token` puts in its file, as a kubelet rotates a projected token.
        _write(d / "tokens.csv", f'{admin_token},jr2-admin,jr2-admin,"system:masters"\n'
                                 f"{orch_token},{orch_user},{ORCHESTRATOR_UIDS[0]},{groups}\n"
                                 f"{next_token},{orch_user},{ORCHESTRATOR_UIDS[1]},{groups}\n")
        _write(d / "admin.token", admin_token)
        _write(d / "orchestrator.token", orch_token)
        _write(d / "orchestrator.token.next", next_token)
        _write(d / "audit-policy.yaml", "apiVersion: audit.k8s.io/v1\nkind: Policy\n"
                                        "omitStages: [RequestReceived]\nrules:\n  - level: Metadata\n")
        self.admin = Identity("jr2-admin", str(d / "admin.token"))
        self.orchestrator = Identity(orch_user, str(d / "orchestrator.token"))
        self.port = _free_port()
        args = [
            str(self._binary), f"--data-dir={d / 'etcd'}", f"--etcd-url-file={d / 'etcd.url'}", "--",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--cert-dir={d / 'certs'}", f"--tls-cert-file={material.cert_file}",
            f"--tls-private-key-file={material.key_file}", f"--client-ca-file={material.ca_file}",
            f"--token-auth-file={d / 'tokens.csv'}", "--authorization-mode=RBAC", "--anonymous-auth=false",
            f"--service-account-key-file={d / 'sa.pub'}", f"--service-account-signing-key-file={d / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/24", "--allow-privileged=false",
            # No kubelets, no cloud: the controllers are not here, so the server must not wait on them.
            "--endpoint-reconciler-type=none", "--profiling=false", "-v=0",
            # Who made each request (user, token uid, verb, path): what a test reads to see whose token was sent.
            f"--audit-policy-file={d / 'audit-policy.yaml'}", f"--audit-log-path={d / 'audit.log'}",
            "--audit-log-mode=blocking",
        ]
        self._args = args
        started = time.monotonic()
        self._spawn()
        self._await_ready(started)
        self.ready_seconds = time.monotonic() - started
        self._set_up()
        self.start_seconds = time.monotonic() - started

    def _spawn(self) -> None:
        assert self.dir is not None
        (self.dir / "etcd.url").unlink(missing_ok=True)
        log = open(self._log_to or self.dir / "apiserver.log", "ab")  # noqa: SIM115 -- handed to the process
        try:
            # Its own session: a Ctrl-C at the terminal reaches it only through our stop(), in order.
            self._proc = subprocess.Popen(self._args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()

    def restart(self) -> float:
        """Stop the process and start it again on the same etcd data and port: what a client sees when its
        API server restarts (its watch cache starts empty, so a watch from an older version is a 410).
        Returns the seconds until it is ready again."""
        self._terminate()
        started = time.monotonic()
        self._spawn()
        self._await_ready(started)
        s = self.session()
        for path in sorted(CRDS.glob("*.core.jr2.dev.yaml")):
            self._await_served(s, yaml.safe_load(path.read_text()))  # its CRDs' storage initialises again
        return time.monotonic() - started

    def stop(self) -> None:
        self._terminate()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running etcd + kube-apiserver process (a new one after each `restart`)."""
        return self._proc

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        path = self._log_to or (self.dir / "apiserver.log" if self.dir else None)
        if path is None or not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # -- access -----------------------------------------------------------------------------------------

    def access(self, identity: Identity | None = None) -> ClusterAccess:
        """How a KubeClient reaches it as `identity` (default: the orchestrator), its token as a file."""
        who = identity or self.orchestrator
        assert who is not None, "the cluster is not started"
        return ClusterAccess(server=self.url, namespace=self.namespace, source="realcluster",
                             ca_file=self.ca_file, token_file=who.token_file)

    def kubeconfig(self, identity: Identity | None = None) -> dict[str, Any]:
        who = identity or self.orchestrator
        assert who is not None, "the cluster is not started"
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": "jr2-real", "preferences": {},
            "clusters": [{"name": "jr2-real", "cluster": {"server": self.url, "certificate-authority": self.ca_file}}],
            "users": [{"name": who.user, "user": {"tokenFile": who.token_file}}],
            "contexts": [{"name": "jr2-real", "context": {"cluster": "jr2-real", "user": who.user,
                                                          "namespace": self.namespace}}],
        }

    def write_kubeconfig(self, path: str, identity: Identity | None = None) -> str:
        tmp = f"{path}.tmp"
        _write(Path(tmp), yaml.safe_dump(self.kubeconfig(identity), sort_keys=False))
        os.replace(tmp, path)
        return path

    def session(self, identity: Identity | None = None) -> requests.Session:
        """A requests Session as `identity` (default: the admin), for a test's own raw calls."""
        who = identity or self.admin
        assert who is not None, "the cluster is not started"
        s = requests.Session()
        s.trust_env = False
        s.verify = self.ca_file
        s.headers["Authorization"] = f"Bearer {Path(who.token_file).read_text().strip()}"
        return s

    def rotate_orchestrator_token(self) -> None:
        """Replace the orchestrator's token file (a rename over it, as a kubelet swaps a projected token) with
        its second token: the same identity, the audit log's `user.uid` ORCHESTRATOR_UIDS[1]."""
        assert self.dir is not None, "the cluster is not started"
        tmp = self.dir / "orchestrator.token.tmp"
        _write(tmp, (self.dir / "orchestrator.token.next").read_text())
        os.replace(tmp, self.dir / "orchestrator.token")

    def audit(self) -> list[dict[str, Any]]:
        """Every request the server has answered so far (its audit log, level Metadata), oldest first."""
        assert self.dir is not None, "the cluster is not started"
        path = self.dir / "audit.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if line.strip()]

    def compact(self) -> int:
        """Compact etcd at its current revision (its JSON gateway on loopback): every older version is gone,
        as after kube-apiserver's own periodic compaction. Returns the revision."""
        assert self.dir is not None, "the cluster is not started"
        etcd = (self.dir / "etcd.url").read_text().strip()  # etcd's port is new at each start
        s = requests.Session()
        s.trust_env = False
        header = s.post(f"{etcd}/v3/kv/range", json={"key": base64.b64encode(b"/").decode()},
                        timeout=10).json()["header"]
        revision = int(header["revision"])
        s.post(f"{etcd}/v3/kv/compaction", json={"revision": revision, "physical": True},
               timeout=30).raise_for_status()
        return revision

    # -- start-up ---------------------------------------------------------------------------------------

    def _await_ready(self, started: float) -> None:
        assert self._proc is not None and self.admin is not None
        s = self.session()
        while True:
            # An outside process has no event to wait on: its health endpoint is asked, each ask bounded.
            if self._proc.poll() is not None:
                raise StartFailed(f"kube-apiserver exited {self._proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(requests.RequestException):
                if s.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            if time.monotonic() - started > READY_WITHIN:
                raise StartFailed(f"kube-apiserver not ready within {READY_WITHIN:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def _set_up(self) -> None:
        s = self.session()
        for path in sorted(CRDS.glob("*.core.jr2.dev.yaml")):
            crd = yaml.safe_load(path.read_text())
            self._create(s, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        for name in (self.namespace, self.home_namespace):
            self._create(s, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        placed = [(self.home_namespace, d) for d in yaml.safe_load_all(SERVICE_ACCOUNT_FILE.read_text())] \
            + [(self.namespace, d) for d in yaml.safe_load_all(RBAC.read_text())]
        for namespace, doc in placed:
            kind = doc["kind"]
            base = "/api/v1" if kind == "ServiceAccount" else "/apis/rbac.authorization.k8s.io/v1"
            plural = {"ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings"}[kind]
            # As kustomize's `namespace:` does for the objects, and an overlay's patch for the subject.
            doc["metadata"]["namespace"] = namespace
            for subject in doc.get("subjects", []):
                subject["namespace"] = self.home_namespace
            self._create(s, f"{base}/namespaces/{namespace}/{plural}", doc)
        for path in sorted(CRDS.glob("*.core.jr2.dev.yaml")):
            crd = yaml.safe_load(path.read_text())
            self._await_established(s, crd["metadata"]["name"])
            self._await_served(s, crd)

    def _await_served(self, s: requests.Session, crd: dict[str, Any]) -> None:
        """Until a list of the kind answers: an Established CRD's storage still initialises for a moment
        (429 "storage is (re)initializing", with a Retry-After), and a start is not done before it serves."""
        spec = crd["spec"]
        path = f"{self.url}/apis/{spec['group']}/{spec['versions'][0]['name']}/namespaces/{self.namespace}/" \
               f"{spec['names']['plural']}"
        deadline = time.monotonic() + 60
        while True:
            r = s.get(path, params={"limit": "1"}, timeout=10)
            if r.status_code == 200:
                return
            if r.status_code != 429 or time.monotonic() > deadline:
                raise StartFailed(f"GET {path}: {r.status_code} {r.text[:300]}")
            time.sleep(min(float(r.headers.get("Retry-After", "1")), 1.0))  # the server's own retry advice

    def _create(self, s: requests.Session, path: str, body: dict[str, Any]) -> None:
        r = s.post(f"{self.url}{path}", data=json.dumps(body), headers={"Content-Type": "application/json"},
                   timeout=30)
        if r.status_code not in (200, 201):
            raise StartFailed(f"POST {path}: {r.status_code} {r.text[:500]}")

    def _await_established(self, s: requests.Session, name: str) -> None:
        """Until the CRD is Established and its resource is served (discovery), watching the CRD."""
        deadline = time.monotonic() + 60
        path = f"{self.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        while time.monotonic() < deadline:
            crd = s.get(f"{path}/{name}", timeout=10).json()
            conditions = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
            if conditions.get("Established") == "True":
                return
            rv = crd["metadata"]["resourceVersion"]
            # Wait on the server's next change of it, not a sleep: a watch from its version, bounded.
            with s.get(path, params={"watch": "1", "fieldSelector": f"metadata.name={name}",
                                     "resourceVersion": rv, "timeoutSeconds": "5"}, stream=True, timeout=10) as w:
                for _ in _lines(w):
                    break
        raise StartFailed(f"CRD {name} not Established within 60 s")


def _lines(response: requests.Response) -> Iterator[bytes]:
    yield from response.iter_lines()


