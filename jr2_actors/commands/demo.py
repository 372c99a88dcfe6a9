"""`jr2-actors demo`: the embedded default — the fake cluster and the orchestrator in one process.

It runs the bundled example (CONTRACTS §5's fix-and-review: a coder and a reviewer in one Workspace) to
its end on a one-node fake cluster, beside a neighbour run that holds the node first: the example's
Workspace waits for capacity (ADR-0064) until the neighbour is done. The coder's first Turn meets a guard
memory kill (ADR-0062: a notice for the next Turn, never a fault); the reviewer sends the work back once.
The feed is printed as it happens, with a progress line while a wait is open, then the final RunStatus.

`--workflow FILE` runs your own workflow on the fake instead (its agents pick the first Allowed pick of
every Turn); `--keep` leaves the fake cluster up afterwards, its kubeconfig printed, until Ctrl-C;
`--metrics-port N` serves the API's open routes (`/metrics`, `/healthz`) on 127.0.0.1:N while it runs.
It exits by how the run ended, as `submit --wait` does (0 done, 3 failed, 4 error, 5 cancelled, 6 lost; 1 when
it did not end in time), 2 on a usage error, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, TextIO

from jr2_actors.commands.common import UsageError, port_number, read_file, until_signalled
from jr2_actors.run.feed.render import feed_line
from jr2_actors.run.listing.render import duration, local_clock, status_lines
from jr2_actors.values.constants import DEMO_SECONDS
from jr2_actors.values.timefmt import parse_rfc3339

if TYPE_CHECKING:  # what the demo runs loads when it runs, not with every command
    from jr2_actors.fake.cluster import FakeCluster
    from jr2_actors.orchestrator import Orchestrator

NODE_MILLICPU = 1500  # one node: two 1-CPU Workspaces cannot share it


def add_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="the fake cluster and the orchestrator in one process: a run end to end",
                          description="The bundled example run end to end on an embedded fake cluster, its feed "
                                      "printed as it happens. Examples: jr2-actors demo; jr2-actors demo "
                                      "--workflow my.yaml --keep. Exits by how the run ended, as submit --wait does.")
    demo.add_argument("--workflow", help="run this workflow file on the fake instead of the bundled example "
                                         "(default: the bundled fix-and-review)")
    demo.add_argument("--keep", action="store_true",
                      help="leave the fake cluster up afterwards, with its kubeconfig printed, until Ctrl-C "
                           "(default: stop it when the run ends)")
    demo.add_argument("--metrics-port", type=port_number, default=None,
                      help="serve /metrics and /healthz on 127.0.0.1:N while the demo runs (default: off)")


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    from jr2_actors.api.app import METRICS_PATH
    from jr2_actors.commands.client import exit_code
    from jr2_actors.orchestrator import Orchestrator

    own = _load(args.workflow) if args.workflow else None
    out = sys.stdout
    with tempfile.TemporaryDirectory(prefix="jr2-demo-") as tmp, demo_cluster() as cluster:
        if stop.is_set():
            return 130
        client = cluster.client()
        orchestrator = Orchestrator(client, state_dir=os.path.join(tmp, "state"), signing_key=cluster.signing_key,
                                    instance_harness=cluster.instance_harness_url, sandbox_image="jr2-sandbox:dev")
        server = None
        try:
            orchestrator.start()
            if args.metrics_port is not None:
                server = _serve_metrics(orchestrator, args.metrics_port)
                print(f"metrics: {server.url}{METRICS_PATH}", file=out, flush=True)
            story = Story()
            status = play(cluster, orchestrator, out, stop, own, story=story)
            if status is None:
                print("interrupted: stopping the orchestrator and the fake cluster", file=out, flush=True)
                return 130
            print("", file=out)
            print("\n".join(status_lines(status, time.time())), file=out, flush=True)
            finals = {name: orchestrator.status(run_id) or {} for name, run_id in story.ids.items()}
            print("", file=out)
            print("\n".join(summary_lines(story, finals)), file=out, flush=True)
            if args.keep:
                path = cluster.write_kubeconfig(os.path.join(tmp, "kubeconfig"))
                print(f"the fake cluster stays up: KUBECONFIG={path} kubectl get sandboxes.core.jr2.dev "
                      f"(Ctrl-C ends it)", file=out, flush=True)
                until_signalled(stop)
            return exit_code(status.get("status"))
        finally:
            if server is not None:
                server.stop()
            orchestrator.stop()
            client.close()


def demo_cluster() -> FakeCluster:
    """The demo's fake cluster: one node, which two 1-CPU Workspaces cannot share."""
    from jr2_actors.fake.cluster import FakeCluster
    from jr2_actors.fake.operator.core import Node

    return FakeCluster(namespace="jr2", nodes=[Node("demo-node", NODE_MILLICPU, 8 * 2**30)], start_seconds=0.3,
                       bookmark_interval=None, long_poll=2.0)


