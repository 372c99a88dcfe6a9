"""The client commands (CONTRACTS.md §6): `submit`, `runs`, `status`, `events`, `cancel` against a running
orchestrator's API (`--server`, the token from `JR2_INSTANCE_TOKEN`). A table for people by default,
`--json` for scripts. A refused token, an unreachable server or a bad answer is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from jr2_actors.api import sse
from jr2_actors.commands.common import (
    Interrupted,
    UsageError,
    interruptible,
    positive_seconds,
    read_file,
    secret_from,
    timeout_duration,
    until_stopped,
)
from jr2_actors.commands.completion import files
from jr2_actors.run.feed.render import feed_line
from jr2_actors.run.listing.render import cluster_line, duration, local_clock, local_time, ran, status_lines
from jr2_actors.values.errors import one_line
from jr2_actors.values.run_ids import FULL_RUN_ID  # anything else is a prefix to resolve
from jr2_actors.values.timefmt import parse_rfc3339

if TYPE_CHECKING:  # requests loads when a command calls the server, not for --help
    import requests

DEFAULT_SERVER = "http://127.0.0.1:8080"
TIMEOUT = (5.0, 30.0)
# A command that waits for a run exits by how it ended, as `argo wait` and `argo submit --wait` do (each code
# is documented in docs/operations.md); 2 stays the usage error and 130 Ctrl-C.
EXIT_BY_STATUS = {"done": 0, "failed": 3, "error": 4, "cancelled": 5, "lost": 6}
EXIT_OTHER_END = 1  # an ending this client does not know
EXIT_TIMED_OUT = 1  # `wait --timeout` ran out, as kubectl wait's does
WAIT_POLL_SECONDS = 1.0


OUTPUTS = ("table", "wide", "json", "yaml", "name")  # name: the bare run id, one a line (kubectl's and Argo's -o name)
RESUME_SECONDS = 60.0  # a follow whose feed broke off tries to resume (Last-Event-ID) for this long
RESUME_PAUSE_SECONDS = 1.0
SUBMIT_TRIES = 3  # a submit whose connection fails, or that is refused for now, is sent again with the same key
MAX_RETRY_AFTER_SECONDS = 60  # a server's longer Retry-After is waited this long at most


def add_parsers(sub: Any) -> None:
    def common(p: argparse.ArgumentParser, outputs: tuple[str, ...] = OUTPUTS) -> None:
        p.add_argument("--server", default=os.environ.get("JR2_SERVER", DEFAULT_SERVER),
                       help=f"the orchestrator's API (default: $JR2_SERVER, else {DEFAULT_SERVER})")
        p.add_argument("--token-file", help="a file holding the Instance token (default: $JR2_INSTANCE_TOKEN)")
        p.add_argument("-o", "--output", choices=outputs, default="table",
                       help="table for people, wide for more columns, json (one document per line) or yaml for "
                            "scripts" + (", name for the bare run id" if "name" in outputs else "")
                            + " (default: table)")
        p.add_argument("--json", dest="output", action="store_const", const="json",
                       help="as -o json (default: off)")

    def run_arg(p: argparse.ArgumentParser, nargs: str | None = None) -> None:
        p.add_argument("run" if nargs is None else "runs", metavar="RUN", nargs=nargs,
                       help="a run id, or a unique prefix of one (required)")

    def follow_flags(p: argparse.ArgumentParser) -> None:
        follow = p.add_mutually_exclusive_group()
        follow.add_argument("--wait", action="store_true",
                            help="then wait for the run to end and exit by how it ended (0 done, 3 failed, 4 error, "
                                 "5 cancelled, 6 lost; default: print the run id and exit 0)")
        follow.add_argument("--watch", action="store_true",
                            help="then follow its feed until it ends, exit as --wait (default: do not follow)")

    p = sub.add_parser("submit", help="start a run of a workflow file",
                       description="Start a run. Example: jr2-actors submit fix.yaml --watch")
    files(p.add_argument("workflow", metavar="WORKFLOW.yaml", help="a workflow file (docs/workflows.md), YAML or JSON"))
    follow_flags(p)
    common(p)
    p = sub.add_parser("resubmit", help="start a new run of the workflow document a run was submitted with",
                       description="Submit a run's workflow document again, as a new run. "
                                   "Example: jr2-actors resubmit r-1a2b --watch")
    run_arg(p)
    follow_flags(p)
    common(p)
    p = sub.add_parser("wait", help="wait for runs to end; exit by how they ended",
                       description="Wait until every run named has ended. Exit 0 when all ended done, else the "
                                   "code of the first that did not: 3 failed, 4 error, 5 cancelled, 6 lost. "
                                   "Example: jr2-actors wait r-1a2b3c r-4d5e6f --timeout 10m")
    run_arg(p, "+")
    p.add_argument("--timeout", type=timeout_duration, default=None, metavar="DURATION",
                   help="give up after this long, with exit 1, as kubectl wait does (30s, 5m, 1h; 0: look once; "
                        "default: no limit)")
    common(p)
    p = sub.add_parser("runs", help="the runs, newest start first (a run waiting for capacity is marked)",
                       description="The live runs, newest start first; --all adds the finished runs the store "
                                   "still keeps (7 days from their end). Example: jr2-actors runs --all -o wide")
    p.add_argument("--all", action="store_true",
                   help="also the finished runs still in the store (default: live runs only)")
    common(p)
    p = sub.add_parser("status", help="one run's RunStatus, finished runs too",
                       description="One run's status: state, start, end, duration, Workspaces, waits. "
                                   "Example: jr2-actors status r-1a2b")
    run_arg(p)
    common(p)
    p = sub.add_parser("events", help="follow a run's feed until it ends (Ctrl-C to leave); exit as wait does",
                       description="Follow a run's feed until it ends; a feed that breaks off (a serve restart) is "
                                   "resumed after its last line. Example: jr2-actors events r-1a2b --since 40")
    run_arg(p)
    p.add_argument("--since", type=_line_id, default=0, metavar="ID",
                   help="start after the feed line with this id (default: 0, from the first line)")
    p.add_argument("--resume-for", type=positive_seconds, default=RESUME_SECONDS, metavar="SECONDS",
                   help="how long to keep resuming a feed that broke off before exit 2 "
                        f"(default: {RESUME_SECONDS:g})")
    common(p, tuple(o for o in OUTPUTS if o != "name"))  # a feed's lines are not runs
    p = sub.add_parser("cancel", help="cancel runs (what never ran is deleted; what ran is kept)",
                       description="Cancel each run named. Example: jr2-actors cancel r-1a2b r-3c4d")
    run_arg(p, "+")
    common(p)


def _line_id(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise argparse.ArgumentTypeError(f"{text!r} is not a feed line's id (digits)")
    return int(text)


class Unreachable(UsageError):
    """No answer from the server (refused, reset, timed out): one line, exit 2 — or, for a follower, a pause."""


class Busy(UsageError):
    """A 503 with `Retry-After`: the server took nothing (at its budget, stopping, its store unable to write)
    and says when to try again; `retry_after` is that, bounded to `MAX_RETRY_AFTER_SECONDS`."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FeedBroke(UsageError):
    """The feed's connection broke: a follower resumes after its last line (the server may be restarting)."""


