"""What must hold after every schedule of the simulation, over what it collected. Pure.

Each check answers the violations it found, each one line naming the run, the Sandbox or the notice:
- every run ends, and as its events dictate: `done` (every workflow routes each fault back into its state,
  so no transient fault may change an outcome), or `cancelled` when the schedule cancelled it while live;
- each memory kill reaches the next Turn admitted into its Workspace (ADR-0062: a burst read from the list at
  once is one notice, so a newer kill's notice covers an older one);
- a Harness restart: a Turn is faulted by one only when a process that ended had accepted its
  admission; no admission waits on a Submission of a container that ended; a notice an admission answered 200
  carried is never told again (CONTRACTS.md §3: it has been read) but after the Harness lost the conversation
  that heard it; no admission that is not `kept` goes to a conversation the Harness holds;
- no Sandbox is left behind by a run that ended `done`, and none that never ran is left by any run
  (ADR-0064); every Sandbox's name is its own run's and Workspace's (no Sandbox of one run is another's);
- no feed id names two lines, and each follower's ids only grow (a resume by Last-Event-ID misses nothing);
- no exception reached a log as a traceback (an actor died, a job raised); no thread or actor is left.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jr2_actors.run.feed.lines import FeedEvent, line_fields
from jr2_actors.sim.schedule import RunPlan
from jr2_actors.values.constants import PREVIOUS_SETTLE_SECONDS
from jr2_actors.watch.identity import sandbox_name

TERMINAL = {"done", "failed", "error", "cancelled", "lost"}
_SUBMISSION = re.compile(r"^s-(\d+)$")
_KILL = re.compile(r"^k-(\d+)$")


@dataclass
class Facts:
    runs: Mapping[str, RunPlan]
    statuses: Mapping[str, str]
    cancelled: set[str]
    admissions: list[dict[str, Any]]
    kills: list[dict[str, Any]]  # the fake Harness's kill log: {sandbox, id, peak, limit}
    sandboxes: list[dict[str, Any]]
    follower_lines: Mapping[str, Mapping[int, str]]
    follower_problems: list[str]
    stored_feeds: Mapping[str, Mapping[int, str]]
    tracebacks: list[str] = field(default_factory=list)
    reads: list[dict[str, Any]] = field(default_factory=list)  # each /memory-kills read: {sandbox, seq}
    stuck: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # a run that never ended: its status
    restart_marks: list[int] = field(default_factory=list)  # how many admissions the Harness had at each restart
    nudge_text: str = ""
    readmit_text: str = ""  # how a re-admission's message starts
    # The fake Harness's processes ({sandbox, bootId, began, ended?}), the Submissions an end took with it,
    # the conversations it lost (fake/harness/core.py), each feed line's time (run → id → wall seconds), and
    # when these facts were taken.
    boots: list[dict[str, Any]] = field(default_factory=list)
    cut: list[dict[str, Any]] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)
    feed_times: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    ended_at: float = 0.0


class FeedRecord:
    """What one follower holds of a run's feed, as an EventSource holds it: each id's line. A second line
    under one id, or an id that does not grow, is a problem."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.lines: dict[int, str] = {}
        self.problems: list[str] = []
        self.last = 0
        self._grown = threading.Condition()

    def wait_for(self, newest: int, seconds: float) -> bool:
        """Whether the follower's own thread has read up to `newest` within `seconds`."""
        with self._grown:
            return self._grown.wait_for(lambda: self.last >= newest, seconds)

    def take(self, event_id: int, text: str) -> None:
        with self._grown:
            self._take(event_id, text)
            self._grown.notify_all()

    def _take(self, event_id: int, text: str) -> None:
        if event_id <= self.last:
            self.problems.append(f"{self.run_id}: feed id {event_id} came after id {self.last}")
        seen = self.lines.get(event_id)
        if seen is not None and seen != text:
            self.problems.append(f"{self.run_id}: feed id {event_id} named two lines: {seen[:200]!r} and "
                                 f"{text[:200]!r}")
        self.lines[event_id] = text
        self.last = max(self.last, event_id)


