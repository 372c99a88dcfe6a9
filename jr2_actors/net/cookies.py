"""`NoCookies`: the cookie jar of every session the orchestrator calls out on (Kubernetes, the Harnesses).

Neither peer sets a cookie in its contract, and a session shared by every Sandbox's Harness must not carry
one Harness's cookie to another. It also removes a lock: requests extracts each answer's cookies into the
session's jar under the jar's one `RLock`, so every answer of every thread passed through it. With
thousands of seats long-polling on the process's one Harness session, a thread woken to take that lock then
waited for the interpreter lock while holding it, and the answers queued behind it: 4,711 of 5,000 seats'
readers stood in `extract_cookies` while serve held 5,000 live runs.
"""

from __future__ import annotations

from typing import Any

from requests.cookies import RequestsCookieJar


class NoCookies(RequestsCookieJar):
    """A jar that keeps nothing and takes no lock: an answer's `Set-Cookie` is dropped, so no request sends
    one. Setting a cookie on it by hand is dropped too."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def set_cookie(self, cookie: Any, *args: Any, **kwargs: Any) -> None:
        return None

    def copy(self) -> NoCookies:
        return NoCookies()
