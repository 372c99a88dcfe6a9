"""Kubernetes RBAC, as the API server decides it: a request → its verb and resource → allowed by a Role?

Theory of operation: `attributes(request)` turns one request as the fake cluster's log records it
(`{method, path, query, contentType}`) into the authorization attributes kube-apiserver derives
(`RequestInfoFactory`: GET on a collection is `list`, or `watch` with `watch=true`; DELETE on a
collection is `deletecollection`; PATCH is `patch`, and a server-side apply may create the object, which
the API server authorizes as `create` too). `Role.allows(attrs)` matches them against a namespaced
Role's rules the way the RBAC authorizer does: groups, resources (`res/sub`, `*`, `*/sub`), verbs and
resource names, only within the Role's namespace. `audit(role, log)` checks a whole request log in both
directions: the requests the Role refuses, and the grants no request used.

Pure: no I/O. The Role and the log are outside data and are parsed strictly: a wrong shape is an
`RbacError` naming the key at fault, never a crash or a silent skip.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from jr2_actors.values.errors import Jr2Error

MAX_RULES = 1_000
MAX_PATH = 8 * 1024
MAX_ITEMS = 256  # entries of one rule's list
APPLY_PATCH = "application/apply-patch+yaml"
_API_PREFIXES = ("api", "apis")
_SPECIAL_VERBS = ("proxy", "watch")
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


class RbacError(Jr2Error):
    """A Role or a request log entry that cannot be read: names the key at fault."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class Rule:
    """One PolicyRule of a Role."""

    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str] = frozenset()

    def matches(self, attrs: Attributes) -> bool:
        if not attrs.resource_request:
            return False  # a Role cannot grant a non-resource URL
        if "*" not in self.verbs and attrs.verb not in self.verbs:
            return False
        if "*" not in self.api_groups and attrs.api_group not in self.api_groups:
            return False
        combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        if not ("*" in self.resources or combined in self.resources
                or (attrs.subresource and f"*/{attrs.subresource}" in self.resources)):
            return False
        return not self.resource_names or attrs.name in self.resource_names


@dataclass(frozen=True)
class Grant:
    """One permission a Role gives: a verb on a group's resource (`res` or `res/sub`)."""

    api_group: str
    resource: str
    verb: str

    def rule(self) -> Rule:
        return Rule(frozenset({self.api_group}), frozenset({self.resource}), frozenset({self.verb}))

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}{'.' + self.api_group if self.api_group else ''}"


@dataclass(frozen=True)
class Role:
    name: str
    namespace: str
    rules: tuple[Rule, ...]

    def allows(self, attrs: Attributes) -> bool:
        """Whether a RoleBinding to this Role lets a subject make the request (RBAC only adds)."""
        if attrs.resource_request and attrs.namespace != self.namespace:
            return False  # a Role grants inside its namespace only: nothing cluster-wide, nothing elsewhere
        return any(rule.matches(attrs) for rule in self.rules)

    def grants(self) -> frozenset[Grant]:
        """Every (group, resource, verb) the rules name — wildcards kept as `*`."""
        return frozenset(Grant(g, r, v) for rule in self.rules
                         for g in rule.api_groups for r in rule.resources for v in rule.verbs)


@dataclass(frozen=True)
class Attributes:
    """What the API server authorizes a request as (its `RequestInfo`)."""

    verb: str
    path: str
    resource_request: bool
    api_group: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    def __str__(self) -> str:
        if not self.resource_request:
            return f"{self.verb} {self.path} (not a resource)"
        target = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        group = f".{self.api_group}" if self.api_group else ""
        where = f" in {self.namespace}" if self.namespace else " (cluster-wide)"
        return f"{self.verb} {target}{group}{' ' + self.name if self.name else ''}{where}"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str]
    content_type: str = ""


@dataclass(frozen=True)
class Audit:
    """A log checked against a Role: what it refused, and what it granted that nothing used."""

    denied: tuple[tuple[Request, Attributes], ...]
    unused: frozenset[Grant]
    used: frozenset[Grant]


# -- parsing ------------------------------------------------------------------------------------------

def parse_role(doc: object) -> Role:
    """A `rbac.authorization.k8s.io/v1` Role, read strictly."""
    if not isinstance(doc, Mapping):
        raise RbacError("role", "must be a mapping")
    if doc.get("apiVersion") != "rbac.authorization.k8s.io/v1" or doc.get("kind") != "Role":
        raise RbacError("role", f"must be an rbac.authorization.k8s.io/v1 Role, not "
                                f"{doc.get('apiVersion')!r} {doc.get('kind')!r}")
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        raise RbacError("role.metadata", "must be a mapping")
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        raise RbacError("role.metadata.name", "must be a non-empty string")
    if not isinstance(namespace, str) or not namespace:
        raise RbacError("role.metadata.namespace", "must be a non-empty string (a Role lives in a namespace)")
    rules = doc.get("rules", [])
    if not isinstance(rules, list):
        raise RbacError("role.rules", "must be a list")
    if len(rules) > MAX_RULES:
        raise RbacError("role.rules", f"{len(rules)} rules: more than {MAX_RULES}")
    return Role(name, namespace, tuple(_rule(r, f"role.rules[{i}]") for i, r in enumerate(rules)))


