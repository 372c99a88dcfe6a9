"""The client commands (CONTRACTS.md §6): `submit`, `runs`, `status`, `events`, `cancel` against a running
orchestrator's API (`--server`, the token from `JR2_INSTANCE_TOKEN`). A table for people by default,
`--json` for scripts. A refused token, an unreachable server or a bad answer is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import requests

from jr2_actors.api import sse
from jr2_actors.commands.common import Interrupted, UsageError, interruptible, read_file, secret_from, until_stopped
from jr2_actors.run.render import feed_line, status_lines
from jr2_actors.values.errors import one_line
from jr2_actors.values.workflow import WorkflowError

DEFAULT_SERVER = "http://127.0.0.1:8080"
TIMEOUT = (5.0, 30.0)
# A command that waits for a run exits by how it ended, as `argo wait` and `argo submit --wait` do (each code
# is documented in docs/operations.md); 2 stays the usage error and 130 Ctrl-C.
EXIT_BY_STATUS = {"done": 0, "failed": 3, "error": 4, "cancelled": 5, "lost": 6}
EXIT_OTHER_END = 1  # an ending this client does not know
WAIT_POLL_SECONDS = 1.0


def add_parsers(sub: Any) -> None:
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--server", default=os.environ.get("JR2_SERVER", DEFAULT_SERVER),
                       help=f"the orchestrator's API (default: $JR2_SERVER, else {DEFAULT_SERVER})")
        p.add_argument("--token-file", help="a file holding the Instance token (default: $JR2_INSTANCE_TOKEN)")
        p.add_argument("--json", action="store_true",
                       help="print the API's JSON, one document per line (default: a table for people)")

    p = sub.add_parser("submit", help="start a run of a workflow file",
                       description="Start a run. Example: jr2-actors submit fix.yaml --watch")
    p.add_argument("workflow", metavar="WORKFLOW.yaml", help="a workflow file (docs/workflows.md), YAML or JSON")
    follow = p.add_mutually_exclusive_group()
    follow.add_argument("--wait", action="store_true",
                        help="then wait for the run to end and exit by how it ended (0 done, 3 failed, 4 error, "
                             "5 cancelled, 6 lost; default: print the run id and exit 0)")
    follow.add_argument("--watch", action="store_true",
                        help="then follow its feed until it ends, exit as --wait (default: do not follow)")
    common(p)
    p = sub.add_parser("wait", help="wait for runs to end; exit by how they ended",
                       description="Wait until every run named has ended. Exit 0 when all ended done, else the "
                                   "code of the first that did not: 3 failed, 4 error, 5 cancelled, 6 lost. "
                                   "Example: jr2-actors wait r-1a2b3c r-4d5e6f")
    p.add_argument("runs", metavar="RUN", nargs="+")
    common(p)
    p = sub.add_parser("runs", help="the live runs (a run waiting for capacity is marked)")
    common(p)
    p = sub.add_parser("status", help="one run's RunStatus, finished runs too")
    p.add_argument("run", metavar="RUN")
    common(p)
    p = sub.add_parser("events", help="follow a run's feed until it ends (Ctrl-C to leave); exit as wait does")
    p.add_argument("run", metavar="RUN")
    common(p)
    p = sub.add_parser("cancel", help="cancel a run (what never ran is deleted; what ran is kept)")
    p.add_argument("run", metavar="RUN")
    common(p)


class Client:
    def __init__(self, server: str, token: str, *, token_source: str = "JR2_INSTANCE_TOKEN",  # noqa: S107 - a name
                 stop: threading.Event | None = None) -> None:
        if not server.startswith(("http://", "https://")):
            raise UsageError(f"--server {server}: not an http(s) URL")
        self.server = server.rstrip("/")
        self._token = token
        self._token_source = token_source
        self._session = requests.Session()
        self._session.trust_env = False
        self._stop = stop or threading.Event()

    def call(self, method: str, path: str, body: Any = None, *, stream: bool = False) -> requests.Response:
        def send() -> requests.Response:
            return self._session.request(method, self.server + path, json=body, stream=stream, timeout=TIMEOUT,
                                         headers={"Authorization": f"Bearer {self._token}"})

        try:
            resp = interruptible(send, self._stop)  # Ctrl-C leaves at once, even while the server is slow
        except requests.exceptions.RequestException as e:
            raise UsageError(f"cannot reach {self.server}: {_why_unreachable(e)}") from None
        if resp.status_code == 401:
            raise UsageError(f"{self.server} refused the token (check {self._token_source})")
        if resp.status_code >= 400:
            raise UsageError(f"{self.server} answered {resp.status_code}: {_error(resp)}")
        return resp

    def json(self, method: str, path: str, body: Any = None) -> Any:
        resp = self.call(method, path, body)
        try:
            return resp.json()
        except ValueError:
            raise UsageError(f"{self.server} answered something that is not JSON") from None

    def events(self, run: str) -> Iterator[dict[str, Any]]:
        resp = self.call("GET", f"/runs/{_segment(run)}/events", stream=True)
        try:
            yield from sse.decode(raw or "" for raw in resp.iter_lines(decode_unicode=True))
        except requests.exceptions.RequestException as e:
            raise UsageError(f"the feed from {self.server} broke off: {one_line(e)}") from None
        except ValueError as e:
            raise UsageError(f"the feed from {self.server} is not a jr2 feed: {e}") from None
        finally:
            resp.close()


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    token = secret_from("JR2_INSTANCE_TOKEN", args.token_file, "the Instance token").decode("utf-8", "replace")
    client = Client(args.server, token, stop=stop,
                    token_source=f"the token in {args.token_file}" if args.token_file else "JR2_INSTANCE_TOKEN")
    out = sys.stdout
    if args.command == "submit":
        document = _workflow(args.workflow)
        doc = client.json("POST", "/runs", {"workflow": document})
        print(json.dumps(doc) if args.json else f"submitted {doc.get('runId')}", file=out, flush=True)
        run_id = str(doc.get("runId"))
        if args.watch:
            return _events(client, run_id, stop, as_json=args.json)
        if args.wait:
            return _wait(client, [run_id], stop, as_json=args.json)
    elif args.command == "wait":
        return _wait(client, list(args.runs), stop, as_json=args.json)
    elif args.command == "runs":
        doc = client.json("GET", "/runs")
        runs = doc.get("runs") if isinstance(doc, dict) else None
        if args.json:
            print(json.dumps(runs), file=out)
        else:
            for r in runs or []:
                mark = f"  placing {', '.join(r['placing'])}" if r.get("placing") else ""
                print(f"{r.get('runId'):<16} {r.get('workflow'):<20} {r.get('status'):<9} {r.get('state')}{mark}",
                      file=out)
            if not runs:
                print("no live runs", file=out)
    elif args.command == "status":
        doc = client.json("GET", f"/runs/{_segment(args.run)}")
        print(json.dumps(doc) if args.json else "\n".join(status_lines(doc, time.time())), file=out)
    elif args.command == "cancel":
        before = client.json("GET", f"/runs/{_segment(args.run)}")
        if isinstance(before, dict) and before.get("status") not in (None, "running"):
            print(json.dumps(before) if args.json else f"{args.run} had already ended: {before.get('status')}",
                  file=out)
            return 0
        doc = client.json("POST", f"/runs/{_segment(args.run)}/cancel")
        print(json.dumps(doc) if args.json else f"cancelling {args.run}: {doc.get('status')}", file=out)
    elif args.command == "events":
        return _events(client, args.run, stop, as_json=args.json)
    return 0


def exit_code(status: object) -> int:
    """How a command that waited for a run exits, by the run's end (EXIT_BY_STATUS)."""
    return EXIT_BY_STATUS.get(str(status), EXIT_OTHER_END)


