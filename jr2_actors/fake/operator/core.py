"""The fake operator's decisions: pure, over a model of nodes, an optional quota and scripted faults.

Theory of operation: it reconciles Sandboxes as the jr2 operator does (CONTRACTS.md §1). Each Sandbox
reserves its whole `spec.podResources` (requests, else limits). In arrival order:

- a ResourceQuota that cannot take the pod refuses it: `Pending`, `Scheduled=False/QuotaExceeded` with
  the API server's words, and no podUID (the operator keeps retrying);
- otherwise the pod exists; while no node fits it: `Pending`, `Scheduled=False/Unschedulable` with
  the scheduler's message, node by node as kube-scheduler's filters judge it (its first failing filter:
  an untolerated `NoSchedule`/`NoExecute` taint, then the Sandbox's `spec.nodeSelector`, then the free
  cpu and memory), counted and sorted as its FitError is (`0/1000 nodes are available: 1 node(s) had
  untolerated taint {gpu: yes}, 999 Insufficient cpu.`);
- once placed: `Scheduled=True`, `node`, `podUID`; `Ready` after the start time. Placing starts each
  search at the node after the last one placed on (the scheduler's round-robin start), so a thousand
  nodes fill evenly and a placement costs a look at a few nodes, not all;
- scripted faults: a Harness restart (`lastTerminated` OOMKilled/137 or Error/1 with its log lines),
  `CrashLoopBackOff`, eviction or node loss → `Lost` (terminal, capacity freed);
- the idle GC deletes a Sandbox once `max(creation, jr2.dev/keepalive) + spec.idleTimeout` has passed.

The core sees every namespace. The shell feeds it each change as it happens (`observe`) and asks for a
`step(now)`, which looks again only at what changed, what came due (a start time, an idle deadline) and,
when capacity was freed, what still waits for it — so a thousand Sandboxes cost one look each, not a
thousand each. A step returns the statuses that differ from what each Sandbox carries and what to delete;
`reconcile(sandboxes, now)` is the same over a whole given set (how the unit tests drive it).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jr2_actors.fake.messages import NoSuchSandbox
from jr2_actors.values.quantity import QuantityError, cpu_millis, memory_bytes, parse_duration
from jr2_actors.values.timefmt import parse_rfc3339 as _parse_time
from jr2_actors.values.timefmt import rfc3339 as _rfc3339
from jr2_actors.watch.identity import KEEPALIVE_ANNOTATION

DEFAULT_IDLE_TIMEOUT = "30m"


NO_NODES = "no nodes available to schedule pods"  # kube-scheduler's ErrNoNodesAvailable
NODE_MILLICPU, NODE_MEMORY = 4000, 8 * 2**30  # what `FakeCluster(nodes=N)` gives each node
HOSTNAME = "kubernetes.io/hostname"  # every node carries it, as the kubelet sets it


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule and NoExecute keep a pod off; PreferNoSchedule does not


@dataclass(frozen=True)
class Node:
    name: str
    cpu_millis: int
    memory_bytes: int
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True)
class Quota:
    cpu_millis: int | None = None
    memory_bytes: int | None = None
    name: str = "jr2"


@dataclass
class _Record:
    uid: str
    seen: int = 0  # the order the operator first saw it in (ties of creation time keep arrival order)
    cpu: int = 0  # the reservation: spec.podResources requests (else limits)
    memory: int = 0
    pod_uid: str = ""
    node: str = ""
    ready_at: float | None = None
    restart_count: int = 0
    last_terminated: dict[str, Any] | None = None
    waiting: list[dict[str, Any]] = field(default_factory=list)
    crash_looping: bool = False
    lost: tuple[str, str] | None = None
    transitions: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # type → (status, reason, time)
    written: dict[str, Any] | None = None  # the last status decided for it


Key = tuple[str | None, str]  # (namespace, name)


@dataclass(frozen=True)
class Decision:
    statuses: dict[Key, dict[str, Any]]  # the statuses to write (each differs from what the Sandbox carries)
    deletes: tuple[tuple[str | None, str, str], ...]  # (namespace, name, uid) the idle GC reaps
    next_wake: float | None  # the next wall time something changes by itself
    uids: dict[Key, str] = field(default_factory=dict)  # which incarnation each status is for


def default_nodes() -> list[Node]:
    return [Node("fake-node-1", NODE_MILLICPU, NODE_MEMORY), Node("fake-node-2", NODE_MILLICPU, NODE_MEMORY)]


def make_nodes(count: int, *, cpu_millis: int = NODE_MILLICPU, memory_bytes: int = NODE_MEMORY) -> list[Node]:
    """`count` alike nodes, `fake-node-0001`…, as kwok's node template makes them."""
    if count < 0:
        raise ValueError("a node count cannot be negative")
    width = max(4, len(str(count)))
    return [Node(f"fake-node-{i:0{width}d}", cpu_millis, memory_bytes) for i in range(1, count + 1)]


