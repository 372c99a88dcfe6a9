"""No input from a Harness or its kill list can raise inside a core (issue 16 item 3).

The Agent's uid can write the kill list and its Harness writes every stream event, so ids, times and sizes
arrive as anything at all. Hypothesis feeds hostile ones to each place they enter: `parse_memory_kills`
(bytes and JSON); the `Ledger`, `mark_of`/`nudge_eligible` and RunCore through the seat's `KillsRead` (each with the
kills the parser kept), `GuardKill`, `Picked` (and a blob round trip between steps, as a revival reads it); and
TurnCore through `Events`.
A core may refuse or drop such input; it may not raise.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jr2_actors.agent import core as turn
from jr2_actors.agent import messages as seat
from jr2_actors.harness.memory_kills import MemoryKill, MemoryKillListError, parse_memory_kills
from jr2_actors.run import messages as run
from jr2_actors.run.core import RunCore
from jr2_actors.run.notices import Ledger, Mark, conversation_new, mark_from, mark_of, nudge_eligible
from jr2_actors.values.workflow import load_workflow, read_document
from jr2_actors.workspace import messages as ws
from tests.support.seat_reports import accepted, answer_failed, guard_kill, kills_read, not_kept, picked, said, settled
from tests.support.workflows import FIX_OR_RETRY

WALL0 = 1_790_000_000.0
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text that has read as something else before: marks, sources, scopes, times, sizes.
TRICKY = ["at:x", "at:", "at:nan", "at:1e400", "at:-1", "at:1795946399.000", "none", "kernel", "|", "F-1|kernel|t",
          "F-1|k-1", "workspace:F-1", "conversation:run-h-coder", "", " ", "\x00", "é" * 65, "9" * 400,
          "2026-11-29T10:00:00Z", "9999-12-31T23:59:59.999999-23:59", "0001-01-01T00:00:00+23:59",
          "2026-13-45T99:99:99Z", "T", "1.9Gi", "0Mi", "1024Mi", "999999.9Gi", "-1Gi", "1e3", "2Gi; rm -rf /"]
text = st.one_of(st.sampled_from(TRICKY), st.text(max_size=80))
scalar = st.one_of(text, st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True))
anything = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(text, inner, max_size=3)), max_leaves=8)
# Ids the ledger and the mark compare: weighted, so two reads in a row often share or mimic one.
kill_id = st.one_of(st.sampled_from(["at:x", "at:", "at:nan", "at:1e400", "none", "k-1", "k-2", "F-1|kernel|t", "|"]),
                    text, scalar)
kill_doc = st.fixed_dictionaries({"id": kill_id, "at": st.one_of(text, scalar),
                                  "peak": st.one_of(text, scalar), "limit": st.one_of(text, scalar),
                                  "agent": st.one_of(text, scalar),
                                  "told": st.one_of(st.lists(st.one_of(text, scalar), max_size=4), anything)},
                                 optional={"instanceId": anything})


def _listed(docs: list[dict[str, Any]]) -> tuple[MemoryKill, ...]:
    """The kills a Harness listing `docs` gives the run: what the parser keeps (the ledger takes its kills)."""
    return parse_memory_kills(json.dumps({"kills": docs}).encode()).kills


kill_list = st.one_of(st.none(), st.lists(kill_doc, max_size=6).map(_listed))


def test_hostile_strategies_reach_the_old_crash() -> None:
    """The strategies hold the input that crashed the run before: a kill id `at:x` as the Turn's mark."""
    assert nudge_eligible(_listed([{"id": "k", "at": "2026-11-29T10:00:00Z"}]),
                          mark_of(_listed([{"id": "at:x", "at": "2026-11-29T09:00:00Z"}]), WALL0), "c") == {"k"}


@SETTINGS
@given(raw=st.one_of(st.binary(max_size=300), st.builds(lambda kills: json.dumps({"kills": kills}).encode(),
                                                        st.lists(st.one_of(kill_doc, anything), max_size=20))))
def test_the_kill_list_parser_answers_or_refuses_by_name(raw: bytes) -> None:
    try:
        read = parse_memory_kills(raw)
    except MemoryKillListError:
        return
    for kill in read.kills:  # what it keeps is within the bounds both sides hold
        assert isinstance(kill.id, str) and 0 < len(kill.id) <= 64 and all(isinstance(t, str) for t in kill.told)


@SETTINGS
@given(kills=kill_list, marks=st.lists(st.one_of(anything, st.builds(lambda k: {"kind": "kill", "id": k}, anything),
                                                 st.builds(lambda w: {"kind": "at", "wall": w}, anything)),
                                       max_size=3),
       wall=st.floats(allow_nan=True, allow_infinity=True), conversation=text)
def test_a_mark_of_any_read_or_blob_never_raises(kills: Any, marks: list[Any], wall: float, conversation: str) -> None:
    for mark in [mark_of(kills, wall), *(mark_from(m) for m in marks)]:
        assert isinstance(mark, Mark)
        assert mark_from(json.loads(json.dumps(mark.json()))).kind == mark.kind or mark.kind == "at"
        assert isinstance(nudge_eligible(kills, mark, conversation), set)