class Client:
    def __init__(self, server: str, token: str, *, token_source: str = "JR2_INSTANCE_TOKEN",  # noqa: S107 - a name
                 stop: threading.Event | None = None) -> None:
        if not server.startswith(("http://", "https://")):
            raise UsageError(f"--server {server}: not an http(s) URL")
        import requests

        self.server = server.rstrip("/")
        self._token = token
        self._token_source = token_source
        self._session = requests.Session()
        self._session.trust_env = False
        self._stop = stop or threading.Event()

    def call(self, method: str, path: str, body: Any = None, *, stream: bool = False,
             headers: dict[str, str] | None = None) -> requests.Response:
        import requests

        def send() -> requests.Response:
            return self._session.request(method, self.server + path, json=body, stream=stream, timeout=TIMEOUT,
                                         headers={"Authorization": f"Bearer {self._token}", **(headers or {})})

        try:
            resp = interruptible(send, self._stop)  # Ctrl-C leaves at once, even while the server is slow
        except requests.exceptions.RequestException as e:
            raise Unreachable(f"cannot reach {self.server}: {_why_unreachable(e)}") from None
        if resp.status_code == 401:
            raise UsageError(f"{self.server} refused the token (check {self._token_source})")
        if resp.status_code == 503 and _retry_after(resp) is not None:
            raise Busy(f"{self.server} answered 503: {_error(resp)}", _retry_after(resp) or 0.0)
        if resp.status_code >= 400:
            raise UsageError(f"{self.server} answered {resp.status_code}: {_error(resp)}")
        return resp

    def json(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None) -> Any:
        resp = self.call(method, path, body, headers=headers)
        try:
            return resp.json()
        except ValueError:
            kind = resp.headers.get("Content-Type", "").split(";")[0].strip() or "no content type"
            raise UsageError(f"{self.server} answered {kind}, not JSON: is --server a jr2 orchestrator?") from None

    def events(self, run: str, after: int = 0) -> Iterator[dict[str, Any]]:
        """The run's feed after line `after` (Last-Event-ID). A connection that breaks is `FeedBroke`."""
        import requests

        resp = self.call("GET", f"/runs/{_segment(run)}/events", stream=True,
                         headers={"Last-Event-ID": str(after)} if after else None)
        try:
            yield from sse.decode(raw or "" for raw in resp.iter_lines(decode_unicode=True))
        except requests.exceptions.RequestException as e:
            raise FeedBroke(f"the feed from {self.server} broke off: {one_line(e)}") from None
        except ValueError as e:
            raise UsageError(f"the feed from {self.server} is not a jr2 feed: {e}") from None
        finally:
            resp.close()


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    document = _workflow(args.workflow) if args.command == "submit" else None  # a bad file: before any call
    token = secret_from("JR2_INSTANCE_TOKEN", args.token_file, "the Instance token").decode("utf-8", "replace")
    client = Client(args.server, token, stop=stop,
                    token_source=f"the token in {args.token_file}" if args.token_file else "JR2_INSTANCE_TOKEN")
    out, fmt = sys.stdout, args.output
    if args.command in ("submit", "resubmit"):
        if args.command == "resubmit":
            document = client.json("GET", f"/runs/{_segment(resolve(client, args.run))}/workflow").get("workflow")
        doc = _submit(client, document, stop)
        run_id = str(doc.get("runId"))
        emit(fmt, doc, [f"submitted {run_id}"])
        if args.watch:
            return _events(client, run_id, stop, fmt=fmt)
        if args.wait:
            return _wait(client, [run_id], stop, fmt=fmt)
    elif args.command == "wait":
        return _wait(client, [resolve(client, r) for r in args.runs], stop, fmt=fmt, timeout=args.timeout)
    elif args.command == "runs":
        doc = client.json("GET", "/runs?all=true" if args.all else "/runs")
        runs = doc.get("runs") if isinstance(doc, dict) else None
        listed = sorted((r for r in runs or [] if isinstance(r, dict)), key=lambda r: str(r.get("startedAt", "")),
                        reverse=True)
        if fmt in ("json", "yaml"):
            emit(fmt, listed, [])
        elif fmt == "name":
            for r in listed:
                emit(fmt, r, [])
        elif listed:
            problem = next((r["cluster"] for r in listed if isinstance(r.get("cluster"), dict)), None)
            if problem is not None:  # said before the table: its `placing` marks are waits on no cluster
                print(cluster_line(problem, time.time()), file=out)
            print("\n".join(runs_table(listed, time.time(), wide=fmt == "wide")), file=out)
        else:
            print("no runs in the store" if args.all else "no live runs (runs --all lists finished ones too)",
                  file=out)
    elif args.command == "status":
        run_id = resolve(client, args.run)
        doc = client.json("GET", f"/runs/{_segment(run_id)}")
        lines = status_lines(doc, time.time())
        if fmt == "wide":  # The path it took, marked in its state graph
            lines += _path_lines(client, run_id, doc)
        emit(fmt, doc, lines)
    elif args.command == "cancel":
        return _cancel(client, args.runs, fmt)
    elif args.command == "events":
        return _events(client, resolve(client, args.run), stop, fmt=fmt, after=args.since,
                       resume_for=args.resume_for)
    return 0