def fingerprint(event: FeedEvent) -> str:
    """One feed line as text: what a reader holds under its id."""
    return json.dumps({"kind": event.kind, "fields": line_fields(event.line)}, sort_keys=True, default=str)


def check(facts: Facts) -> list[str]:
    return [*outcomes(facts), *notices(facts), *restart_faults(facts), *settle_waits(facts), *heard_once(facts),
            *kept_held(facts), *sandboxes(facts), *feeds(facts),
            *(f"a traceback was logged: {t}" for t in facts.tracebacks)]


def outcomes(facts: Facts) -> list[str]:
    out = []
    for run_id in facts.runs:
        status = facts.statuses.get(run_id, "missing")
        if status not in TERMINAL:
            doc = facts.stuck.get(run_id)
            where = f": {json.dumps(doc, sort_keys=True, default=str)[:600]}" if doc else ""
            out.append(f"{run_id}: never ended (status {status}){where}")
            continue
        allowed = {"done", "cancelled"} if run_id in facts.cancelled else {"done"}
        if status not in allowed:
            out.append(f"{run_id}: ended {status}, where its events dictate {' or '.join(sorted(allowed))}")
    return out


def _number(pattern: re.Pattern[str], text: object) -> int | None:
    match = pattern.match(text) if isinstance(text, str) else None
    return int(match.group(1)) if match else None


def notices(facts: Facts) -> list[str]:
    """ADR-0062's at-least-once over what the Harness was told (at most once is `restarts.heard_once`). An
    admission the Harness accepted started a Submission (its `submissionId`); the fake's ids come from one
    counter, so `s-N` after `k-M` (N > M) is an admission after the kill."""
    out: list[str] = []
    accepted = [a for a in facts.admissions if _number(_SUBMISSION, a.get("submissionId")) is not None]
    told: dict[tuple[str, str], list[int]] = {}
    for a in accepted:
        seq = _number(_SUBMISSION, a.get("submissionId"))
        assert seq is not None
        for n in (a.get("body") or {}).get("notices") or []:
            if isinstance(n, dict) and n.get("kind") == "memory-limit" and n.get("peak"):
                told.setdefault((str(a.get("sandbox")), str(n["peak"])), []).append(seq)
    for kill in facts.kills:
        number = _number(_KILL, kill.get("id"))
        sandbox, peak = str(kill.get("sandbox")), str(kill.get("peak"))
        if number is None:
            continue
        # A kill of a pod that went since is news only to the admissions into that pod: its Sandbox's processes
        # went with it, and a new pod under the name is another Sandbox (ADR-0062: a lost pod takes the file).
        until = kill.get("goneAt") if isinstance(kill.get("goneAt"), int) else None
        # A nudge and a re-admission continue their Turn: ADR-0062 leaves them the kills the Turn's own `bash`
        # did not report, so only a Turn's own first admission must carry the kill.
        # ...and only one whose read of the list came after the kill: a read before it could not see it.
        later_turns = [a for a in accepted if a.get("sandbox") == sandbox
                       and _read_before(a, facts) > number and _first_admission(a, facts)
                       and (until is None or (_number(_SUBMISSION, a.get("submissionId")) or 0) < until)]
        if not later_turns:
            continue
        # ADR-0062: it "goes to the next admission of any Agent in that Workspace that takes it" — the first
        # such Turn admission carries it, unless it was told already (on a stream's nudge, say).
        first = later_turns[0]
        first_seq = _number(_SUBMISSION, first.get("submissionId")) or 0
        if any(s <= first_seq for s in told.get((sandbox, peak), [])):
            continue
        # A list read raises the newest kill's notice only (ADR-0062): a newer kill's notice covers this one.
        carried = {str(n.get("peak")) for n in (first.get("body") or {}).get("notices") or []
                   if isinstance(n, dict) and n.get("kind") == "memory-limit"}
        if any(k.get("sandbox") == sandbox and (_number(_KILL, k.get("id")) or 0) > number
               and str(k.get("peak")) in carried for k in facts.kills):
            continue
        seen = "; ".join(_admission_text(a) for a in later_turns[:4]) + _story(facts, sandbox)
        out.append(f"{sandbox}: the guard kill {kill.get('id')} (peak {peak}, agent {kill.get('agent') or '-'}) did "
                   f"not reach the next Turn admission after it ({len(later_turns)} in all): {seen}")
    return out