def _events(client: Client, run_id: str, stop: threading.Event, *, as_json: bool) -> int:
    """Follow the feed to its end; exit by how the run ended. The `ended` line need not be the last: a
    teardown's lines (a wait that ended, a Sandbox deleted) follow it."""
    out = sys.stdout
    ended: object = None
    for event in until_stopped(client.events(run_id), stop):
        if event.get("kind") == "ended":
            ended = event.get("status")
        print(json.dumps(event) if as_json else f"{str(event.get('at', ''))[11:19]} {feed_line(event)}", file=out,
              flush=True)
    if stop.is_set():
        raise Interrupted()
    if ended is None:  # the server stopped, or the connection went
        raise UsageError(f"the feed from {client.server} ended before the run did (follow it again to resume)")
    return exit_code(ended)


def _wait(client: Client, run_ids: list[str], stop: threading.Event, *, as_json: bool) -> int:
    """Each run's end, in the order named (a poll a second, so a serve restart in between is only a pause)."""
    out = sys.stdout
    code = 0
    for run_id in run_ids:
        while True:
            doc = client.json("GET", f"/runs/{_segment(run_id)}")
            status = doc.get("status") if isinstance(doc, dict) else None
            if status not in (None, "running"):
                break
            if stop.wait(WAIT_POLL_SECONDS):
                raise Interrupted()
        fault = doc.get("fault") if isinstance(doc, dict) else None
        print(json.dumps(doc) if as_json else f"{run_id} {status}" + (f": {fault}" if fault else ""), file=out,
              flush=True)
        code = code or exit_code(status)
    return code


def _workflow(path: str) -> object:
    try:
        return read_file(path)
    except WorkflowError as e:
        raise UsageError(f"{path}: {e}") from None


def _error(resp: requests.Response) -> str:
    try:
        doc = resp.json()
    except ValueError:
        return resp.text[:200].strip() or resp.reason
    return str(doc.get("error", doc)) if isinstance(doc, dict) else str(doc)


def _segment(run: str) -> str:
    """A run id as one path segment: `a/../b` is asked about as itself, never as another path."""
    return quote(run, safe="")


def _why_unreachable(e: requests.exceptions.RequestException) -> str:
    """The cause in a few words, not urllib3's whole chain."""
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



