"""HarnessClient: the Orchestrator's calls to one Harness (CONTRACTS.md §3, ADR-0063's attach). What is sent
again, and what never is:
- A request that never reached the Harness is sent again: 250 ms doubling to 5 s, within 90 s. One that may
  have reached it (a reset after sending, a read timeout) is not: an admission is at most once.
- An answer that is not 2xx is a `HarnessError` with the Harness's own words, never sent again — but: a
  draining Harness's 503, and a 429 after its `Retry-After` (refused before anything ran), to an admission
  (for up to 30 s) and the 503 to the memory-kill read (within its own limit, ADR-0062); and a 409 to an
  admission into a conversation the Harness holds (`retry_busy`: "not yet", for `ADMISSION_BUSY_SECONDS`).
  Only a 404 whose body says `kept: false` is `ConversationNotKept` (ADR-0062).
- An admission's answer has no read timeout: it is awaited as long as the Harness is alive — `/healthz` is
  asked every `ADMISSION_PROBE_SECONDS`, and `ADMISSION_PROBE_MISSES` misses in a row cut it (a Harness slow
  to seat a Submission must not fail the run). Its answer names the process that took it (`bootId`, ours),
  and `boot()` asks which one answers now: a restart is judged by the two (ADR-0062).
- The memory-kill read's 5 s is a total limit over connect, 503s and the body (ADR-0062): a `Cut` on the
  client's timer thread ends it at the deadline. Its answer is parsed as untrusted input (`memory_kills.py`).
- A `streamUrl` not on the Harness's origin (and under its path) is refused: the bearer token goes to the
  Harness and nowhere else, and redirects are never followed.
- `close()` ends every call at once, whatever phase it is in (each call runs under a `Cut` that `close()`
  fires), so no retry loop outlives a stopping actor.

Time is the injected clock's (a `VirtualClock` drives every schedule in tests). Every client shares one
`requests.Session` of the process (`shared_session`, harness/pools.py: a pool per address, sized to the
clients that hold it), and closes only its own calls.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import requests
import urllib3.exceptions

from jr2_actors.harness.admission import Admission
from jr2_actors.harness.answers import AdmissionAnswer, Updates, boot_id_of, retry_after
from jr2_actors.harness.errors import ConversationNotKept, HarnessError, HarnessProtocolError, HarnessUnreachable
from jr2_actors.harness.memory_kills import MAX_LIST_BYTES, MemoryKillListError, MemoryKillRead, parse_memory_kills
from jr2_actors.harness.pools import hold_address
from jr2_actors.net.cookies import NoCookies
from jr2_actors.net.cut import Cut, mount_cuts
from jr2_actors.net.http_body import TooLarge, caused_by, read_capped
from jr2_actors.shell import Timers, logs
from jr2_actors.shell.activity import HARNESS_SENT, activity
from jr2_actors.shell.clock import Clock, SystemClock
from jr2_actors.values.constants import (
    ADMISSION_BUSY_SECONDS,
    ADMISSION_DRAIN_SECONDS,
    ADMISSION_PROBE_MISSES,
    ADMISSION_PROBE_SECONDS,
    CONNECT_TIMEOUT_SECONDS,
    HARNESS_LONG_POLL_READ_SECONDS,
    HARNESS_RETRY,
    HARNESS_RETRY_WINDOW_SECONDS,
    MEMORY_KILL_READ_SECONDS,
    PROVISION_BUDGET_SECONDS,
    READ_TIMEOUT_SECONDS,
)
from jr2_actors.values.errors import one_line

MAX_ANSWER_BYTES = 16 * 1024 * 1024


class HarnessClient:
    def __init__(self, base_url: str, token: str, *, clock: Clock | None = None, timers: Timers | None = None,
                 wait: Callable[[float], None] | None = None, session: requests.Session | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.clock = clock or SystemClock()
        self._activity = activity(self.clock)  # a driven VirtualClock's look at the request in flight
        self._timers = timers
        self._own_timers: Timers | None = None
        self._timers_lock = threading.Lock()
        self._wait = wait  # None: `_wait_on_clock` (a bound method kept on self would make a reference cycle)
        self._owns_session = session is None
        if session is None:
            session = requests.Session()
            session.trust_env = False
            session.cookies = NoCookies()
            mount_cuts(session)
        self._session = session  # a given one is `shared_session`'s: made and closed by its owner
        self._release = hold_address(session, self.base_url)  # its pool is sized to its clients
        self._closed = threading.Event()  # set by close(): a retry waiting to go again gives up at once
        self._calls_lock = threading.Lock()
        # Every request's Cut, for as long as the request or its answer's connection lives: close() fires each.
        self._cuts: weakref.WeakSet[Cut] = weakref.WeakSet()
        self._waits: set[threading.Event] = set()  # the waits before a retry: close() ends each

    def __repr__(self) -> str:  # the token stays out of every log line
        return f"HarnessClient({self.base_url!r})"

    def holds_token(self, token: str) -> bool:
        return hmac.compare_digest(self._token.encode(), token.encode())

    def close(self) -> None:
        """Close the session's connections when the session is the client's own (and the client's own timer
        thread, if it made one). Every call ends now: one waiting to retry (a draining Harness, a request
        never reached) unreached, one in flight cut wherever it is (connecting, sending, waiting for the
        answer, reading it) — on a shared session only this client's calls."""
        self._closed.set()
        with self._calls_lock:
            cuts, waits = list(self._cuts), list(self._waits)
        for cut in cuts:
            cut.fire()
        for wait in waits:
            wait.set()
        if self._owns_session:
            self._session.close()
        self._release()
        with self._timers_lock:
            own, self._own_timers = self._own_timers, None
        if own is not None:
            own.stop()

    # -- routes --------------------------------------------------------------------------------------

    def healthz(self) -> bool:
        return self._boot() is not None

    def boot(self, within: float = 0.0) -> str | None:
        """The boot id of the Harness process answering now (`/healthz`'s `bootId`); "" when it answers
        without one; None when it does not answer 200 (not listening yet, draining, gone) — asked again,
        on the retry schedule, for up to `within` seconds (ADR-0062: 30 s while a new container starts)."""
        deadline = self.clock.monotonic() + within
        attempt = 0
        while True:
            boot = self._boot()
            attempt += 1
            delay = HARNESS_RETRY.delay(attempt)
            if boot is not None or self.clock.monotonic() + delay > deadline:
                return boot
            try:
                self._pause(delay, "GET /healthz")
            except HarnessUnreachable:
                return None

    def _boot(self) -> str | None:
        """One `/healthz`: its `bootId` ("" when it says none, or not as JSON); None without a 200."""
        try:
            with self._session.get(self.base_url + "/healthz", timeout=(CONNECT_TIMEOUT_SECONDS, 5.0),
                                   allow_redirects=False) as resp:
                if resp.status_code != 200:
                    return None
                return boot_id_of(json.loads(_read_capped(resp, 64 * 1024) or b"null"))
        except requests.exceptions.RequestException:
            return None
        except (ValueError, RecursionError, HarnessProtocolError, HarnessUnreachable):
            return ""

    def attach(self, slots: Sequence[Mapping[str, str]], branch: str, review_sha: str | None = None) -> dict[str, str]:
        body: dict[str, Any] = {"slots": [dict(s) for s in slots], "branch": branch}
        if review_sha:
            body["reviewSha"] = review_sha
        # An attach clones the Workspace's repositories: it has the provisioning budget, not a request's 30 s.
        doc = self._json("POST", "/attach", body, read_timeout=PROVISION_BUDGET_SECONDS)
        repos = doc.get("repos")
        if not isinstance(repos, dict) or not all(isinstance(v, str) for v in repos.values()):
            raise HarnessProtocolError("attach answer lacks a repos map of paths")
        return dict(repos)

    def admit(self, agent: str, conversation_id: str, admission: Admission, *, retry_busy: bool = False,
              cut: Cut | None = None) -> AdmissionAnswer:
        """POST the admission. A 503 (draining) is sent again within 30 s (CONTRACTS.md §3); with
        `retry_busy` (a conversation the Harness holds), a 409 — its last Submission has not settled — is
        "not yet", sent again within `ADMISSION_BUSY_SECONDS`. The answer is awaited as long as the Harness
        is alive: no read timeout, but `/healthz` is asked every `ADMISSION_PROBE_SECONDS`
        meanwhile, and `ADMISSION_PROBE_MISSES` misses in a row cut the admission (`HarnessUnreachable`,
        reached). `cut.fire()` from another thread ends it too."""
        path = f"/agents/{_seg(agent)}/{_seg(conversation_id)}"
        body = admission_body(admission)
        cut = cut or Cut()
        started = self.clock.monotonic()
        drain_deadline = started + ADMISSION_DRAIN_SECONDS
        busy_deadline = started + ADMISSION_BUSY_SECONDS
        drains = busies = 0
        while True:
            with self._while_alive(cut) as dead:
                try:
                    resp = self._send("POST", path, body, raise_status=False, read_timeout=None, cut=cut)
                    if resp.status_code in (503, 429):  # draining, or refused before anything ran
                        drains += 1
                        delay = HARNESS_RETRY.delay(drains)
                        if resp.status_code == 429:
                            delay = retry_after(resp.headers.get("Retry-After"), delay)
                        if self.clock.monotonic() + delay <= drain_deadline:
                            _let_go(resp)
                            self._pause(delay, path)
                            continue
                    if resp.status_code == 409 and retry_busy:
                        busies += 1
                        delay = HARNESS_RETRY.delay(busies)
                        if self.clock.monotonic() + delay <= busy_deadline:
                            _let_go(resp)
                            self._pause(delay, path)
                            continue
                    if resp.status_code >= 300:
                        self._raise_for(resp)
                    doc = self._decode(resp)
                except HarnessUnreachable as e:
                    if dead.is_set():
                        raise HarnessUnreachable(f"POST {path}: the Harness stopped answering /healthz while the "
                                                 "admission waited for its answer", reached=True) from e
                    raise
            if not isinstance(doc, dict):
                raise HarnessProtocolError(f"POST {path}: answer is not a JSON object")
            stream_url, offset, submission = doc.get("streamUrl"), doc.get("offset"), doc.get("submissionId")
            if not isinstance(stream_url, str) or not stream_url or not isinstance(submission, str) \
                    or not submission or not isinstance(offset, str):
                raise HarnessProtocolError("admission answer lacks streamUrl, offset or submissionId")
            return AdmissionAnswer(self._own_url(stream_url), offset, submission, boot_id_of(doc))

    @contextlib.contextmanager
    def _while_alive(self, cut: Cut) -> Iterator[threading.Event]:
        """While the block runs, ask `/healthz` every `ADMISSION_PROBE_SECONDS` on a thread of its own; after
        `ADMISSION_PROBE_MISSES` misses in a row, fire `cut` and set the event it yields."""
        done, dead, wake = threading.Event(), threading.Event(), threading.Event()
        timers = self._timer_thread()

        def probe() -> None:
            misses = 0
            while not done.is_set():
                wake.clear()
                if done.is_set():  # the block ended between the look and the clear: its wake is gone
                    return
                handle = timers.schedule(self.clock.monotonic() + ADMISSION_PROBE_SECONDS, wake.set)
                wake.wait()  # the probe's time, or the block's end (which also ends a stopped timer's wait)
                if done.is_set() or not timers.alive:
                    timers.cancel(handle)
                    return
                misses = 0 if self.healthz() else misses + 1
                if misses >= ADMISSION_PROBE_MISSES and not done.is_set():
                    dead.set()
                    cut.fire()
                    return

        thread = threading.Thread(target=logs.carry(probe), name="jr2-harness-alive", daemon=True)
        thread.start()
        try:
            yield dead
        finally:
            done.set()
            wake.set()  # the thread ends now (a /healthz in flight first finishes; a late fire
            # finds the admission's connection released, and shuts nothing another request holds)

    def updates(self, stream_url: str, offset: str, *, cut: Cut | None = None) -> Updates:
        """One long-poll of a conversation's stream; a 404 (the conversation is lost) raises HarnessError.
        `cut.fire()` from another thread ends it at once."""
        resp = self._send("GET", self._own_url(stream_url), None,
                          params={"offset": offset, "view": "updates", "live": "long-poll"},
                          read_timeout=HARNESS_LONG_POLL_READ_SECONDS, absolute=True, cut=cut)
        next_offset = resp.headers.get("stream-next-offset", offset)
        up_to_date = resp.headers.get("stream-up-to-date", "") == "true"
        if resp.status_code == 204:
            _let_go(resp)
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
        """ADR-0062: 5 s in total is the read's only limit; a 503 (draining) is asked again within it.
        A read that fails or runs out of time raises: it is "could not tell", never an empty list."""
        deadline = self.clock.monotonic() + MEMORY_KILL_READ_SECONDS
        cut = Cut()
        timers = self._timer_thread()
        handle = timers.schedule(deadline, cut.fire)
        try:
            return self._memory_kills(deadline, cut)
        except (HarnessUnreachable, HarnessProtocolError, MemoryKillListError) as e:
            if cut.fired:
                raise HarnessUnreachable(f"GET /memory-kills: no whole answer within "
                                         f"{MEMORY_KILL_READ_SECONDS:g}s", reached=True) from e
            raise
        finally:
            timers.cancel(handle)

    def _memory_kills(self, deadline: float, cut: Cut) -> MemoryKillRead:
        attempt = 0
        while True:
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0 or cut.fired:
                raise HarnessUnreachable("GET /memory-kills: out of time", reached=True)
            resp = self._send("GET", "/memory-kills", None, read_timeout=remaining, window=remaining,
                              raise_status=False, cut=cut)
            if resp.status_code == 503:
                attempt += 1
                delay = HARNESS_RETRY.delay(attempt)
                if self.clock.monotonic() + delay < deadline:
                    _let_go(resp)
                    self._pause(delay, "/memory-kills")
                    continue
            if resp.status_code >= 300:
                self._raise_for(resp)
            raw = _read_capped(resp, MAX_LIST_BYTES)
            if cut.fired:  # a cut can end a body that has no length as if it were whole
                raise HarnessUnreachable("GET /memory-kills: cut at the deadline", reached=True)
            return parse_memory_kills(raw)

    # -- plumbing ------------------------------------------------------------------------------------

    def _json(self, method: str, path: str, body: Mapping[str, Any] | None, *,
              read_timeout: float = READ_TIMEOUT_SECONDS) -> dict[str, Any]:
        doc = self._decode(self._send(method, path, body, read_timeout=read_timeout))
        if not isinstance(doc, dict):
            raise HarnessProtocolError(f"{method} {path}: answer is not a JSON object")
        return doc

    def _send(self, method: str, path: str, body: Mapping[str, Any] | None, *,
              params: Mapping[str, str] | None = None, read_timeout: float | None = READ_TIMEOUT_SECONDS,
              absolute: bool = False, window: float = HARNESS_RETRY_WINDOW_SECONDS, raise_status: bool = True,
              cut: Cut | None = None) -> requests.Response:
        url = path if absolute else self.base_url + path
        shown = urlsplit(url).path if absolute else path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        started = self.clock.monotonic()
        attempt = 0
        cut = self._cuttable(cut)
        while True:
            if self._closed.is_set():
                raise HarnessUnreachable(f"{method} {shown}: the client is closed", reached=False)
            if cut.fired:
                raise HarnessUnreachable(f"{method} {shown}: cut before it was sent", reached=False)
            try:
                # read_timeout None: no read timeout (an admission, which a Cut ends instead).
                timeout = (CONNECT_TIMEOUT_SECONDS, None) if read_timeout is None else (
                    min(CONNECT_TIMEOUT_SECONDS, max(read_timeout, 0.1)), max(read_timeout, 0.1))
                with cut.active(), self._activity.busy(f"{HARNESS_SENT}{method} {urlsplit(url).path}"):
                    resp = self._session.request(method, url, params=params, data=data, headers=headers,
                                                 stream=True, allow_redirects=False, timeout=timeout)
            except requests.exceptions.RequestException as e:
                if not _never_reached(e) or cut.fired:
                    raise HarnessUnreachable(f"{method} {shown}: {one_line(e)}", reached=True) from e
                attempt += 1
                delay = HARNESS_RETRY.delay(attempt)
                if self.clock.monotonic() - started + delay > window:
                    raise HarnessUnreachable(f"{method} {shown}: not reached in {window:.0f}s: {one_line(e)}",
                                             reached=False) from e
                self._pause(delay, shown)
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
            if resp.status_code == 404 and doc.get("kept") is False:
                raise ConversationNotKept(404, doc["error"][:500], body=doc)
            raise HarnessError(resp.status_code, doc["error"][:500], slot=slot, body=doc)
        raise HarnessError(resp.status_code, raw[:200].decode("utf-8", "replace").strip() or str(resp.reason))

    def _decode(self, resp: requests.Response) -> Any:
        raw = _read_capped(resp, MAX_ANSWER_BYTES)
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise HarnessProtocolError("the Harness's answer is not JSON") from e

    def _own_url(self, url: str) -> str:
        """`url` resolved against the Harness, refused unless it is on the Harness's origin and path."""
        full = urljoin(self.base_url + "/", url)
        base, got = urlsplit(self.base_url), urlsplit(full)
        try:
            same = (got.scheme, got.hostname, got.port or _DEFAULT_PORT.get(got.scheme)) == (
                base.scheme, base.hostname, base.port or _DEFAULT_PORT.get(base.scheme))
        except ValueError:  # a port that is not a number
            same = False
        under = (got.path + "/").startswith(base.path.rstrip("/") + "/")
        if not same or not under or got.username or got.password:
            raise HarnessProtocolError(f"streamUrl {url[:200]!r} is not on the Harness at {self.base_url}: "
                                       "refused (the token is sent to the Harness only)")
        return full

    def _timer_thread(self) -> Timers:
        if self._timers is not None:
            return self._timers
        with self._timers_lock:
            if self._own_timers is None:
                self._own_timers = Timers(self.clock, name="jr2-harness-timers")
            return self._own_timers

    def _cuttable(self, cut: Cut | None) -> Cut:
        """The request's Cut (the caller's, or its own), known to `close()` until the request and the reading
        of its answer are over (the answer's connection holds it)."""
        cut = cut or Cut()
        with self._calls_lock:
            self._cuts.add(cut)
        if self._closed.is_set():  # closed before it was known: close() did not see it
            cut.fire()
        return cut

    def _pause(self, seconds: float, what: str) -> None:
        """Wait before a retry; a client closed meanwhile (its seat stopped) retries nothing more."""
        if not self._closed.is_set():
            (self._wait or self._wait_on_clock)(seconds)
        if self._closed.is_set():
            raise HarnessUnreachable(f"{what}: the client was closed before its retry", reached=False)

    def _wait_on_clock(self, seconds: float) -> None:
        """Wait `seconds` on the client's clock (a VirtualClock's wait ends when a test advances it)."""
        done = threading.Event()
        with self._calls_lock:
            self._waits.add(done)  # close() sets it: the wait ends at once
        if self._closed.is_set():
            done.set()
        timers = self._timer_thread()
        handle = timers.schedule(self.clock.monotonic() + seconds, done.set)
        try:
            while not done.wait(0.25) and timers.alive:
                pass
        finally:
            timers.cancel(handle)
            with self._calls_lock:
                self._waits.discard(done)