def _story(facts: Facts, sandbox: str) -> str:
    """The feed of the run that owns `sandbox`, in a line: what a reader of the violation needs first."""
    for run_id, plan in facts.runs.items():
        if any(sandbox_name(run_id, w) == sandbox for w in plan.document.get("workspaces", {})):
            lines = [json.loads(t) for _, t in sorted(facts.stored_feeds.get(run_id, {}).items())]
            told = [f"{d['kind']}({','.join(f'{k}={v}' for k, v in d['fields'].items() if v not in (None, '', []))})"
                    for d in lines][-40:]
            return f" — the feed of {run_id}: " + " | ".join(told)[:3000]
    return ""


def _read_before(a: Mapping[str, Any], facts: Facts) -> int:
    """The sequence number of the last read of the admission's Harness list before it (0: none recorded)."""
    seq = _number(_SUBMISSION, a.get("submissionId")) or 0
    return max((int(r["seq"]) for r in facts.reads if r.get("sandbox") == a.get("sandbox") and r["seq"] < seq),
               default=0)


def _first_admission(a: Mapping[str, Any], facts: Facts) -> bool:
    message = str((a.get("body") or {}).get("message"))
    return message != facts.nudge_text and not (facts.readmit_text and message.startswith(facts.readmit_text))


def _admission_text(a: Mapping[str, Any]) -> str:
    body = a.get("body") or {}
    kinds = ",".join(f"{n.get('kind')}:{n.get('peak') or n.get('limit') or ''}" for n in body.get("notices") or []
                     if isinstance(n, dict))
    return (f"{a.get('submissionId')} {a.get('agent')} kept={bool(body.get('kept'))} "
            f"message={str(body.get('message'))[:30]!r} notices=[{kinds}]")


# -- a Harness restart (CONTRACTS.md §3, ADR-0062) ------------------------------------------------------------

# A Turn's fault that a Harness restart caused: the Workspace's words for a kernel kill, or for another end.
_RESTART_FAULT = ("memory limit (OOMKilled", "the Harness ended")


def restart_faults(facts: Facts) -> list[str]:
    """A Turn faulted on a Harness restart had an admission accepted by a process that ended before the fault:
    a restart whose ended process never accepted the Turn's admission faults nothing (a Turn admitted to the
    new process after it least of all). The Turn's admissions are those its Harness accepted between the
    Turn's line on the feed and the fault's."""
    out = []
    for run_id, plan in facts.runs.items():
        times = facts.feed_times.get(run_id, {})
        turn: tuple[str, int, float] | None = None
        told: set[tuple[str, int]] = set()
        for event_id, text in sorted(facts.stored_feeds.get(run_id, {}).items()):
            doc = json.loads(text)
            fields = doc.get("fields", doc)  # a fingerprint keeps them apart; the wire's document does not
            at = times.get(event_id)
            if doc.get("kind") == "turn" and at is not None:
                turn = (str(fields.get("agent")), int(fields.get("turn") or 0), at)
                continue
            fault = (doc.get("kind") == "event" and fields.get("event") == "agent.fault") or doc.get(
                "kind") == "turn-fault"
            reason = str(fields.get("reason") or "")
            if not fault or not reason.startswith(_RESTART_FAULT) or turn is None or at is None or turn[:2] in told:
                continue
            agent, number, started = turn
            workspace = ((plan.document.get("agents") or {}).get(agent) or {}).get("workspace")
            if workspace is None:
                continue
            sandbox = sandbox_name(run_id, workspace)
            ended = {b.get("bootId") for b in facts.boots if b.get("sandbox") == sandbox
                     and isinstance(b.get("ended"), int | float) and b["ended"] <= at}
            admitted = [a for a in facts.admissions if a.get("sandbox") == sandbox and a.get("agent") == agent
                        and a.get("status") == 200 and started <= float(a.get("at") or 0) <= at]
            if any(a.get("bootId") in ended for a in admitted):
                continue
            told.add(turn[:2])
            boots = ", ".join(f"{a.get('submissionId')} by {a.get('bootId')}" for a in admitted) or "none"
            out.append(f"{run_id}: Turn {number} of {agent} was faulted on a Harness restart ({reason[:100]}), yet no "
                       f"process that ended had accepted its admission (accepted: {boots})")
    return out


