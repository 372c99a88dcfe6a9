"""jr2_actors/fake/rbac.py: a request's verb and resource as kube-apiserver derives them, and a Role's rules
matched as the RBAC authorizer matches them — including hostile Roles and log entries."""

from __future__ import annotations

from typing import Any

import pytest

from jr2_actors.fake.rbac import (
    MAX_RULES,
    Attributes,
    Grant,
    RbacError,
    Request,
    Role,
    Rule,
    attributes,
    audit,
    describe,
    parse_request,
    parse_role,
)
from tests.support.imports import FORBIDDEN, reach
from tests.support.paths import PACKAGE

SBX = "/apis/core.jr2.dev/v1alpha1/namespaces/jr2/sandboxes"
SECRETS = "/api/v1/namespaces/jr2/secrets"


def attrs(method: str, path: str, query: dict[str, str] | None = None, ctype: str = "") -> list[tuple[str, ...]]:
    return [(a.verb, a.api_group, a.resource, a.subresource, a.namespace, a.name)
            for a in attributes(Request(method, path, query or {}, ctype))]


@pytest.mark.parametrize(("method", "path", "query", "ctype", "expected"), [
    ("GET", SBX, {}, "", [("list", "core.jr2.dev", "sandboxes", "", "jr2", "")]),
    ("GET", SBX, {"watch": "true"}, "", [("watch", "core.jr2.dev", "sandboxes", "", "jr2", "")]),
    ("GET", SBX, {"watch": "1"}, "", [("watch", "core.jr2.dev", "sandboxes", "", "jr2", "")]),
    ("GET", SBX, {"watch": "yes"}, "", [("watch", "core.jr2.dev", "sandboxes", "", "jr2", "")]),
    ("GET", SBX, {"watch": "False"}, "", [("list", "core.jr2.dev", "sandboxes", "", "jr2", "")]),
    ("GET", SBX, {"watch": "0"}, "", [("list", "core.jr2.dev", "sandboxes", "", "jr2", "")]),
    ("HEAD", SBX + "/a", {}, "", [("get", "core.jr2.dev", "sandboxes", "", "jr2", "a")]),
    ("GET", SBX + "/a/status", {}, "", [("get", "core.jr2.dev", "sandboxes", "status", "jr2", "a")]),
    ("POST", SBX, {}, "", [("create", "core.jr2.dev", "sandboxes", "", "jr2", "")]),
    ("PUT", SBX + "/a", {}, "", [("update", "core.jr2.dev", "sandboxes", "", "jr2", "a")]),
    ("PATCH", SBX + "/a", {}, "application/merge-patch+json",
     [("patch", "core.jr2.dev", "sandboxes", "", "jr2", "a")]),
    ("PATCH", SBX + "/a", {"fieldManager": "jr2"}, "application/apply-patch+yaml; charset=utf-8",
     [("patch", "core.jr2.dev", "sandboxes", "", "jr2", "a"), ("create", "core.jr2.dev", "sandboxes", "", "jr2", "a")]),
    ("PATCH", SBX + "/a/status", {}, "application/merge-patch+json",
     [("patch", "core.jr2.dev", "sandboxes", "status", "jr2", "a")]),
    ("DELETE", SECRETS + "/t", {}, "", [("delete", "", "secrets", "", "jr2", "t")]),
    ("DELETE", SECRETS, {}, "", [("deletecollection", "", "secrets", "", "jr2", "")]),
    ("GET", "/api/v1/namespaces/jr2", {}, "", [("get", "", "namespaces", "", "jr2", "jr2")]),
    ("PUT", "/api/v1/namespaces/jr2/finalize", {}, "", [("update", "", "namespaces", "finalize", "jr2", "jr2")]),
    ("GET", "/api/v1/namespaces", {}, "", [("list", "", "namespaces", "", "", "")]),
    ("GET", "/api/v1/watch/namespaces/jr2/secrets", {}, "", [("watch", "", "secrets", "", "jr2", "")]),
    ("GET", "/apis/core.jr2.dev/v1alpha1/sandboxes", {}, "", [("list", "core.jr2.dev", "sandboxes", "", "", "")]),
    ("GET", "/api/v1/namespaces/jr2/pods/p/log", {}, "", [("get", "", "pods", "log", "jr2", "p")]),
    ("POST", "/api/v1/namespaces/jr2/pods/p/exec", {}, "", [("create", "", "pods", "exec", "jr2", "p")]),
    ("GET", "/api/v1/namespaces/jr2/secrets/a%2Fb", {}, "", [("get", "", "secrets", "b", "jr2", "a")]),
])
def test_a_request_is_authorized_as_kube_apiserver_derives_it(method: str, path: str, query: dict[str, str],
                                                              ctype: str, expected: list[tuple[str, ...]]) -> None:
    assert attrs(method, path, query, ctype) == expected