class HarnessClients:
    """One `HarnessClient` per Harness, shared by every seat that talks to it (on `session` when given)."""

    def __init__(self, *, clock: Clock | None = None, timers: Timers | None = None,
                 session: requests.Session | None = None) -> None:
        self.clock = clock or SystemClock()
        self.timers = timers
        self.session = session
        self._lock = threading.Lock()
        self._clients: dict[str, HarnessClient] = {}
        self._closed = False

    def get(self, endpoint: str, token: str) -> HarnessClient:
        key = endpoint.rstrip("/")
        with self._lock:
            if self._closed:
                raise RuntimeError("HarnessClients is closed")
            client = self._clients.get(key)
            if client is not None and client.holds_token(token):
                return client
            if client is not None:
                client.close()  # the Sandbox behind the endpoint changed its token: a new client
            client = self._clients[key] = HarnessClient(key, token, clock=self.clock, timers=self.timers,
                                                        session=self.session)
            return client

    def close(self) -> None:
        with self._lock:
            self._closed = True
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()


_DEFAULT_PORT = {"http": 80, "https": 443}


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
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError) as e:
        raise HarnessUnreachable(f"reading the answer: {one_line(e)}", reached=True) from e


def _let_go(resp: requests.Response) -> None:
    """Done with an answer whose body is not wanted (a 204, a 503 or 409 sent again): read what little it
    has, so its connection goes back to the pool. Closing it unread would close the connection, and a seat's
    every idle long-poll (a 204) would then open a new one."""
    with contextlib.suppress(HarnessProtocolError, HarnessUnreachable):
        _read_capped(resp, 64 * 1024, strict=False)


def _seg(text: str) -> str:
    return quote(text, safe="")


def admission_body(admission: Admission) -> dict[str, Any]:
    """The admission's JSON body (CONTRACTS.md §3): `cwd`, `notices` and `kept` only when said."""
    a, d = admission, admission.definition
    said = {"cwd": a.cwd, "notices": [n.wire() for n in a.notices] or None, "kept": a.kept or None}
    return {"definition": {"agent": d.agent, "instructions": d.instructions, "access": d.access,
                           "menu": [item if isinstance(item, str) else dict(item) for item in d.menu]},
            "message": a.message, "allowed": list(a.allowed), **{k: v for k, v in said.items() if v is not None}}
