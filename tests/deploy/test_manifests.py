"""manifests/: a kustomize base a platform team applies for a least-privilege, hardened orchestrator
(issue 12) — every file parsed, the Deployment's promises checked, the NetworkPolicies evaluated, and
the whole rendered by kubectl and accepted by a client dry run when kubectl is on PATH."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

import jr2_actors
from jr2_actors.api.app import ROUTES
from jr2_actors.fake.rbac import Grant
from jr2_actors.values.constants import SERVE_STOP_SECONDS, WATCH_MAX_FAILURE_SECONDS
from jr2_actors.values.quantity import cpu_millis, memory_bytes
from jr2_actors.workspace.manifest import HARNESS_PORT
from tests.support.k8s_models import model_problems
from tests.support.kubectl_stub import kubectl_stub
from tests.support.manifests import HOME, SANDBOXES, Doc, docs, files, manifest_role, namespace_of, one
from tests.support.paths import MANIFESTS

# A control-plane upgrade can keep the API server away this long; liveness must not restart the pod
# through it (issue 12). A zonal managed control plane is unavailable for minutes while it upgrades.
CONTROL_PLANE_UPGRADE_SECONDS = 20 * 60
# What issue 12 grants the orchestrator, and nothing else.
ISSUE_12_GRANTS = frozenset(
    {Grant("core.jr2.dev", "sandboxes", v) for v in ("get", "list", "watch", "create", "patch", "delete")}
    | {Grant("core.jr2.dev", "repos", v) for v in ("get", "list", "watch", "create", "patch")}
    | {Grant("", "secrets", v) for v in ("get", "create", "patch", "delete")})
CLUSTER_SCOPED = frozenset({"CustomResourceDefinition", "Namespace"})
STATE_DIR = "/var/lib/jr2"

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")


def deployment() -> Doc:
    return one("Deployment", "jr2-orchestrator")


def pod() -> Doc:
    return deployment()["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def container() -> Doc:
    (only,) = pod()["containers"]
    return only  # type: ignore[no-any-return]


def flags() -> dict[str, str]:
    """Each `--name=value` argument's value; a flag without one (`--supervise`) maps to ""."""
    return {name: value for name, _, value in (arg.removeprefix("--").partition("=") for arg in container()["args"])}


# -- every file -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", files(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_every_manifest_parses_and_names_what_it_is(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        assert isinstance(doc, dict), path
        assert doc.get("apiVersion") and doc.get("kind"), path
        if doc["kind"] == "Kustomization":
            for resource in doc.get("resources", []):
                assert (path.parent / resource).exists(), f"{path}: {resource} does not exist"
            for patch in doc.get("patches", []):  # a file beside it, or an inline patch
                assert ("path" in patch) != ("patch" in patch), f"{path}: a patch is a file or inline, one of them"
                if "path" in patch:
                    assert (path.parent / patch["path"]).is_file(), f"{path}: {patch['path']} does not exist"
        else:
            assert doc.get("metadata", {}).get("name"), path