@pytest.mark.parametrize("path", ["/healthz", "/version", "/api", "/api/v1", "/apis", "/apis/core.jr2.dev",
                                  "/apis/core.jr2.dev/v1alpha1", "/openapi/v3", "/"])
def test_discovery_and_health_are_not_resource_requests(path: str) -> None:
    (a,) = attributes(Request("GET", path, {}))
    assert not a.resource_request and a.verb == "get"


def test_a_special_verb_without_a_resource_is_named() -> None:
    with pytest.raises(RbacError, match="needs a resource"):
        attributes(Request("GET", "/api/v1/watch", {}))


def role(*rules: Rule, namespace: str = "jr2") -> Role:
    return Role("r", namespace, rules)


def split(text: str) -> frozenset[str]:
    return frozenset(text.split(",")) if text else frozenset()


def rule(groups: str, resources: str, verbs: str, names: str = "") -> Rule:
    return Rule(frozenset(groups.split(",")), split(resources), split(verbs), split(names))


def allowed(r: Role, method: str, path: str, query: dict[str, str] | None = None, ctype: str = "") -> bool:
    return all(r.allows(a) for a in attributes(Request(method, path, query or {}, ctype)))


def test_a_rule_grants_its_verbs_on_its_resources_in_its_namespace_only() -> None:
    r = role(rule("core.jr2.dev", "sandboxes", "get,list"))
    assert allowed(r, "GET", SBX) and allowed(r, "GET", SBX + "/a")
    assert not allowed(r, "GET", SBX, {"watch": "true"})  # watch is its own verb
    assert not allowed(r, "GET", SBX + "/a/status")  # a subresource is its own resource
    assert not allowed(r, "GET", "/apis/core.jr2.dev/v1alpha1/namespaces/other/sandboxes")
    assert not allowed(r, "GET", "/apis/core.jr2.dev/v1alpha1/sandboxes")  # cluster-wide
    assert not allowed(r, "GET", "/apis/other.dev/v1alpha1/namespaces/jr2/sandboxes")
    assert not allowed(r, "GET", "/healthz")  # a Role grants no non-resource URL


def test_an_apply_needs_create_as_well_as_patch() -> None:
    patch_only = role(rule("core.jr2.dev", "sandboxes", "patch"))
    assert allowed(patch_only, "PATCH", SBX + "/a", ctype="application/merge-patch+json")
    assert not allowed(patch_only, "PATCH", SBX + "/a", ctype="application/apply-patch+yaml")
    both = role(rule("core.jr2.dev", "sandboxes", "patch,create"))
    assert allowed(both, "PATCH", SBX + "/a", ctype="application/apply-patch+yaml")


def test_wildcards_subresource_wildcards_and_resource_names() -> None:
    assert allowed(role(rule("*", "*", "*")), "DELETE", SECRETS)
    status = role(rule("core.jr2.dev", "*/status", "patch"))
    assert allowed(status, "PATCH", SBX + "/a/status") and not allowed(status, "PATCH", SBX + "/a")
    named = role(rule("", "secrets", "get", names="t"))
    assert allowed(named, "GET", SECRETS + "/t") and not allowed(named, "GET", SECRETS + "/u")
    assert not allowed(named, "GET", SECRETS)  # a list has no name to match


def test_an_audit_finds_refusals_and_unused_grants_both_ways() -> None:
    r = role(rule("core.jr2.dev", "sandboxes", "list,watch,delete"), rule("", "secrets", "*"))
    log: list[dict[str, Any]] = [
        {"method": "GET", "path": SBX, "query": {"watch": "true"}},
        {"method": "PATCH", "path": SBX + "/a", "query": {}, "contentType": "application/merge-patch+json"},
        {"method": "GET", "path": SECRETS + "/t", "query": {}},
    ]
    result = audit(r, log)
    assert [(a.verb, a.resource) for _, a in result.denied] == [("patch", "sandboxes")]
    assert result.unused == {Grant("core.jr2.dev", "sandboxes", "list"), Grant("core.jr2.dev", "sandboxes", "delete")}
    assert Grant("", "secrets", "*") in result.used  # a wildcard is used by whatever it matched
    assert describe(result.denied) == "PATCH " + SBX + "/a → patch sandboxes.core.jr2.dev a in jr2"