def _submit(client: Client, document: object, stop: threading.Event) -> Any:
    """POST /runs with one Idempotency-Key for every try: a try whose answer was lost (the connection
    broke after the server took it) is sent again and answered with the run it made, never a second run;
    a 503 with Retry-After (nothing was taken: the server is at its budget) is sent again after it."""
    key = f"jr2-cli-{uuid.uuid4()}"
    for attempt in range(1, SUBMIT_TRIES + 1):
        try:
            return client.json("POST", "/runs", {"workflow": document}, headers={"Idempotency-Key": key})
        except (Unreachable, Busy) as e:
            if attempt == SUBMIT_TRIES:
                raise
            pause = e.retry_after if isinstance(e, Busy) else RESUME_PAUSE_SECONDS
            when = f" in {pause:g}s" if isinstance(e, Busy) else ""
            print(f"jr2-actors: {e}; trying again{when} ({attempt + 1} of {SUBMIT_TRIES}, the same Idempotency-Key)",
                  file=sys.stderr, flush=True)
            if stop.wait(pause):
                raise Interrupted() from None
    raise AssertionError("unreachable")


def emit(fmt: str, doc: Any, lines: list[str]) -> None:
    """One document as the output format asks: a JSON line, a YAML document, or the lines for people."""
    out = sys.stdout
    if fmt == "json":
        print(json.dumps(doc), file=out, flush=True)
    elif fmt == "name":
        if isinstance(doc, dict) and doc.get("runId") is not None:
            print(doc["runId"], file=out, flush=True)
    elif fmt == "yaml":
        import yaml

        print("---\n" + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).rstrip(), file=out, flush=True)
    else:
        if lines:
            print("\n".join(lines), file=out, flush=True)