@pytest.mark.parametrize("doc", docs(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_object_is_one_a_strict_api_server_accepts(doc: Doc) -> None:
    assert model_problems(doc) == []


def test_the_model_check_finds_a_misspelt_field_and_a_wrong_type() -> None:
    broken = deployment()
    broken["spec"]["replicas"] = "1"
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    problems = model_problems(broken)
    assert any("replicas" in p for p in problems)
    assert any("readOnlyRootFileSystem" in p for p in problems)


def test_nothing_but_crds_and_the_namespaces_is_cluster_scoped_and_nothing_names_a_namespace() -> None:
    for doc in docs():
        assert "namespace" not in doc["metadata"], f"{doc['kind']} names its namespace: kustomize sets it"
    kinds = {d["kind"] for d in docs()}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}
    assert (namespace_of(HOME), namespace_of(SANDBOXES)) == ("jr2-system", "jr2")
    assert one("Namespace", folder=HOME)["metadata"]["name"] == namespace_of(HOME)
    assert one("Namespace", folder=SANDBOXES)["metadata"]["name"] == namespace_of(SANDBOXES)


# -- RBAC -----------------------------------------------------------------------------------------------

def test_the_role_grants_exactly_issue_12s_verbs_in_one_namespace() -> None:
    role = manifest_role()
    assert role.grants() == ISSUE_12_GRANTS
    for rule in role.rules:
        assert not rule.resource_names
        assert not any(r.startswith("pods") for r in rule.resources)


def test_the_binding_gives_the_role_to_the_orchestrators_service_account_only() -> None:
    binding = one("RoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": one("Role")["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": one("ServiceAccount")["metadata"]["name"],
                                    "namespace": namespace_of(HOME)}]
    assert pod()["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]


def test_no_role_reaches_the_namespace_that_holds_the_signing_key() -> None:
    """The Role needs Secrets verbs (the Sandboxes' token Secrets), and `get` on Secrets reads any Secret of
    its namespace: so the Instance Secret (the signing key) lives in the orchestrator's own namespace, where
    nothing grants its ServiceAccount anything, and reaches the pod as a volume the kubelet mounts."""
    assert one("ServiceAccount", folder=HOME)
    for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
        assert not [d for d in docs(HOME) if d["kind"] == kind], f"a {kind} in the orchestrator's namespace"
    assert one("Role", folder=SANDBOXES) and namespace_of(SANDBOXES) != namespace_of(HOME)
    assert {g.resource for g in manifest_role().grants()} >= {"secrets"}  # what made the split needed
    (key_mount,) = [m for m in mounts().values() if "secret" in m["volume"]]
    assert Path(flags()["signing-key-file"]).parent == Path(key_mount["mountPath"])
    assert "signing-key" in {i["key"] for i in key_mount["volume"]["secret"]["items"]}
    assert flags()["namespace"] == namespace_of(SANDBOXES)  # serve runs its Sandboxes in the other one


# -- the Deployment ---------------------------------------------------------------------------------------

def test_one_replica_recreated_so_state_db_has_one_writer() -> None:
    spec = deployment()["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()


def effective(key: str) -> Any:
    """A security setting as the kubelet applies it: the container's, else the pod's."""
    return container().get("securityContext", {}).get(key, pod().get("securityContext", {}).get(key))


def test_the_pod_runs_hardened() -> None:
    assert effective("runAsNonRoot") is True
    assert isinstance(effective("runAsUser"), int) and effective("runAsUser") > 0
    assert effective("readOnlyRootFilesystem") is True
    assert effective("allowPrivilegeEscalation") is False
    assert effective("privileged") in (None, False)
    assert effective("seccompProfile") == {"type": "RuntimeDefault"}
    capabilities = container()["securityContext"]["capabilities"]
    assert capabilities == {"drop": ["ALL"]}
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod().get(host)
    assert not any("hostPath" in v for v in pod()["volumes"])


def test_the_probes_ask_the_probe_listener_serve_is_told_to_start_for_the_route_it_answers() -> None:
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    listen = [a.split("=", 1)[1] for a in container()["args"] if a.startswith("--probe-listen=")]
    assert len(listen) == 1, "serve starts its probe listener only when told where"
    for probe in ("readinessProbe", "livenessProbe"):
        get = container()[probe]["httpGet"]
        assert get["path"] == "/healthz", f"{probe} asks {get['path']}; the probe listener answers /healthz only"
        assert any(r.method == "GET" and r.open and r.pattern.match(get["path"]) for r in ROUTES), \
            "the API's own /healthz answers the same document, open"
        assert str(ports[get["port"]]) == listen[0].rsplit(":", 1)[1]
    assert container()["readinessProbe"]["httpGet"] == container()["livenessProbe"]["httpGet"]
    assert "probe" not in {p.get("targetPort") for p in one("Service", "jr2-orchestrator")["spec"]["ports"]}


def test_liveness_outlasts_a_control_plane_upgrade() -> None:
    probe = container()["livenessProbe"]
    window = probe["periodSeconds"] * probe["failureThreshold"]
    # /healthz is 503 only once the watch passed its failure bound; liveness then waits its own window.
    assert WATCH_MAX_FAILURE_SECONDS + window >= CONTROL_PLANE_UPGRADE_SECONDS
    assert probe["timeoutSeconds"] < probe["periodSeconds"]


def test_the_grace_period_covers_a_clean_stop_with_margin() -> None:
    assert pod()["terminationGracePeriodSeconds"] >= 2 * SERVE_STOP_SECONDS


def test_the_pods_serve_runs_under_its_supervisor_whose_stop_is_bounded_without_serves_threads() -> None:
    """Without it a serve whose threads cannot run (thousands waking at once) is ended by the grace
    period's SIGKILL: exit 137, read as a crash."""
    assert flags()["supervise"] == ""
    assert not container().get("command")  # the image's entry point, `jr2-actors serve`, takes the flag


def test_requests_and_limits_are_set_and_ordered() -> None:
    resources = container()["resources"]
    for key in ("cpu", "memory"):
        assert key in resources["requests"] and key in resources["limits"]
    assert cpu_millis(resources["requests"]["cpu"]) <= cpu_millis(resources["limits"]["cpu"])
    assert memory_bytes(resources["requests"]["memory"]) <= memory_bytes(resources["limits"]["memory"])


def mounts() -> dict[str, Doc]:
    volumes = {v["name"]: v for v in pod()["volumes"]}
    return {m["mountPath"]: {**m, "volume": volumes[m["name"]]} for m in container()["volumeMounts"]}


def test_the_state_directory_is_the_claimed_volume_and_tmp_is_scratch() -> None:
    assert flags()["state-dir"] == STATE_DIR
    state = mounts()[STATE_DIR]["volume"]
    claim = one("PersistentVolumeClaim")
    assert state["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert "emptyDir" in mounts()["/tmp"]["volume"]
    assert isinstance(pod()["securityContext"]["fsGroup"], int)  # the volume is writable by the orchestrator


def test_the_instance_token_and_signing_key_come_from_a_secret_never_the_manifest() -> None:
    assert not [d for d in docs() if d["kind"] == "Secret"]
    secret_mounts = {path: m for path, m in mounts().items() if "secret" in m["volume"]}
    (path, mount), = secret_mounts.items()
    assert mount["readOnly"] is True
    assert mount["volume"]["secret"]["defaultMode"] & 0o022 == 0  # nobody but the owner may write, none may
    for flag in ("token-file", "signing-key-file"):
        assert Path(flags()[flag]).parent == Path(path), flag
    names = {e["name"] for e in container().get("env", [])}
    assert not names & {"JR2_INSTANCE_TOKEN", "JR2_SIGNING_KEY"}
    assert all("valueFrom" in e for e in container().get("env", [])), "no literal values in the pod's env"


def test_serve_is_told_the_sandboxes_namespace_and_listens_on_its_port() -> None:
    assert flags()["namespace"] == namespace_of(SANDBOXES) != namespace_of(HOME)
    host, _, port = flags()["listen"].rpartition(":")
    assert host == "0.0.0.0" and int(port) == container()["ports"][0]["containerPort"]


def test_the_image_is_this_version() -> None:
    assert container()["image"].rpartition(":")[2] == jr2_actors.__version__


def test_the_service_reaches_the_orchestrator_pods() -> None:
    service = one("Service")
    assert service["spec"]["selector"].items() <= deployment()["spec"]["template"]["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in container()["ports"]}


# -- NetworkPolicy, evaluated -------------------------------------------------------------------------------

def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A LabelSelector's answer, as the API server gives it."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def admitted(policies: list[Doc], *, to: Mapping[str, str], frm: Mapping[str, str], frm_ns: Mapping[str, str],
             same_namespace: bool, port: int) -> bool:
    """Whether ingress from a pod reaches `to` on `port`, under `policies` (all in `to`'s namespace)."""
    isolating = [p for p in policies if "Ingress" in p["spec"]["policyTypes"] and selects(p["spec"]["podSelector"], to)]
    if not isolating:
        return True
    for policy in isolating:
        for rule in policy["spec"].get("ingress") or []:
            if rule.get("ports") and not any(p.get("port") == port for p in rule["ports"]):
                continue
            for peer in rule.get("from") or []:
                assert "ipBlock" not in peer, "an ipBlock admits by address: not least privilege"
                ns_ok = selects(peer["namespaceSelector"], frm_ns) if "namespaceSelector" in peer else same_namespace
                pod_ok = selects(peer["podSelector"], frm) if "podSelector" in peer else True
                if ns_ok and pod_ok:
                    return True
    return False


ORCHESTRATOR = {"app.kubernetes.io/name": "jr2-orchestrator", "app.kubernetes.io/component": "orchestrator"}
SANDBOX_POD = {"jr2.dev/sandbox": "ws-abc"}
UNLABELLED: dict[str, str] = {}
SYSTEM_NS = {"kubernetes.io/metadata.name": "jr2-system"}  # the orchestrator's own
SANDBOX_NS = {"kubernetes.io/metadata.name": "jr2"}  # the Sandboxes'
CLIENT_NS = {"kubernetes.io/metadata.name": "ci", "jr2.dev/orchestrator-client": "true"}
OTHER_NS = {"kubernetes.io/metadata.name": "elsewhere"}


@pytest.mark.parametrize(("to", "to_ns", "frm", "frm_ns", "same", "port", "expected"), [
    (SANDBOX_POD, SANDBOXES, ORCHESTRATOR, SYSTEM_NS, False, HARNESS_PORT, True),  # the orchestrator calls the Harness
    (UNLABELLED, SANDBOXES, ORCHESTRATOR, SYSTEM_NS, False, HARNESS_PORT, True),  # whatever the operator's labels are
    (SANDBOX_POD, SANDBOXES, ORCHESTRATOR, SYSTEM_NS, False, 22, False),  # only the Harness port
    (SANDBOX_POD, SANDBOXES, SANDBOX_POD, SANDBOX_NS, True, HARNESS_PORT, False),  # one Sandbox never reaches another
    (SANDBOX_POD, SANDBOXES, UNLABELLED, SANDBOX_NS, True, HARNESS_PORT, False),
    (SANDBOX_POD, SANDBOXES, ORCHESTRATOR, SANDBOX_NS, True, HARNESS_PORT, False),  # its labels worn in the wrong place
    (SANDBOX_POD, SANDBOXES, ORCHESTRATOR, OTHER_NS, False, HARNESS_PORT, False),  # another namespace's orchestrator
    (SANDBOX_POD, SANDBOXES, UNLABELLED, CLIENT_NS, False, HARNESS_PORT, False),  # the API's clients: not the Harness
    (ORCHESTRATOR, HOME, UNLABELLED, CLIENT_NS, False, 8080, True),  # the documented selector admits
    (ORCHESTRATOR, HOME, UNLABELLED, OTHER_NS, False, 8080, False),
    (ORCHESTRATOR, HOME, SANDBOX_POD, SANDBOX_NS, False, 8080, False),  # an Agent never reaches the orchestrator
    (ORCHESTRATOR, HOME, UNLABELLED, CLIENT_NS, False, 9090, False),
])
def test_network_policies_admit_only_what_issue_12_says(to: dict[str, str], to_ns: Path, frm: dict[str, str],
                                                        frm_ns: dict[str, str], same: bool, port: int,
                                                        expected: bool) -> None:
    policies = [d for d in docs(to_ns) if d["kind"] == "NetworkPolicy"]  # the policies of the target's namespace
    assert admitted(policies, to=to, frm=frm, frm_ns=frm_ns, same_namespace=same, port=port) is expected


def test_the_api_port_is_the_orchestrators_and_the_harness_port_the_sandboxes() -> None:
    api = one("NetworkPolicy", "jr2-orchestrator-api", folder=HOME)
    harness = one("NetworkPolicy", "jr2-harness-ingress", folder=SANDBOXES)
    assert [p["port"] for p in api["spec"]["ingress"][0]["ports"]] == [container()["ports"][0]["containerPort"]]
    assert [p["port"] for p in harness["spec"]["ingress"][0]["ports"]] == [HARNESS_PORT]
    (peer,) = harness["spec"]["ingress"][0]["from"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": namespace_of(HOME)}}
    assert selects(peer["podSelector"], deployment()["spec"]["template"]["metadata"]["labels"])


# -- kustomize and kubectl ----------------------------------------------------------------------------------

OVERLAY = MANIFESTS / "overlays" / "second-namespace"


def test_the_overlay_repeats_both_namespaces_under_names_of_its_own_without_the_crds() -> None:
    def kustomization(folder: Path) -> Doc:
        return yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8"))  # type: ignore[no-any-return]

    parts = [OVERLAY / r for r in kustomization(OVERLAY)["resources"]]
    assert [[(p / r).resolve() for r in kustomization(p)["resources"]] for p in parts] == \
        [[HOME.resolve()], [SANDBOXES.resolve()]]
    names = [namespace_of(p) for p in parts]
    assert len(set(names)) == 2 and not set(names) & {namespace_of(HOME), namespace_of(SANDBOXES)}


def kubectl(*args: str, stdin: str | None = None, env: Mapping[str, str] | None = None) -> str:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


@functools.cache
def kustomized(folder: Path) -> str:
    """`kubectl kustomize` of a folder, once per run."""
    return kubectl("kustomize", str(folder))


def rendered(folder: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(kustomized(folder)) if d]


# Where each kind lands once rendered: the orchestrator's own namespace, or the Sandboxes'.
IN_SANDBOXES = frozenset({"Role", "RoleBinding"})
NAMED_POLICY_HOME = {"jr2-orchestrator-api": True, "jr2-harness-ingress": False}


def check_placement(objects: list[Doc], home: str, sandboxes: str) -> None:
    assert sorted(d["metadata"]["name"] for d in objects if d["kind"] == "Namespace") == sorted([home, sandboxes])
    for d in objects:
        if d["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in d["metadata"]
            continue
        if d["kind"] == "NetworkPolicy":
            want = home if NAMED_POLICY_HOME[d["metadata"]["name"]] else sandboxes
        else:
            want = sandboxes if d["kind"] in IN_SANDBOXES else home
        assert d["metadata"]["namespace"] == want, (d["kind"], d["metadata"]["name"])
    binding = next(d for d in objects if d["kind"] == "RoleBinding")
    assert binding["subjects"][0]["namespace"] == home
    deployment = next(d for d in objects if d["kind"] == "Deployment")
    assert f"--namespace={sandboxes}" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    harness = next(d for d in objects
                   if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "jr2-harness-ingress")
    assert harness["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"] == \
        {"kubernetes.io/metadata.name": home}


@pytest.mark.kubectl
@needs_kubectl
def test_kustomize_renders_the_base_with_every_object_in_its_namespace() -> None:
    objects = rendered(MANIFESTS)
    assert {d["kind"] for d in objects} >= {"CustomResourceDefinition", "Namespace", "ServiceAccount", "Role",
                                            "RoleBinding", "PersistentVolumeClaim", "Deployment", "Service",
                                            "NetworkPolicy"}
    check_placement(objects, "jr2-system", "jr2")


@pytest.mark.kubectl
@needs_kubectl
def test_kustomize_renders_the_overlay_as_a_second_independent_orchestrator() -> None:
    objects = rendered(OVERLAY)
    assert "CustomResourceDefinition" not in {d["kind"] for d in objects}  # once per cluster, by the base
    check_placement(objects, "jr2-team-b-system", "jr2-team-b")
    api = next(d for d in objects if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "jr2-orchestrator-api")
    assert api["spec"]["ingress"][0]["from"] == [{"namespaceSelector": {"matchLabels": {"jr2.dev/team": "b"}}}]
    deployment = next(d for d in objects if d["kind"] == "Deployment")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["state"]["persistentVolumeClaim"]["claimName"] == "jr2-orchestrator-state"  # its own, there


@pytest.mark.kubectl
@needs_kubectl
@pytest.mark.parametrize("folder", [MANIFESTS, OVERLAY], ids=["base", "overlay"])
def test_a_client_dry_run_accepts_the_rendered_manifests(folder: Path, tmp_path: Path) -> None:
    text = kustomized(folder)
    with kubectl_stub(tmp_path) as (kubeconfig, seen):
        out = kubectl("apply", "--dry-run=client", "-f", "-", stdin=text,
                      env={"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)})
    objects = [d for d in yaml.safe_load_all(text) if d]
    assert out.count("(dry run)") == len(objects), out
    assert not [s for s in seen if not s.startswith("GET ")], "a dry run sent a write"


@pytest.mark.kubectl
@needs_kubectl
def test_the_dry_run_refuses_a_kind_no_server_serves(tmp_path: Path) -> None:
    stale = yaml.safe_dump({"apiVersion": "extensions/v1beta1", "kind": "Deployment", "metadata": {"name": "x"}})
    with kubectl_stub(tmp_path) as (kubeconfig, _):
        # Validation off: what refuses it is discovery, which maps no such kind (a real 1.32 server's answer).
        done = subprocess.run([str(KUBECTL), "apply", "--dry-run=client", "--validate=false", "-f", "-"],
                              input=stale, text=True,
                              capture_output=True, timeout=60, check=False,
                              env={**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)})
    assert done.returncode != 0 and 'no matches for kind "Deployment" in version "extensions/v1beta1"' in done.stderr