class Story:
    """What the demo's runs did, as their feeds told it: each run's id and feed lines, by the name the demo
    prints (`example`, `neighbour`), for the summary at the end."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.lines: dict[str, list[dict[str, Any]]] = {}

    def add(self, name: str, run_id: str, doc: dict[str, Any]) -> None:
        self.ids.setdefault(name, run_id)
        self.lines.setdefault(name, []).append(doc)


def play(cluster: FakeCluster, orchestrator: Orchestrator, out: TextIO, stop: threading.Event,
         own: Any = None, *, story: Story | None = None) -> dict[str, Any] | None:
    """The demo's runs on `cluster`, their feeds printed to `out` as they come (and told to `story`); the
    example's final RunStatus, or None when stopped. `own`: a workflow document to run instead (its agents
    pick the first Allowed pick)."""
    story = story if story is not None else Story()
    if own is not None:
        cluster.harness(lambda core: core.pick_first_allowed(True))
        return _follow(orchestrator, orchestrator.submit(own), {}, out, stop, story)
    neighbour, after = _neighbour_first(cluster, orchestrator, out, stop, story)
    main = orchestrator.submit(_bundled_document("fix-and-review.yaml"))
    return _follow(orchestrator, main, {neighbour: after}, out, stop, story)


def _neighbour_first(cluster: FakeCluster, orchestrator: Orchestrator, out: TextIO,
                     stop: threading.Event, story: Story) -> tuple[str, int]:
    """The scripted model's Turns, and the neighbour run holding the node: its id and the feed line read."""
    from jr2_actors.fake.harness.core import GuardKill, Pick, Say
    from jr2_actors.run.feed.wire import feed_doc

    cluster.script("builder", [Say("Building the neighbour's service."), Pick("built")])
    cluster.script("coder",
                   [Say("Running the failing test suite."), GuardKill(peak="1.9Gi", limit="2Gi"),
                    Say("The test runner was killed at the memory limit; rerunning with two workers."),
                    Say("Fixed: the parser dropped the last field."), Pick("finish")],
                   [Say("Handled the empty-field case too."), Pick("finish")])
    cluster.script("reviewer",
                   [Say("The fix misses an empty last field."), Pick("reject")],
                   [Say("Both cases are covered now."), Pick("approve")])
    neighbour = orchestrator.submit(_bundled_document("neighbour.yaml"))
    deadline = time.monotonic() + DEMO_SECONDS
    after = 0
    while not stop.is_set():  # the example is submitted once the neighbour holds the node
        got = orchestrator.feed(neighbour, after, 0.2)
        events = got[0] if got else []
        for event in events:
            after = event.id
            doc = feed_doc(event)
            story.add("neighbour", neighbour, doc)
            print(_line("neighbour", doc), file=out, flush=True)
        if any(e.kind == "running" for e in events) or time.monotonic() > deadline:
            break
    return neighbour, after