def settle_waits(facts: Facts) -> list[str]:
    """No admission waits on a Submission of a container that ended: a restart settled it (CONTRACTS.md §3).
    The first admission into a conversation whose Submission a restart took comes sooner than half the
    settle bound after the new process answered — or, while its run has not ended, at all by then."""
    bound = PREVIOUS_SETTLE_SECONDS / 2
    out = []
    for c in facts.cut:
        sandbox, agent, conv = c.get("sandbox"), c.get("agent"), c.get("conversationId")
        began = _next_boot(facts, c)
        if began is None:
            continue
        later = [a for a in facts.admissions if (a.get("sandbox"), a.get("agent"), a.get("conversationId"))
                 == (sandbox, agent, conv) and float(a.get("at") or 0) >= float(c.get("at") or 0)]
        what = f"{sandbox}: the first admission into {conv} after the restart that ended {c.get('submissionId')}"
        if later:
            waited = float(later[0].get("at") or 0) - began
            if waited >= bound:
                out.append(f"{what} came {waited:.1f}s after the new process answered: it waited on a Submission "
                           "of the container that ended")
            continue
        run = _run_of(facts, str(sandbox))
        if run is not None and facts.statuses.get(run) not in TERMINAL and facts.ended_at - began >= bound:
            out.append(f"{what} never came in the {facts.ended_at - began:.0f}s after the new process answered, "
                       f"its run {run} still {facts.statuses.get(run)} (a wait on the ended Submission?)")
    return out


def _next_boot(facts: Facts, cut: Mapping[str, Any]) -> float | None:
    """When the process after the one that ran `cut`'s Submission began (None: none began)."""
    after = False
    for boot in facts.boots:
        if boot.get("sandbox") != cut.get("sandbox"):
            continue
        if after and isinstance(boot.get("began"), int | float):
            return float(boot["began"])
        after = after or boot.get("bootId") == cut.get("bootId")
    return None


def _run_of(facts: Facts, sandbox: str) -> str | None:
    for run_id, plan in facts.runs.items():
        if any(sandbox_name(run_id, w) == sandbox for w in plan.document.get("workspaces", {})):
            return run_id
    return None


def heard_once(facts: Facts) -> list[str]:
    """CONTRACTS.md §3: an admission answered 200 has been read, so what it carried is never told again —
    unless the Harness lost the conversation that heard it since (ADR-0062: nothing of it is left, so its
    notices are pending again). A guard kill's notice is known by its peak (unique in a seed) in its
    Workspace; "this conversation is new" by the conversation's incarnation."""
    heard: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    retold: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for a in facts.admissions:
        if a.get("status", 200 if a.get("submissionId") else None) != 200:
            continue
        for n in (a.get("body") or {}).get("notices") or []:
            if not isinstance(n, dict):
                continue
            if n.get("kind") == "memory-limit" and n.get("peak"):
                key: tuple[Any, ...] = ("memory-limit", a.get("sandbox"), str(n["peak"]))
            elif n.get("kind") == "conversation-new":
                key = ("conversation-new", a.get("sandbox"), a.get("agent"), a.get("conversationId"),
                       a.get("conversationSeq"))
            else:
                continue
            first = heard.get(key)
            if first is not None and not _lost_between(facts, first, a):
                retold.setdefault(key, [first]).append(a)
            heard[key] = a
    out = []
    for key, told in retold.items():
        what = f"the memory-limit notice of peak {key[2]}" if key[0] == "memory-limit" else \
            f"the conversation-new notice of {key[3]}"
        restarted = " (an orchestrator restart fell between)" if _restart_between(facts, told[0], told[-1]) else ""
        seen = "; ".join(_admission_text(a) for a in told[:4])
        out.append(f"{key[1]}: {what} was told {len(told)} times though the Harness answered 200 to the first"
                   f"{restarted}: {seen}")
    return out