def _rule(doc: object, where: str) -> Rule:
    if not isinstance(doc, Mapping):
        raise RbacError(where, "must be a mapping")
    unknown = set(doc) - {"apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"}
    if unknown:
        raise RbacError(where, f"unknown keys {sorted(unknown)}")
    if doc.get("nonResourceURLs"):
        raise RbacError(f"{where}.nonResourceURLs", "a Role cannot grant non-resource URLs (a ClusterRole can)")
    verbs = _strings(doc.get("verbs"), f"{where}.verbs", required=True)
    groups = _strings(doc.get("apiGroups"), f"{where}.apiGroups", required=True, empty_ok=True)
    resources = _strings(doc.get("resources"), f"{where}.resources", required=True)
    names = _strings(doc.get("resourceNames", []), f"{where}.resourceNames")
    return Rule(groups, resources, verbs, names)


def _strings(value: object, where: str, *, required: bool = False, empty_ok: bool = False) -> frozenset[str]:
    if not isinstance(value, list):
        raise RbacError(where, "must be a list of strings")
    if required and not value:
        raise RbacError(where, "must not be empty")
    if len(value) > MAX_ITEMS:
        raise RbacError(where, f"{len(value)} entries: more than {MAX_ITEMS}")
    for item in value:
        if not isinstance(item, str) or (not item and not empty_ok) or len(item) > 253:
            raise RbacError(where, f"{str(item)[:40]!r} is not a name")
    return frozenset(value)


def parse_request(entry: object, where: str = "request") -> Request:
    """One entry of `FakeCluster.requests()`: `{method, path, query, contentType?}`."""
    if not isinstance(entry, Mapping):
        raise RbacError(where, "must be a mapping")
    method, path, query = entry.get("method"), entry.get("path"), entry.get("query", {})
    content_type = entry.get("contentType", "")
    if not isinstance(method, str) or not method.isalpha() or len(method) > 16:
        raise RbacError(f"{where}.method", f"{str(method)[:20]!r} is not an HTTP method")
    if not isinstance(path, str) or not path.startswith("/") or len(path) > MAX_PATH:
        raise RbacError(f"{where}.path", "must be an absolute path of at most 8 KiB")
    if not isinstance(query, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in query.items()):
        raise RbacError(f"{where}.query", "must map strings to strings")
    if not isinstance(content_type, str):
        raise RbacError(f"{where}.contentType", "must be a string")
    return Request(method.upper(), path, dict(query), content_type)


# -- a request's attributes ---------------------------------------------------------------------------

def attributes(request: Request) -> tuple[Attributes, ...]:
    """What the API server authorizes `request` as: one set of attributes, or two for a server-side apply
    (it is a `patch`, and the API server authorizes `create` as well when the apply creates the object)."""
    info = _request_info(request)
    if info.verb == "patch" and info.name and request.content_type.split(";")[0].strip() == APPLY_PATCH:
        return info, _replace_verb(info, "create")
    return (info,)


def _replace_verb(a: Attributes, verb: str) -> Attributes:
    return Attributes(verb, a.path, a.resource_request, a.api_group, a.namespace, a.resource, a.subresource, a.name)


def _request_info(request: Request) -> Attributes:
    """kube-apiserver's RequestInfoFactory.NewRequestInfo, for the paths a client can send."""
    path = unquote(request.path)
    parts = path.strip("/").split("/") if path.strip("/") else []
    plain = Attributes(request.method.lower(), path, False)
    if len(parts) < 3 or parts[0] not in _API_PREFIXES:
        return plain
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(parts) < 3:
            return plain
        group, parts = parts[0], parts[1:]
    parts = parts[1:]  # the version
    if parts[0] in _SPECIAL_VERBS:
        if len(parts) < 2:
            raise RbacError("request.path", f"{request.path[:80]!r}: a {parts[0]} needs a resource")
        verb, parts = parts[0], parts[1:]
    else:
        verb = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}.get(request.method, "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        watch = request.query.get("watch")
        verb = "list" if watch is None or watch.lower() in ("false", "0") else "watch"
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(verb, path, True, group, namespace, resource, subresource, name)


# -- a whole log ----------------------------------------------------------------------------------------

def audit(role: Role, log: Iterable[object]) -> Audit:
    """Every request of `log` the Role refuses, and every grant of the Role no request used."""
    denied: list[tuple[Request, Attributes]] = []
    used: set[Grant] = set()
    grants = role.grants()
    for i, entry in enumerate(log):
        request = parse_request(entry, f"log[{i}]")
        for attrs in attributes(request):
            if not role.allows(attrs):
                denied.append((request, attrs))
                continue
            used.update(g for g in grants if role.namespace == attrs.namespace and g.rule().matches(attrs))
    return Audit(tuple(denied), grants - used, frozenset(used))


def describe(denied: Sequence[tuple[Request, Attributes]]) -> str:
    """The refused requests, one line each, for an assertion message."""
    return "\n".join(f"{r.method} {r.path} → {a}" for r, a in denied)