ledger_op = st.one_of(
    st.tuples(st.just("stream"), text, text, text, st.one_of(text, st.none()), st.one_of(text, st.none())),
    st.tuples(st.just("list"), text, kill_list),
    st.tuples(st.just("kernel"), text, text, st.sampled_from(["OOMKilled", "Error"]), text),
    st.tuples(st.just("conversation"), text, text),
    st.tuples(st.just("take"), st.one_of(text, st.none()), text),
    st.tuples(st.just("take-guard"), st.one_of(text, st.none()), st.sets(text, max_size=3)),
    st.tuples(st.just("again")),
    st.tuples(st.just("blob")),
)


@SETTINGS
@given(ops=st.lists(ledger_op, max_size=25))
def test_the_ledger_takes_any_ids_times_and_sizes(ops: list[tuple[Any, ...]]) -> None:
    ledger = Ledger()
    taken: list[Any] = []
    for op in ops:
        name, args = op[0], op[1:]
        if name == "stream":
            ledger.stream_kill(*args)
        elif name == "list":
            ledger.list_read(*args)
        elif name == "kernel":
            ledger.kernel_kill(*args)
        elif name == "conversation":
            ledger.conversation(args[0], conversation_new(args[1]))
        elif name == "take":
            taken = ledger.take(*args)
        elif name == "take-guard":
            taken = ledger.take_guard_kills(*args)
        elif name == "again":
            ledger.raise_again(taken)
        else:
            ledger = Ledger.restore(json.loads(json.dumps(ledger.snapshot())))


run_op = st.one_of(
    st.tuples(st.just("read"), kill_list),
    st.tuples(st.just("guard"), st.one_of(kill_id, st.none()), st.one_of(text, st.none()), st.one_of(text, st.none()),
              text),
    st.tuples(st.just("pick"), text, st.one_of(text, st.sampled_from(["finish", "retry", "workspace.lost"])),
              st.dictionaries(text, anything, max_size=2)),
    st.tuples(st.just("said"), text),
    st.tuples(st.just("admitted")),
    st.tuples(st.just("not-kept")),
    st.tuples(st.just("ended"), st.booleans()),
    st.tuples(st.just("lost-answer"), text),
    st.tuples(st.just("last-end"), text, st.sampled_from(["OOMKilled", "Error", ""]), st.integers(0, 2**31)),
    st.tuples(st.just("revive")),
)


def _engine() -> RunCore:
    doc = read_document(FIX_OR_RETRY)
    assert isinstance(doc, dict)
    core = RunCore("run-h", load_workflow(FIX_OR_RETRY), doc)
    core.step(run.Start(), 0.0, WALL0)
    core.step(run.FromWorkspace(ws.Running("F-1", {}, "http://h")), 0.0, WALL0)
    return core


@SETTINGS
@given(ops=st.lists(run_op, max_size=20), other_turn=st.booleans())
def test_the_run_core_takes_any_kill_list_stream_kill_and_pick(ops: list[tuple[Any, ...]], other_turn: bool) -> None:
    core = _engine()
    for i, op in enumerate(ops):
        name, args = op[0], op[1:]
        now = float(i)
        if name == "revive":  # as a revival reads the row: the blob as JSON, then the watch says it runs
            core, _ = RunCore.restore(json.loads(json.dumps(core.snapshot())), now, WALL0 + now)
            core.step(run.FromWorkspace(ws.Running("F-1", {}, "http://h")), now, WALL0 + now)
            continue
        tid = (core.turn.id if core.turn is not None else 1) + (1 if other_turn and i % 3 == 0 else 0)
        event: run.Input
        if name == "read":
            event = kills_read(tid, args[0])
        elif name == "guard":
            event = guard_kill(tid, args[0], args[1], args[2], args[3])
        elif name == "pick":
            event = picked(tid, args[0], args[1], args[2])
        elif name == "said":
            event = said(tid, args[0])
        elif name == "admitted":
            event = accepted(tid)
        elif name == "not-kept":
            event = not_kept(tid)
        elif name == "ended":
            event = settled(tid, args[0])
        elif name == "lost-answer":
            event = answer_failed(tid, args[0], "reset")
        else:
            event = run.FromWorkspace(ws.LastEndSeen("F-1", args[1], 137, args[0], args[2], None))
        core.step(event, now, WALL0 + now)
    json.dumps(core.snapshot())  # whatever came, the blob is still JSON


stream_event = st.one_of(
    st.fixed_dictionaries({"type": st.just("memory-limit")},
                          optional={"id": anything, "peak": anything, "limit": anything, "position": anything}),
    st.fixed_dictionaries({"type": st.just("pick")}, optional={"callId": anything, "pick": anything, "args": anything}),
    st.fixed_dictionaries({"type": st.just("message-appended")}, optional={"message": anything}),
    st.fixed_dictionaries({"type": st.just("submission-settled")},
                          optional={"submissionId": st.one_of(st.just("s-1"), anything), "outcome": anything,
                                    "error": anything}),
    st.dictionaries(text, anything, max_size=4).map(lambda d: {"type": "x", **d}),
)


@SETTINGS
@given(batches=st.lists(st.tuples(st.lists(stream_event, max_size=6), text), max_size=5))
def test_the_turn_core_takes_any_stream_event(batches: list[tuple[list[dict[str, Any]], str]]) -> None:
    core = turn.TurnCore("coder", 1, "run-h-coder")
    core.step(seat.Admitting(("finish",)))
    core.step(seat.Admitted("s-1", "0"))
    for events, offset in batches:
        step = core.step(seat.Events(events, offset))
        for report in step.reports:
            if isinstance(report, seat.Picked):
                core.step(seat.Answering(report.call_id, True, {"reply": "moved"}))