class OperatorCore:
    def __init__(self, *, nodes: Sequence[Node] | None = None, quota: Quota | None = None,
                 start_seconds: float = 0.2, endpoint: str = "", new_uid: Callable[[], str] | None = None) -> None:
        """`new_uid`: each new pod's UID, from the shell (random there); by default a counter's, unique in
        this core only."""
        pods = itertools.count(1)
        self._new_uid = new_uid or (lambda: f"00000000-0000-4000-8000-{next(pods):012x}")
        self.nodes = list(nodes if nodes is not None else default_nodes())
        self.quota = quota
        self.start_seconds = start_seconds
        self.endpoint = endpoint  # the fake Harness's base URL; the Sandbox's name is appended
        self.endpoints: tuple[str, ...] = ()  # when set, each Sandbox's base URL in turn (an address of its own)
        self._records: dict[Key, _Record] = {}
        self._objects: dict[Key, Mapping[str, Any]] = {}  # the last seen state of each Sandbox
        self._dirty: set[Key] = set()
        self._capacity_changed = False
        self._timeline: list[tuple[float, Key]] = []
        self._arrivals = itertools.count()  # start times and idle deadlines, stale ones included
        # What the live reservations hold, kept as they change, so a placement never sums every Sandbox:
        # per node (cpu, memory), and what the quota counts (every live pod).
        self._node_used: dict[str, list[int]] = {}
        self._pods_used = [0, 0]
        self._next_node = 0  # where the next search starts (the scheduler's nextStartNodeIndex)
        self._usage_moves = 0  # moves with every change of what is held: what a cached message is valid for
        self._messages: dict[tuple[object, ...], tuple[int, int, str]] = {}

    # -- scripted faults -----------------------------------------------------------------------------

    def kill_harness(self, name: str, now: float, *, reason: str = "OOMKilled", message: str = "",
                     namespace: str | None = None) -> None:
        rec = self._records[self._key(name, namespace)]
        rec.restart_count += 1
        rec.last_terminated = {"reason": reason, "exitCode": 137 if reason == "OOMKilled" else 1,
                               "message": message, "finishedAt": _rfc3339(now)}

    def crash_loop(self, name: str, now: float, *, message: str, namespace: str | None = None) -> None:
        rec = self._records[self._key(name, namespace)]
        rec.crash_looping = True
        rec.restart_count = max(rec.restart_count, 2)
        rec.last_terminated = {"reason": "Error", "exitCode": 1, "message": message, "finishedAt": _rfc3339(now)}
        rec.waiting = [{"container": "harness", "reason": "CrashLoopBackOff",
                        "message": "back-off 10s restarting failed container=harness"}]

    def evict(self, name: str, *, reason: str = "Evicted", message: str = "The node was low on resource: memory.",
              namespace: str | None = None) -> None:
        rec = self._records[self._key(name, namespace)]
        self._account(rec, -1)
        rec.lost = (reason, message)
        self._capacity_changed = True

    def lose_node(self, node: str) -> None:
        for rec in self._records.values():
            if rec.node == node and rec.lost is None:
                self._account(rec, -1)
                rec.lost = ("NodeLost", f"node {node} is not ready")
        self.nodes = [n for n in self.nodes if n.name != node]
        self._capacity_changed = True

    def add_node(self, node: Node) -> None:
        self.nodes.append(node)
        self._capacity_changed = True

    def set_quota(self, quota: Quota | None) -> None:
        self.quota = quota
        self._capacity_changed = True

    def _key(self, name: str, namespace: str | None) -> Key:
        """A scripted fault names a Sandbox; its namespace is needed only where the name is not unique."""
        if namespace is not None or (None, name) in self._records:
            key = (namespace, name)
            if key not in self._records:
                raise NoSuchSandbox(f"no Sandbox {namespace}/{name}")
            self._dirty.add(key)
            return key
        keys = [k for k in self._records if k[1] == name]
        if len(keys) != 1:
            raise NoSuchSandbox(f"no Sandbox named {name}" if not keys else f"Sandbox {name} is in several namespaces")
        self._dirty.add(keys[0])
        return keys[0]

    # -- the decision --------------------------------------------------------------------------------

    def observe(self, event_type: str, obj: Mapping[str, Any]) -> None:
        """A change the API server told: the Sandbox's new state (or its deletion)."""
        meta = obj["metadata"]
        key: Key = (meta.get("namespace"), meta["name"])
        if event_type == "DELETED":
            self._objects.pop(key, None)
            gone = self._records.pop(key, None)
            if gone is not None:
                self._account(gone, -1)
                self._capacity_changed = True  # its reservation is freed
            self._dirty.discard(key)
            return
        before = self._objects.get(key)
        self._objects[key] = obj
        rec = self._records.get(key)
        if (rec is not None and before is not None and rec.uid == meta["uid"] and obj.get("status") == rec.written
                and _without_status(before) == _without_status(obj)):
            return  # the status this operator wrote coming back: nothing to look at again
        if rec is None or rec.uid != meta["uid"]:
            if rec is not None:
                self._account(rec, -1)
                self._capacity_changed = True
            rec = self._records[key] = _Record(uid=meta["uid"], seen=next(self._arrivals))
        cpu, memory = _requests(obj)
        if (cpu, memory) != (rec.cpu, rec.memory):
            self._account(rec, -1)
            rec.cpu, rec.memory = cpu, memory
            self._account(rec, +1)
            self._capacity_changed = True
        expiry = self._idle_expiry(obj)
        if expiry is not None:
            heapq.heappush(self._timeline, (expiry, key))
        self._dirty.add(key)

    def reconcile(self, sandboxes: Sequence[Mapping[str, Any]], now: float) -> Decision:
        """A step over exactly `sandboxes` (those not among them are gone), looking at every one."""
        given = {(s["metadata"].get("namespace"), s["metadata"]["name"]): s for s in sandboxes}
        for key in [k for k in self._objects if k not in given]:
            self.observe("DELETED", self._objects[key])
        for obj in given.values():
            self.observe("MODIFIED", obj)
        decision = self.step(now)
        statuses = {k: self._status(given[k], self._records[k], now) for k in given
                    if k in self._records and k not in {(ns, n) for ns, n, _ in decision.deletes}}
        return Decision(statuses, decision.deletes, decision.next_wake,
                        {k: self._records[k].uid for k in statuses})

    def step(self, now: float) -> Decision:
        """Look at what changed or came due since the last step; answer what to write and delete."""
        while self._timeline and self._timeline[0][0] <= now:
            _, key = heapq.heappop(self._timeline)
            if key in self._objects:
                self._dirty.add(key)
        if self._capacity_changed:
            self._capacity_changed = False
            self._dirty |= {k for k, r in self._records.items() if r.lost is None and not r.node}
        dirty, self._dirty = self._dirty, set()
        statuses: dict[Key, dict[str, Any]] = {}
        deletes: list[tuple[str | None, str, str]] = []
        for key in sorted((k for k in dirty if k in self._objects), key=self._arrival):
            obj = self._objects[key]
            expiry = self._idle_expiry(obj)
            if expiry is not None and now >= expiry:
                deletes.append((key[0], key[1], obj["metadata"]["uid"]))
                continue
            rec = self._records[key]
            if rec.lost is None and not rec.node:
                self._place(obj, rec, now)
            if rec.ready_at is not None and rec.ready_at > now and rec.lost is None:
                heapq.heappush(self._timeline, (rec.ready_at, key))
            status = self._status(obj, rec, now)
            if obj.get("status") != status:
                statuses[key] = status
                rec.written = status
        return Decision(statuses, tuple(deletes), self._next_wake(), {k: self._records[k].uid for k in statuses})

    def _next_wake(self) -> float | None:
        """The soonest time on the timeline still meant: an idle deadline a renewal moved on, a start of a
        Sandbox gone, are dropped here, so the operator wakes only when something comes due (a Lease
        renewed every 5 min left one stale deadline each, and a wake for each)."""
        timeline = self._timeline
        while timeline:
            at, key = timeline[0]
            obj, rec = self._objects.get(key), self._records.get(key)
            if obj is not None and rec is not None and (at == rec.ready_at or at == self._idle_expiry(obj)):
                return at
            heapq.heappop(timeline)
        return None

    def _arrival(self, key: Key) -> tuple[str, int, int]:
        meta = self._objects[key]["metadata"]
        return meta.get("creationTimestamp", ""), int(meta.get("resourceVersion") or 0), self._records[key].seen

    # -- internals -----------------------------------------------------------------------------------

    def _account(self, rec: _Record, sign: int) -> None:
        """Add (`+1`) or take away (`-1`) what `rec` holds: its node's share and the quota's."""
        if rec.lost is not None:
            return
        self._usage_moves += 1
        if rec.pod_uid:
            self._pods_used[0] += sign * rec.cpu
            self._pods_used[1] += sign * rec.memory
        if rec.node:
            used = self._node_used.setdefault(rec.node, [0, 0])
            used[0] += sign * rec.cpu
            used[1] += sign * rec.memory

    def _place(self, obj: Mapping[str, Any], rec: _Record, now: float) -> None:
        cpu, mem = _requests(obj)
        if self.quota is not None and not rec.pod_uid and self._quota_refusal(cpu, mem):
            rec.waiting = []
            return
        self._account(rec, -1)
        if not rec.pod_uid:
            rec.pod_uid = self._new_uid()
        nodes = self.nodes
        selector, tolerations = _placement(obj)
        start = self._next_node % len(nodes) if nodes else 0
        for i in itertools.chain(range(start, len(nodes)), range(start)):
            if _fails(nodes[i], self._node_used.get(nodes[i].name), cpu, mem, selector, tolerations) is None:
                rec.node = nodes[i].name
                rec.ready_at = now + self.start_seconds
                self._next_node = i + 1
                break
        self._account(rec, +1)

    def _quota_refusal(self, cpu: int, mem: int) -> list[tuple[str, str, str, str]]:
        """Each resource the quota cannot take `cpu`/`mem` more of: (name, requested, used, limited)."""
        assert self.quota is not None
        used_cpu, used_mem = self._pods_used
        refused = []
        if self.quota.cpu_millis is not None and used_cpu + cpu > self.quota.cpu_millis:
            refused.append(("requests.cpu", _cpu(cpu), _cpu(used_cpu), _cpu(self.quota.cpu_millis)))
        if self.quota.memory_bytes is not None and used_mem + mem > self.quota.memory_bytes:
            refused.append(("requests.memory", _mem(mem), _mem(used_mem), _mem(self.quota.memory_bytes)))
        return refused

    def _status(self, obj: Mapping[str, Any], rec: _Record, now: float) -> dict[str, Any]:
        meta = obj["metadata"]
        name, generation = meta["name"], meta.get("generation", 1)
        base = self.endpoints[rec.seen % len(self.endpoints)] if self.endpoints else self.endpoint
        status: dict[str, Any] = {"endpoint": f"{base.rstrip('/')}/{name}" if base else "",
                                  "harness": {"restartCount": rec.restart_count}}
        if rec.last_terminated:
            status["harness"]["lastTerminated"] = dict(rec.last_terminated)
        conditions: list[tuple[str, str, str, str]] = []
        if rec.pod_uid:
            status["podUID"] = rec.pod_uid
        if rec.lost is not None:
            reason, message = rec.lost
            status["phase"] = "Lost"
            if rec.node:
                status["node"] = rec.node
            conditions += [("Scheduled", "True", "Scheduled", ""), ("Ready", "False", reason, message),
                           ("Lost", "True", reason, message)]
        elif not rec.pod_uid and self.quota is not None:
            message = self._quota_message(name, obj)
            status["phase"] = "Pending"
            conditions += [("Scheduled", "False", "QuotaExceeded", message),
                           ("Ready", "False", "QuotaExceeded", message)]
        elif not rec.node:
            message = self._unschedulable_message(obj)
            status["phase"] = "Pending"
            conditions += [("Scheduled", "False", "Unschedulable", message),
                           ("Ready", "False", "Unschedulable", message)]
        else:
            status["node"] = rec.node
            status["podRef"] = {"name": name}
            status["serviceRef"] = {"name": name}
            ready = rec.ready_at is not None and now >= rec.ready_at and not rec.crash_looping
            status["phase"] = "Ready" if ready else "Pending"
            conditions.append(("Scheduled", "True", "Scheduled", ""))
            conditions.append(("Ready", "True", "PodReady", "pod reports Ready and every Repo is present on its node")
                              if ready else ("Ready", "False", "PodNotReady", "pod is not yet Ready"))
            if rec.waiting:
                status["waiting"] = [dict(w) for w in rec.waiting]
        status["conditions"] = [self._condition(rec, t, s, r, m, generation, now) for t, s, r, m in conditions]
        return status

    def _condition(self, rec: _Record, type_: str, status: str, reason: str, message: str, generation: int,
                   now: float) -> dict[str, Any]:
        before = rec.transitions.get(type_)
        if before is None or before[:2] != (status, reason):
            rec.transitions[type_] = (status, reason, _rfc3339(now))
        return {"type": type_, "status": status, "reason": reason, "message": message,
                "observedGeneration": generation, "lastTransitionTime": rec.transitions[type_][2]}

    def _unschedulable_message(self, obj: Mapping[str, Any]) -> str:
        """kube-scheduler's FitError: each node's first failing filter, counted, as `"<n> <reason>"` sorted as
        strings (Go's sort.Strings), after `0/<nodes> nodes are available:`. The same needs meet the same
        answer until what is held or the nodes change, so a thousand waiting alike cost one look."""
        if not self.nodes:
            return NO_NODES
        cpu, mem = _requests(obj)
        selector, tolerations = _placement(obj)
        key = (cpu, mem, selector, tolerations)
        valid = (self._usage_moves, _nodes_key(self.nodes))
        cached = self._messages.get(key)
        if cached is not None and cached[:2] == valid:
            return cached[2]
        reasons: dict[str, int] = {}
        for node in self.nodes:
            for reason in _fails(node, self._node_used.get(node.name), cpu, mem, selector, tolerations) or ():
                reasons[reason] = reasons.get(reason, 0) + 1
        parts = sorted(f"{n} {reason}" for reason, n in reasons.items())
        message = f"0/{len(self.nodes)} nodes are available: {', '.join(parts)}."
        self._messages[key] = (*valid, message)
        return message

    def _quota_message(self, name: str, obj: Mapping[str, Any]) -> str:
        """The ResourceQuota admission's words: every resource it refuses, each list sorted by name and
        joined with commas (its `prettyPrint`)."""
        assert self.quota is not None
        refused = self._quota_refusal(*_requests(obj)) or [("requests.cpu", "0", "0", "0")]

        def listed(i: int) -> str:
            return ",".join(f"{r[0]}={r[i]}" for r in sorted(refused))

        return (f'pods "{name}" is forbidden: exceeded quota: {self.quota.name}, requested: {listed(1)}, '
                f"used: {listed(2)}, limited: {listed(3)}")

    def _idle_expiry(self, obj: Mapping[str, Any]) -> float | None:
        meta = obj["metadata"]
        spec = _dict(obj.get("spec"))
        try:
            idle = parse_duration(spec.get("idleTimeout", DEFAULT_IDLE_TIMEOUT))
        except QuantityError:
            idle = parse_duration(DEFAULT_IDLE_TIMEOUT)
        anchors = [_parse_time(meta.get("creationTimestamp")),
                   _parse_time(_dict(meta.get("annotations")).get(KEEPALIVE_ANNOTATION))]
        known = [a for a in anchors if a is not None]
        return max(known) + idle if known else None


