"""The fidelity measure: the corpus (corpus.py) replayed on the fake and on the real server, each answer pair
compared after normalising what must differ, and the score — answers that match / answers compared.

What is normalised, and only that: uids (and any UUID inside a message), resourceVersion values and the
`continue` token, timestamps (creation, deletion, managedFields' `time`, conditions', events'), the five random
characters of a `generateName`, the version numbers inside a 410's message, and the order of `managedFields`
entries (a set keyed by manager, operation and subresource). Everything else — the status
code, every field of the object, every word of a Status message, the causes of a 422 — must be equal. Lists are
compared with their items in name order.

`KNOWN` names each difference the fake still has and why; tests/real/test_fidelity.py fails when the set of
differences is not exactly it (a new one, or one fixed and still listed), and docs/fake-cluster.md lists them.

    python -m realcluster fidelity [--verbose]     # starts both servers, prints each step and the score
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any

import requests
import yaml

from realcluster.corpus import COMPACT_BEFORE, CORPUS, Step

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
GENERATED = re.compile(r"\bgen-[a-z0-9]{5}\b")
TIME_KEYS = {"creationTimestamp", "deletionTimestamp", "time", "lastTransitionTime", "firstTimestamp",
             "lastTimestamp", "eventTime"}

# Each difference the fake still has, by step, and why (docs/fake-cluster.md "What the fake does not do").
_TWICE = ("the real server validates a custom resource's metadata twice on an update and lists each cause twice "
          "in details.causes; the fake lists it once (the message is the same)")
_SET_LIST = ("the real server records finalizers as a set ('.' and one 'v:' entry each) in managedFields; the fake "
             "treats every list as atomic")
_EVENT_FIELDS = ("an Event's managedFields: the real server records involvedObject as atomic and not the fields it "
                 "defaults itself (source, reportingComponent, reportingInstance); the fake records both")
KNOWN: dict[str, str] = {
    "patch, another uid: 422": _TWICE,
    "add a finalizer while terminating: 422": _TWICE,
    "add a finalizer": _SET_LIST,
    "delete, held by a finalizer": _SET_LIST,
    "get, terminating": _SET_LIST,
    "secret type is immutable: 422": "the real server also validates the data the new type requires "
                                     "(tls.crt, tls.key); the fake stops at the immutable type",
    "event create": _EVENT_FIELDS,
    "event list by field": _EVENT_FIELDS,
    "unknown kind: 404": "the real server answers an unknown resource of a served group version with a plain-text "
                         "'404 page not found'; the fake with a NotFound Status (every client reads both as 404)",
    "body not JSON: 400": "the real message carries the JSON decoder's own words; the fake's names the fault only",
    "POST to a name: 405": "the real CRD handler takes a POST to an item path as a create of the body (201); the "
                           "fake answers 405 MethodNotAllowed, as for any other method it does not serve there",
}


@dataclass
class Answer:
    status: int
    body: Any


@dataclass
class Target:
    """One server as the corpus reaches it: as an admin (the fake has one token), with a kubeconfig."""

    name: str
    url: str
    token: str
    ca_file: str
    kubeconfig: str
    compact: Any  # () -> None: forget the history, so a watch from an old version is a 410


@dataclass
class Result:
    step: Step
    fake: Answer
    real: Answer

    @property
    def match(self) -> bool:
        return (self.fake.status, normalise(self.fake.body)) == (self.real.status, normalise(self.real.body))


def normalise(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "selfLink":
                continue
            if k == "uid" and v:
                out[k] = "<uid>"
            elif k == "resourceVersion" and v:
                out[k] = "<rv>"
            elif k == "continue" and v:
                out[k] = "<continue>"
            elif k in TIME_KEYS and v:
                out[k] = "<time>"
            else:
                out[k] = normalise(v, k)
        return out
    if isinstance(value, list):
        items = [normalise(v) for v in value]
        if key == "managedFields":  # a set keyed by manager, operation and subresource: its order means nothing
            items.sort(key=lambda e: json.dumps([e.get(k) for k in ("manager", "operation", "subresource")]))
        if key == "items":
            items.sort(key=lambda i: json.dumps(i.get("metadata", {}).get("name") if isinstance(i, dict) else i))
        return items
    if isinstance(value, str):
        text = GENERATED.sub("gen-<5>", UUID.sub("<uid>", value))
        if "resource version" in text:  # a 410's "too old resource version: 12 (345)"
            text = re.sub(r"\d+", "N", text)
        return text
    return value


def _fill(value: Any, ns: str) -> Any:
    return json.loads(json.dumps(value).replace("{ns}", ns))


def send(target: Target, step: Step, ns: str, answers: dict[str, Answer]) -> Answer:
    if step.via == "kubectl":
        return _kubectl(target, step, ns)
    if step.via == "client":
        return _official(target, ns)
    s = requests.Session()
    s.trust_env = False
    s.verify = target.ca_file
    headers = {"Authorization": f"Bearer {target.token}", "Accept": step.accept}
    params = dict(step.params)
    if step.rv_from:
        params["resourceVersion"] = answers[step.rv_from].body["metadata"]["resourceVersion"]
    data = None
    if step.body is not None:
        data = step.body if isinstance(step.body, str) else json.dumps(_fill(step.body, ns))
        headers["Content-Type"] = step.content_type
    url = target.url + step.path.replace("{ns}", ns)
    if params.get("watch") == "true":
        with s.get(url, params=params, headers=headers, stream=True, timeout=30) as r:
            if r.status_code != 200:
                return Answer(r.status_code, r.json())
            # The server ends the stream at its timeoutSeconds: the bound on this read.
            return Answer(200, [json.loads(line) for line in r.iter_lines() if line])
    r = s.request(step.method, url, params=params, data=data, headers=headers, timeout=30)
    try:
        body = r.json()
    except ValueError:
        body = r.text
    return Answer(r.status_code, body)


def _official(target: Target, ns: str) -> Answer:
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    api = client.CustomObjectsApi(config.new_client_from_config(target.kubeconfig))
    try:
        return Answer(200, api.list_namespaced_custom_object("core.jr2.dev", "v1alpha1", ns, "sandboxes"))
    except ApiException as e:
        return Answer(int(e.status), json.loads(e.body))
    finally:
        api.api_client.close()


def _kubectl(target: Target, step: Step, ns: str) -> Answer:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return Answer(0, "kubectl is not on PATH")
    stdin = None
    if step.argv[0] == "apply":
        stdin = yaml.safe_dump({"apiVersion": "core.jr2.dev/v1alpha1", "kind": "Sandbox",
                                "metadata": {"name": "by-kubectl", "labels": {"via": "kubectl"}},
                                "spec": {"port": 7070}})
    done = subprocess.run([kubectl, "--kubeconfig", target.kubeconfig, "-n", ns, *step.argv], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        return Answer(done.returncode, done.stderr.strip())
    return Answer(200, json.loads(done.stdout))


def replay(fake: Target, real: Target, ns: str | None = None) -> list[Result]:
    """The corpus on both servers, step by step (each sees the same requests in the same order)."""
    ns = ns or f"fidelity-{uuid.uuid4().hex[:6]}"
    seen: dict[str, dict[str, Answer]] = {fake.name: {}, real.name: {}}
    results = []
    for step in CORPUS:
        got = []
        for target in (fake, real):
            if step.name == COMPACT_BEFORE:
                target.compact()
            answer = send(target, step, ns, seen[target.name])
            if step.project is not None and answer.status == 200:
                try:
                    answer = Answer(answer.status, step.project(answer.body))
                except (KeyError, TypeError, ValueError, IndexError) as e:  # an answer not of the shape expected
                    answer = Answer(answer.status, {"not as expected": repr(e), "answer": answer.body})
            seen[target.name][step.name] = answer
            got.append(answer)
        results.append(Result(step, got[0], got[1]))
    return results


def first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: fake {'absent' if k not in a else repr(a[k])[:120]}, " \
                       f"real {'absent' if k not in b else repr(b[k])[:120]}"
            if a[k] != b[k]:
                return first_difference(a[k], b[k], f"{path}.{k}")
        return ""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
        return ""
    return f"{path or '.'}: fake {json.dumps(a)[:300]} / real {json.dumps(b)[:300]}"


def report(results: list[Result], *, verbose: bool = False) -> str:
    lines = []
    for r in results:
        mark = "match" if r.match else ("known" if r.step.name in KNOWN else "DIFF ")
        lines.append(f"{mark}  {r.step.via:7} {r.step.name}")
        if not r.match and (verbose or r.step.name not in KNOWN):
            if r.fake.status != r.real.status:
                lines.append(f"         status: fake {r.fake.status}, real {r.real.status}")
            lines.append("         " + first_difference(normalise(r.fake.body), normalise(r.real.body)))
    matched = sum(r.match for r in results)
    lines.append(f"fidelity: {matched}/{len(results)} answers match")
    return "\n".join(lines)


def main(*, verbose: bool = False) -> int:
    from jr2_actors.fake.cluster import FakeCluster
    from realcluster.cluster import RealCluster

    work = tempfile.mkdtemp(prefix="jr2-fidelity-")
    try:
        with FakeCluster(namespace="jr2", operator=False, harness=False) as fake_cluster, RealCluster() as real_cluster:
            results = replay(*targets(fake_cluster, real_cluster, work))
        print(report(results, verbose=verbose))
        unknown = {r.step.name for r in results if not r.match} - set(KNOWN)
        return 1 if unknown else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def targets(fake_cluster: Any, real_cluster: Any, work: str) -> tuple[Target, Target]:
    """Both servers as the corpus reaches them; their kubeconfigs written under `work`."""
    assert fake_cluster.tls is not None and real_cluster.admin is not None
    fake_kc = fake_cluster.write_kubeconfig(os.path.join(work, "fake.kubeconfig"))
    real_kc = real_cluster.write_kubeconfig(os.path.join(work, "real.kubeconfig"), real_cluster.admin)

    def compact_real() -> None:
        real_cluster.compact()
        real_cluster.restart()  # the watch cache too: it serves recent history etcd has compacted away

    with open(real_cluster.admin.token_file) as f:
        real_token = f.read().strip()
    return (Target("fake", fake_cluster.url, fake_cluster.token, fake_cluster.tls.ca_file, fake_kc,
                   fake_cluster.compact),
            Target("real", real_cluster.url, real_token, real_cluster.ca_file, real_kc, compact_real))