def resolve(client: Client, name: str) -> str:
    """A run named by its id or a unique prefix of it (ADR-0065: a swept id frees its abbreviations); an
    ambiguous prefix is refused with its candidates."""
    if FULL_RUN_ID.fullmatch(name):
        return name
    if not re.fullmatch(r"[A-Za-z0-9.-]{1,128}", name):
        raise UsageError(f"{name!r} is not a run id or a prefix of one")
    doc = client.json("GET", f"/runs?all=true&prefix={quote(name, safe='')}")
    ids = sorted({str(r.get("runId")) for r in (doc.get("runs") or []) if isinstance(r, dict)}) \
        if isinstance(doc, dict) else []
    if name in ids or len(ids) == 1:
        return name if name in ids else ids[0]
    if not ids:
        raise UsageError(f"no run {name} (runs --all lists the runs the store keeps)")
    shown = ", ".join(ids[:10]) + (f", … ({len(ids)} in all)" if len(ids) > 10 else "")
    raise UsageError(f"{name} is ambiguous: it begins {shown}")


def runs_table(runs: list[dict[str, Any]], now_wall: float, *, wide: bool) -> list[str]:
    """`runs` for people: a header, then one row a run (AGE since its start, DURATION to its end or now)."""
    head = ["RUN", "WORKFLOW", "STATUS", "STATE", "AGE", "DURATION"] + (["STARTED", "ENDED"] if wide else []) \
        + ["PLACING"]
    rows = [head]
    for r in runs:
        started, ended = parse_rfc3339(r.get("startedAt")), parse_rfc3339(r.get("endedAt"))
        age = duration(now_wall - started) if started is not None else "-"
        took = duration(ran(r, started, ended, now_wall)) if started is not None else "-"
        row = [str(r.get("runId")), str(r.get("workflow")), str(r.get("status")), str(r.get("state")), age, took]
        if wide:
            row += [local_time(started) if started is not None else "-", local_time(ended) if ended else "-"]
        row.append(",".join(r.get("placing") or []) or "")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _cancel(client: Client, names: list[str], fmt: str) -> int:
    """Each run named, in turn; one that cannot be cancelled is one line on stderr, the others still are
    (exit 2 when any could not)."""
    code = 0
    for name in names:
        try:
            run_id = resolve(client, name)
            before = client.json("GET", f"/runs/{_segment(run_id)}")
            if isinstance(before, dict) and before.get("status") not in (None, "running"):
                emit(fmt, before, [f"{run_id} had already ended: {before.get('status')}"])
                continue
            doc = client.json("POST", f"/runs/{_segment(run_id)}/cancel")
            emit(fmt, doc, [f"cancelling {run_id}: {doc.get('status')}"])
        except UsageError as e:
            if len(names) == 1:
                raise
            print(f"jr2-actors: {e}", file=sys.stderr, flush=True)
            code = 2
    return code


def exit_code(status: object) -> int:
    """How a command that waited for a run exits, by the run's end (EXIT_BY_STATUS)."""
    return EXIT_BY_STATUS.get(str(status), EXIT_OTHER_END)


def _events(client: Client, run_id: str, stop: threading.Event, *, fmt: str, after: int = 0,
            resume_for: float = RESUME_SECONDS) -> int:
    """Follow the feed to its end; exit by how the run ended. The `ended` line need not be the last: a
    teardown's lines (a wait that ended, a Sandbox deleted) follow it. A feed that breaks off (a serve
    restart) is resumed after the last line read (Last-Event-ID), for up to `resume_for` seconds."""
    ended: object = None
    broke_at: float | None = None
    while True:
        try:
            for event in until_stopped(client.events(run_id, after), stop):
                broke_at = None
                if isinstance(event.get("id"), int):
                    after = event["id"]
                if event.get("kind") == "ended":
                    ended = event.get("status")
                emit(fmt, event, [f"{local_clock(event.get('at'))} {feed_line(event)}"])
            if stop.is_set():
                raise Interrupted()
            if ended is not None:
                return exit_code(ended)
            problem = f"the feed from {client.server} ended before the run did"
        except (FeedBroke, Unreachable) as e:
            if stop.is_set():
                raise Interrupted() from None
            if ended is not None:
                return exit_code(ended)
            problem = str(e)
        broke_at = broke_at or time.monotonic()
        if time.monotonic() - broke_at > resume_for:
            raise UsageError(f"{problem}; gave up resuming after {resume_for:g}s (events --since {after} "
                             "resumes it)")
        print(f"jr2-actors: {problem}; resuming after line {after}", file=sys.stderr, flush=True)
        if stop.wait(RESUME_PAUSE_SECONDS):
            raise Interrupted()