def _requests(obj: Mapping[str, Any]) -> tuple[int, int]:
    pod = _dict(_dict(obj.get("spec")).get("podResources"))
    wanted = _dict(pod.get("requests") or pod.get("limits"))
    try:
        return cpu_millis(wanted.get("cpu", 0)), memory_bytes(wanted.get("memory", 0))
    except (QuantityError, AttributeError):
        return 0, 0


def _nodes_key(nodes: list[Node]) -> int:
    """Changes when the nodes do (added, lost, or the list replaced, as `faults.unschedulable` does)."""
    return hash((id(nodes), len(nodes), nodes[-1].name if nodes else ""))


def _placement(obj: Mapping[str, Any]) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, str, str], ...]]:
    """The pod's `nodeSelector` and `tolerations`, from the Sandbox's spec (what the operator puts on its pod)."""
    spec = _dict(obj.get("spec"))
    selector = tuple(sorted((str(k), str(v)) for k, v in _dict(spec.get("nodeSelector")).items()))
    raw = spec.get("tolerations")
    tolerations = tuple((str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                         str(t.get("effect") or "")) for t in (raw if isinstance(raw, list) else [])
                        if isinstance(t, Mapping))
    return selector, tolerations


def _tolerated(taint: Taint, tolerations: tuple[tuple[str, str, str, str], ...]) -> bool:
    """v1.Toleration.ToleratesTaint: the effect (empty: any), the key (empty with Exists: any), the value
    (with Equal)."""
    for key, operator, value, effect in tolerations:
        if effect and effect != taint.effect:
            continue
        if key and key != taint.key:
            continue
        if operator == "Exists" or (operator == "Equal" and value == taint.value):
            return True
    return False


def _fails(node: Node, used: list[int] | None, cpu: int, mem: int, selector: tuple[tuple[str, str], ...],
           tolerations: tuple[tuple[str, str, str, str], ...]) -> tuple[str, ...] | None:
    """Why the pod cannot go on `node`, as the first filter that refuses it says (None: it fits). The default
    profile's order: TaintToleration, NodeAffinity, then NodeResourcesFit (which names each resource short)."""
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not _tolerated(taint, tolerations):
            return (f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}",)
    for key, value in selector:
        if (node.labels.get(key) if key != HOSTNAME else node.labels.get(key, node.name)) != value:
            return ("node(s) didn't match Pod's node affinity/selector",)
    used_cpu, used_mem = used or (0, 0)
    short = (("Insufficient cpu",) if node.cpu_millis - used_cpu < cpu else ()) + \
            (("Insufficient memory",) if node.memory_bytes - used_mem < mem else ())
    return short or None


def _without_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in _dict(obj.get("metadata")).items() if k not in ("resourceVersion", "managedFields")}
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _cpu(millis: int) -> str:
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def _mem(n: int) -> str:
    return f"{n // 2**30}Gi" if n % 2**30 == 0 else f"{n // 2**20}Mi"