def _follow(orchestrator: Orchestrator, main: str, others: Mapping[str, int], out: TextIO,
            stop: threading.Event, story: Story) -> dict[str, Any] | None:
    """Print the runs' feeds as they come (the others named), a progress line while the example waits."""
    from jr2_actors.run.feed.wire import feed_doc
    from jr2_actors.workspace.messages import PlacedLine, PlacingLine, WaitEndedLine

    readers = {main: 0, **others}
    open_wait: dict[str, Any] | None = None
    last_progress = 0.0
    deadline = time.monotonic() + DEMO_SECONDS
    finished = False
    while not finished:
        if stop.is_set():
            return None
        if time.monotonic() > deadline:
            print(f"the run did not end within {DEMO_SECONDS:.0f}s; its status follows", file=out, flush=True)
            break
        for run_id in list(readers):
            got = orchestrator.feed(run_id, readers[run_id], 0.1)
            if got is None:
                continue
            events, done = got.events, got.finished
            for event in events:
                readers[run_id] = event.id
                doc = feed_doc(event)
                story.add("example" if run_id == main else "neighbour", run_id, doc)
                print(_line("" if run_id == main else "neighbour", doc), file=out, flush=True)
                if run_id == main and isinstance(event.line, PlacingLine):
                    open_wait = {"child": event.line.path, "on": event.line.on, "since": time.monotonic()}
                elif run_id == main and isinstance(event.line, (PlacedLine, WaitEndedLine)):
                    open_wait = None
            if run_id == main and done:
                finished = True
        if open_wait is not None and time.monotonic() - last_progress >= 1.0:
            last_progress = time.monotonic()
            waited = duration(time.monotonic() - open_wait["since"])
            print(f"          … {open_wait['child']} still waiting for a {open_wait['on']} ({waited})", file=out,
                  flush=True)
    return orchestrator.status(main)


def summary_lines(story: Story, finals: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The demo ends with a table of its runs — how each ended, the states it went
    through, its Turns, its waits for capacity (and how long), the notices told its Agents, how long it took —
    and a one-line timeline of both runs, from their feeds."""
    head = ["RUN", "ENDED", "STATES", "TURNS", "WAITS", "NOTICES", "DURATION"]
    rows = [head]
    for name in sorted(story.lines, key=lambda n: n != "neighbour"):  # the neighbour ran first
        lines, final = story.lines[name], finals.get(name) or {}
        path = final.get("path") or [d.get("state") for d in lines if d.get("kind") in ("started", "state")]
        waited = sum(float(d.get("after_ms") or 0) / 1000 for d in lines if d.get("kind") == "placed")
        waits = sum(d.get("kind") == "placing" for d in lines)
        took = final.get("durationSeconds")
        rows.append([name, str(final.get("status", "-")), " → ".join(str(s) for s in path),
                     str(sum(d.get("kind") == "turn" for d in lines)),
                     f"{waits} ({duration(waited)})" if waits else "0",
                     str(sum(len(d.get("notices") or []) for d in lines if d.get("kind") == "admitted")),
                     duration(float(took)) if isinstance(took, int | float) else "-"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return [*table, "", timeline(story)]


TIMELINE_KINDS = ("started", "placing", "placed", "ended")


def timeline(story: Story) -> str:
    """`timeline: 0.0s neighbour started · 0.4s example placing F-1 · …`: when each run started, waited,
    was placed and ended, on one clock (seconds from the first line)."""
    marks: list[tuple[float, str]] = []
    for name, lines in story.lines.items():
        for d in lines:
            at = parse_rfc3339(d.get("at"))
            kind = d.get("kind")
            if at is None or kind not in TIMELINE_KINDS:
                continue
            what = {"placing": f"waits for a {d.get('on')}", "placed": f"placed {d.get('child')}",
                    "ended": f"ended {d.get('status')}"}.get(str(kind), str(kind))
            marks.append((at, f"{name} {what}"))
    if not marks:
        return "timeline: nothing happened"
    marks.sort()
    first = marks[0][0]
    return "timeline: " + " · ".join(f"{at - first:.1f}s {what}" for at, what in marks)


def _line(run_name: str, doc: Mapping[str, Any]) -> str:
    stamp = local_clock(doc.get("at"))  # A person's clock with its zone
    who = f"[{run_name}] " if run_name else ""
    return f"{stamp}  {who}{feed_line(doc)}"


def _bundled_document(name: str) -> Any:
    from jr2_actors.values.workflow import read_document

    return read_document(resources.files("jr2_actors").joinpath(f"examples/{name}").read_text())


def _load(path: str) -> Any:
    from jr2_actors.values.workflow import WorkflowError, parse_workflow

    try:
        document = read_file(path)
        parse_workflow(document)
    except WorkflowError as e:
        raise UsageError(f"--workflow {path}: {e}") from None
    return document


def _serve_metrics(orchestrator: Any, port: int) -> Any:
    from jr2_actors.api.app import Api
    from jr2_actors.api.server import ApiServer

    server = ApiServer(Api(orchestrator, secrets.token_urlsafe(24)), "127.0.0.1", port)
    try:
        server.start()
    except OSError as e:
        raise UsageError(f"--metrics-port {port}: cannot listen there: {e.strerror or e}") from None
    return server
