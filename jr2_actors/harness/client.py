"""HarnessClient: the Orchestrator's calls to one Harness (CONTRACTS.md §3, ADR-0063's attach).

Theory of operation: only a request that never reached the Harness (no connection was made) is sent
again — backoff 250 ms doubling to 5 s, within a 90 s window. An answer that is not 2xx is never re-sent:
it is raised as a `HarnessError` carrying the Harness's own words. A request that may have reached it (a
reset after sending, a read timeout) is not re-sent either: an admission is at most once.

The memory-kill read (ADR-0062) has its own 5 s limit, which is its only limit; within it a draining
Harness's 503 is asked again as well. Its answer is parsed as untrusted input (`memory_kills.py`).
Waiting between tries goes through an injected `wait`, so tests drive it without sleeping.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import requests
import urllib3.exceptions

from jr2_actors.clock import Clock, SystemClock
from jr2_actors.constants import CONNECT_TIMEOUT_SECONDS, MEMORY_KILL_READ_SECONDS, READ_TIMEOUT_SECONDS
from jr2_actors.errors import Jr2Error
from jr2_actors.harness.memory_kills import MAX_LIST_BYTES, MemoryKillRead, parse_memory_kills
from jr2_actors.http_body import TooLarge, caused_by, read_capped

RETRY_FIRST = 0.25
RETRY_CAP = 5.0
RETRY_WINDOW = 90.0
LONG_POLL_READ_TIMEOUT = 40.0  # above the Harness's ~25 s long-poll, so it answers 204 first
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class HarnessError(Jr2Error):
    """The Harness answered, and not with 2xx: its status and its own error text."""

    def __init__(self, status: int, error: str, *, slot: str | None = None, body: Mapping[str, Any] | None = None):
        self.status = status
        self.error = error
        self.slot = slot
        self.body = dict(body or {})
        super().__init__(f"Harness answered {status}: {error}" + (f" (slot {slot})" if slot else ""))


class HarnessUnreachable(Jr2Error):
    """No answer: `reached` says whether the request may have arrived (then it was not re-sent)."""

    def __init__(self, detail: str, *, reached: bool) -> None:
        self.reached = reached
        super().__init__(detail)


class HarnessProtocolError(Jr2Error):
    """An answer that is not what the contract says (not JSON, a wrong shape, too large)."""


@dataclass(frozen=True)
class Admission:
    stream_url: str
    offset: str
    submission_id: str


@dataclass(frozen=True)
class Updates:
    events: list[dict[str, Any]] = field(repr=False)
    next_offset: str
    up_to_date: bool


class HarnessClient:
    def __init__(self, base_url: str, token: str, *, clock: Clock | None = None,
                 wait: Callable[[float], None] | None = None, session: requests.Session | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.clock = clock or SystemClock()
        self._wait = wait or threading.Event().wait
        self._session = session or requests.Session()
        self._session.trust_env = False

    def __repr__(self) -> str:  # the token stays out of every log line
        return f"HarnessClient({self.base_url!r})"

    def close(self) -> None:
        self._session.close()

    # -- routes --------------------------------------------------------------------------------------

    def healthz(self) -> bool:
        try:
            resp = self._session.get(self.base_url + "/healthz", timeout=(CONNECT_TIMEOUT_SECONDS, 5.0))
        except requests.exceptions.RequestException:
            return False
        resp.close()
        return resp.status_code == 200

    def attach(self, slots: Sequence[Mapping[str, str]], branch: str, review_sha: str | None = None) -> dict[str, str]:
        body: dict[str, Any] = {"slots": [dict(s) for s in slots], "branch": branch}
        if review_sha:
            body["reviewSha"] = review_sha
        doc = self._json("POST", "/attach", body)
        repos = doc.get("repos")
        if not isinstance(repos, dict) or not all(isinstance(v, str) for v in repos.values()):
            raise HarnessProtocolError("attach answer lacks a repos map of paths")
        return dict(repos)

    def admit(self, agent: str, conversation_id: str, body: Mapping[str, Any]) -> Admission:
        doc = self._json("POST", f"/agents/{_seg(agent)}/{_seg(conversation_id)}", dict(body))
        stream_url, offset, submission = doc.get("streamUrl"), doc.get("offset"), doc.get("submissionId")
        if not all(isinstance(v, str) and v != "" for v in (stream_url, submission)) or not isinstance(offset, str):
            raise HarnessProtocolError("admission answer lacks streamUrl, offset or submissionId")
        assert isinstance(stream_url, str) and isinstance(submission, str)
        return Admission(stream_url, offset, submission)

    def updates(self, stream_url: str, offset: str) -> Updates:
        """One long-poll of a conversation's stream; a 404 (the conversation is lost) raises HarnessError."""
        resp = self._send("GET", stream_url, None, params={"offset": offset, "view": "updates", "live": "long-poll"},
                          read_timeout=LONG_POLL_READ_TIMEOUT, absolute=True)
        next_offset = resp.headers.get("stream-next-offset", offset)
        up_to_date = resp.headers.get("stream-up-to-date", "") == "true"
        if resp.status_code == 204:
            resp.close()
            return Updates([], next_offset, up_to_date)
        doc = self._decode(resp)
        if not isinstance(doc, list) or not all(isinstance(e, dict) and isinstance(e.get("type"), str) for e in doc):
            raise HarnessProtocolError("updates answer is not a list of events")
        return Updates(doc, next_offset, up_to_date)

    def answer(self, agent: str, conversation_id: str, call_id: str, over: bool, answer: Any) -> None:
        self._json("POST", f"/agents/{_seg(agent)}/{_seg(conversation_id)}/answers",
                   {"callId": call_id, "over": over, "answer": answer})

    def abort(self, agent: str, conversation_id: str) -> bool:
        doc = self._json("POST", f"/agents/{_seg(agent)}/{_seg(conversation_id)}/abort", None)
        return bool(doc.get("aborted"))

    def memory_kills(self) -> MemoryKillRead:
        """ADR-0062: the read's 5 s is its only limit; a 503 (draining) is asked again within it."""
        deadline = self.clock.monotonic() + MEMORY_KILL_READ_SECONDS
        delay = RETRY_FIRST
        while True:
            remaining = deadline - self.clock.monotonic()
            resp = self._send("GET", "/memory-kills", None, read_timeout=max(remaining, 0.1),
                              window=max(remaining, 0.0), raise_status=False)
            if resp.status_code == 503 and self.clock.monotonic() + delay < deadline:
                resp.close()
                self._wait(delay)
                delay = min(delay * 2, RETRY_CAP)
                continue
            if resp.status_code >= 300:
                self._raise_for(resp)
            raw = _read_capped(resp, MAX_LIST_BYTES)
            return parse_memory_kills(raw)

    # -- plumbing ------------------------------------------------------------------------------------

    def _json(self, method: str, path: str, body: Mapping[str, Any] | None) -> dict[str, Any]:
        doc = self._decode(self._send(method, path, body))
        if not isinstance(doc, dict):
            raise HarnessProtocolError(f"{method} {path}: answer is not a JSON object")
        return doc

    def _send(self, method: str, path: str, body: Mapping[str, Any] | None, *,
              params: Mapping[str, str] | None = None, read_timeout: float = READ_TIMEOUT_SECONDS,
              absolute: bool = False, window: float = RETRY_WINDOW, raise_status: bool = True) -> requests.Response:
        url = path if absolute else self.base_url + path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        started = self.clock.monotonic()
        delay = RETRY_FIRST
        while True:
            try:
                resp = self._session.request(method, url, params=params, data=data, headers=headers, stream=True,
                                             timeout=(CONNECT_TIMEOUT_SECONDS, read_timeout))
            except requests.exceptions.RequestException as e:
                if not _never_reached(e):
                    raise HarnessUnreachable(f"{method} {path}: {_one_line(e)}", reached=True) from e
                if self.clock.monotonic() - started + delay > window:
                    raise HarnessUnreachable(f"{method} {path}: not reached in {window:.0f}s: {_one_line(e)}",
                                             reached=False) from e
                self._wait(delay)
                delay = min(delay * 2, RETRY_CAP)
                continue
            if raise_status and resp.status_code >= 300:
                self._raise_for(resp)
            return resp

    def _raise_for(self, resp: requests.Response) -> None:
        raw = _read_capped(resp, 64 * 1024, strict=False)
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            slot = doc.get("slot") if isinstance(doc.get("slot"), str) else None
            raise HarnessError(resp.status_code, doc["error"], slot=slot, body=doc)
        raise HarnessError(resp.status_code, raw[:200].decode("utf-8", "replace").strip() or str(resp.reason))

    def _decode(self, resp: requests.Response) -> Any:
        raw = _read_capped(resp, MAX_ANSWER_BYTES)
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise HarnessProtocolError("the Harness's answer is not JSON") from e


def _never_reached(e: BaseException) -> bool:
    """True only when no connection was made, so the Harness cannot have seen the request."""
    return isinstance(e, requests.exceptions.ConnectTimeout) or caused_by(
        e, urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError,
        urllib3.exceptions.NameResolutionError)


def _read_capped(resp: requests.Response, cap: int, *, strict: bool = True) -> bytes:
    try:
        return read_capped(resp, cap, truncate=not strict)
    except TooLarge as e:
        raise HarnessProtocolError(f"the Harness's answer is over {cap} bytes") from e
    except requests.exceptions.RequestException as e:
        raise HarnessUnreachable(f"reading the answer: {_one_line(e)}", reached=True) from e


def _seg(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300]