def test_attributes_read_as_words() -> None:
    assert str(Attributes("watch", SBX, True, "core.jr2.dev", "", "sandboxes")) == \
        "watch sandboxes.core.jr2.dev (cluster-wide)"
    assert str(Attributes("get", "/healthz", False)) == "get /healthz (not a resource)"
    assert str(Grant("", "secrets", "get")) == "get secrets"


# -- hostile Roles and log entries ----------------------------------------------------------------------

GOOD_RULE = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}


def role_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                           "metadata": {"name": "r", "namespace": "jr2"}, "rules": [GOOD_RULE]}
    doc.update(changes)
    return doc


@pytest.mark.parametrize(("doc", "where"), [
    (None, "role"),
    ([], "role"),
    (role_doc(kind="ClusterRole"), "role"),
    (role_doc(metadata={"name": "r"}), "role.metadata.namespace"),
    (role_doc(metadata="r"), "role.metadata"),
    (role_doc(metadata={"name": 3, "namespace": "jr2"}), "role.metadata.name"),
    (role_doc(rules={"a": 1}), "role.rules"),
    (role_doc(rules=[GOOD_RULE] * (MAX_RULES + 1)), "role.rules"),
    (role_doc(rules=["get"]), "role.rules[0]"),
    (role_doc(rules=[{**GOOD_RULE, "verbs": "get"}]), "role.rules[0].verbs"),
    (role_doc(rules=[{**GOOD_RULE, "verbs": []}]), "role.rules[0].verbs"),
    (role_doc(rules=[{**GOOD_RULE, "verbs": [None]}]), "role.rules[0].verbs"),
    (role_doc(rules=[{**GOOD_RULE, "verbs": ["get"] * 1000}]), "role.rules[0].verbs"),
    (role_doc(rules=[{**GOOD_RULE, "resources": ["x" * 300]}]), "role.rules[0].resources"),
    (role_doc(rules=[{"resources": ["secrets"], "verbs": ["get"]}]), "role.rules[0].apiGroups"),
    (role_doc(rules=[{**GOOD_RULE, "nonResourceURLs": ["/healthz"]}]), "role.rules[0].nonResourceURLs"),
    (role_doc(rules=[{**GOOD_RULE, "verb": ["get"]}]), "role.rules[0]"),
])
def test_a_role_that_cannot_be_read_is_refused_naming_the_key(doc: object, where: str) -> None:
    with pytest.raises(RbacError) as caught:
        parse_role(doc)
    assert caught.value.where == where


def test_a_good_role_reads_whole() -> None:
    r = parse_role(role_doc(rules=[{**GOOD_RULE, "resourceNames": ["t"]}]))
    assert r == Role("r", "jr2", (Rule(frozenset({""}), frozenset({"secrets"}), frozenset({"get"}),
                                      frozenset({"t"})),))


@pytest.mark.parametrize(("entry", "where"), [
    (None, "request"),
    ({"method": "GET"}, "request.path"),
    ({"method": "G E T", "path": "/"}, "request.method"),
    ({"method": 7, "path": "/"}, "request.method"),
    ({"method": "GET", "path": "api/v1"}, "request.path"),
    ({"method": "GET", "path": "/" + "a" * 9000}, "request.path"),
    ({"method": "GET", "path": "/", "query": {"watch": True}}, "request.query"),
    ({"method": "GET", "path": "/", "query": ["watch"]}, "request.query"),
    ({"method": "GET", "path": "/", "contentType": 3}, "request.contentType"),
])
def test_a_log_entry_that_cannot_be_read_is_refused_naming_the_key(entry: object, where: str) -> None:
    with pytest.raises(RbacError) as caught:
        parse_request(entry)
    assert caught.value.where == where


def test_an_audit_names_the_bad_entry_by_its_index() -> None:
    with pytest.raises(RbacError, match=r"log\[1\]\.path"):
        audit(role(), [{"method": "GET", "path": SBX}, {"method": "GET", "path": 3}])


@pytest.mark.parametrize("module", ["fake/rbac.py", "fake/apiserver/schema.py"])
def test_the_rules_matcher_and_the_schema_validator_are_pure(module: str) -> None:
    reached = reach(PACKAGE / module)
    assert not {name: str(path) for name, path in reached.items() if name in FORBIDDEN}