def _wait(client: Client, run_ids: list[str], stop: threading.Event, *, fmt: str,
          timeout: float | None = None) -> int:
    """Each run's end, in the order named (a poll a second, so a serve restart in between is only a pause).
    `timeout` bounds the whole wait, as kubectl's `wait --timeout` does: past it, one line and exit 1."""
    code = 0
    deadline = None if timeout is None else time.monotonic() + timeout
    for run_id in run_ids:
        while True:
            doc = client.json("GET", f"/runs/{_segment(run_id)}")
            status = doc.get("status") if isinstance(doc, dict) else None
            if status not in (None, "running"):
                break
            left = WAIT_POLL_SECONDS if deadline is None else deadline - time.monotonic()
            if left <= 0:
                print(f"jr2-actors: timed out waiting for {run_id} (still {status or 'not ended'} after "
                      f"{timeout:g}s)", file=sys.stderr, flush=True)
                return EXIT_TIMED_OUT
            if stop.wait(min(left, WAIT_POLL_SECONDS)):
                raise Interrupted()
        fault = doc.get("fault") if isinstance(doc, dict) else None
        emit(fmt, doc, [f"{run_id} {status}" + (f": {fault}" if fault else "")])
        code = code or exit_code(status)
    return code


def _path_lines(client: Client, run_id: str, doc: Any) -> list[str]:
    from jr2_actors.commands.lint import marked_graph
    from jr2_actors.values.workflow import WorkflowError, parse_workflow

    path = doc.get("path") if isinstance(doc, dict) else None
    if not isinstance(path, list) or not path:
        return ["  path: not known (a server from before runs kept it)"]
    try:
        workflow = parse_workflow(client.json("GET", f"/runs/{_segment(run_id)}/workflow").get("workflow"),
                                  check_graph=False)
    except (WorkflowError, AttributeError) as e:
        raise UsageError(f"{client.server} answered a workflow this client cannot read: {e}") from None
    return marked_graph(workflow, [str(s) for s in path], dropped=int(doc.get("pathDropped") or 0))


def _workflow(path: str) -> object:
    from jr2_actors.values.workflow import WorkflowError

    try:
        return read_file(path)
    except WorkflowError as e:
        raise UsageError(f"{path}: {e}") from None


def _error(resp: requests.Response) -> str:
    """The server's reason in one line; a page that is not jr2's JSON (another server's HTML) is named, not shown."""
    try:
        doc = resp.json()
    except ValueError:
        kind = resp.headers.get("Content-Type", "").split(";")[0].strip() or "no content type"
        reason = one_line(resp.reason or "an error", 80)
        return f"{reason} ({kind}), not a jr2 orchestrator's answer: is --server right?"
    return one_line(doc.get("error", doc) if isinstance(doc, dict) else doc)


def _retry_after(resp: requests.Response) -> float | None:
    """Retry-After in seconds (an HTTP date is not used by this server: taken as absent), at most
    `MAX_RETRY_AFTER_SECONDS`; None when absent or not a number."""
    text = resp.headers.get("Retry-After", "").strip()
    if not re.fullmatch(r"[0-9]{1,6}", text):
        return None
    return float(min(int(text), MAX_RETRY_AFTER_SECONDS))


def _segment(run: str) -> str:
    """A run id as one path segment: `a/../b` is asked about as itself, never as another path."""
    return quote(run, safe="")


def _why_unreachable(e: requests.exceptions.RequestException) -> str:
    """The cause in a few words, not urllib3's whole chain."""
    import requests

    if isinstance(e, requests.exceptions.ConnectTimeout | requests.exceptions.ReadTimeout):
        return "no answer in time"
    if isinstance(e, requests.exceptions.SSLError):
        return "TLS failed (is it http, not https?)"
    text = str(e)
    for cause in ("Connection refused", "Name or service not known", "No route to host",
                  "Temporary failure in name resolution", "Connection reset by peer", "Network is unreachable"):
        if cause in text:
            return cause.lower()
    return one_line(e)