def _lost_between(facts: Facts, first: Mapping[str, Any], then: Mapping[str, Any]) -> bool:
    """The conversation `first` went to was lost before `then` was admitted: the fake recorded its loss, or a
    later incarnation of it began (both on the counter Submissions are numbered on)."""
    until = _number(_SUBMISSION, then.get("submissionId")) or 0
    same = (first.get("sandbox"), first.get("agent"), first.get("conversationId"))
    seq = first.get("conversationSeq")
    if not isinstance(seq, int):
        return False
    if any((x.get("sandbox"), x.get("agent"), x.get("conversationId")) == same and x.get("conversationSeq") == seq
           and int(x.get("seq") or 0) < until for x in facts.lost):
        return True
    return any((x.get("sandbox"), x.get("agent"), x.get("conversationId")) == same
               and isinstance(x.get("conversationSeq"), int) and seq < x["conversationSeq"] < until
               for x in facts.admissions)


def _restart_between(facts: Facts, first: Mapping[str, Any], then: Mapping[str, Any]) -> bool:
    """An orchestrator restart fell between these two admissions (`restart_marks` count the Harness's records)."""
    index = {id(a): i for i, a in enumerate(facts.admissions)}
    a, b = index.get(id(first), -1), index.get(id(then), -1)
    return any(a < mark <= b for mark in facts.restart_marks)


def kept_held(facts: Facts) -> list[str]:
    """ADR-0062: every admission to a conversation the Harness was taken to keep says `kept: true`; one that
    does not, into a conversation the Harness holds (answered 200 before), loses the refusal `kept` is for."""
    unkept: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for a in facts.admissions:
        if a.get("heldUnkept"):
            unkept.setdefault((a.get("sandbox"), a.get("agent"), a.get("conversationId")), []).append(a)
    return [f"{sandbox}: {len(sent)} admission(s) not kept went to {conv}, a conversation the Harness held "
            f"(answered {', '.join(str(a.get('status')) for a in sent[:6])}): {_admission_text(sent[0])}"
            for (sandbox, _, conv), sent in unkept.items()]


def sandboxes(facts: Facts) -> list[str]:
    out = []
    for sb in facts.sandboxes:
        run_id, workspace, name = sb.get("runId"), sb.get("workspace"), sb.get("name")
        if not isinstance(run_id, str) or not isinstance(workspace, str):
            out.append(f"Sandbox {name}: no run or Workspace annotation")
            continue
        if sandbox_name(run_id, workspace) != name:
            out.append(f"Sandbox {name}: its name is not its run's ({run_id}, {workspace})")
        if run_id not in facts.runs:
            continue
        status = facts.statuses.get(run_id)
        if status == "done":
            out.append(f"Sandbox {name} of {run_id} is left after its run ended done")
        elif not sb.get("podUID"):
            out.append(f"Sandbox {name} of {run_id} never ran and is left (its run ended {status})")
    return out


def feeds(facts: Facts) -> list[str]:
    out = list(facts.follower_problems)
    for run_id, stored in facts.stored_feeds.items():
        held = facts.follower_lines.get(run_id, {})
        if held:
            holes = sorted(i for i in stored if min(held) < i < max(held) and i not in held)
            if holes:
                out.append(f"{run_id}: a follower skipped lines {holes[:10]} that the store keeps")
        for event_id, text in stored.items():
            if event_id in held and held[event_id] != text:
                out.append(f"{run_id}: feed id {event_id} is {held[event_id]!r} to a follower and {text!r} "
                           "in the store")
        if stored and held and max(stored) > max(held):
            out.append(f"{run_id}: a follower missed lines {max(held) + 1}-{max(stored)}")
    return out


def threads_left(before: Iterable[object], left: list[str]) -> list[str]:
    return [f"threads left after the stop: {', '.join(sorted(left))}"] if left else []
