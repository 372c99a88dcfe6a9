"""Errors say whose fault they are (DESIGN.md, after h11's Local/RemoteProtocolError).

- `ClusterAccessError`: where the cluster is could not be decided from the user's environment.
- `KubeError`: the API server answered, and the answer was a failure `Status`.
- `KubeTransportError`: the call never got an answer (connect, TLS, reset, timeout).
- `KubeProtocolError`: the server answered something that is not the Kubernetes protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


class Jr2Error(Exception):
    """Every error this package raises on purpose."""


class Unavailable(Jr2Error):
    """The orchestrator cannot take this request now — its store cannot write, or it is stopping — and says
    why; the API answers 503. Nothing was accepted."""


class ClusterAccessError(Jr2Error):
    """No usable cluster access; `probed` lists every variable and path that was looked at."""

    def __init__(self, message: str, probed: Sequence[str] = ()) -> None:
        self.probed = tuple(probed)
        if self.probed:
            message = message + "; probed: " + ", ".join(self.probed)
        super().__init__(message)


class KubeconfigError(ClusterAccessError):
    """A kubeconfig file that cannot be used, naming the file and the key at fault."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.path = path
        self.key = key
        super().__init__(f"kubeconfig {path}: {key}: {problem}")


@dataclass(frozen=True)
class ApiStatus:
    """A Kubernetes `Status` object, as an error answer or an in-stream ERROR frame carries it."""

    code: int | None
    reason: str
    message: str

    @classmethod
    def from_object(cls, obj: object) -> ApiStatus | None:
        """The Status inside `obj`, or None when `obj` is not shaped like one."""
        if not isinstance(obj, dict):
            return None
        code = obj.get("code")
        reason = obj.get("reason", "")
        message = obj.get("message", "")
        if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
            return None
        if not isinstance(reason, str) or not isinstance(message, str):
            return None
        if code is None and not reason and not message:
            return None
        return cls(code=code, reason=reason, message=message)


class KubeError(Jr2Error):
    """The API server's failure answer: HTTP status, the Status reason and its message."""

    def __init__(self, status: int, reason: str, message: str, *, method: str = "", path: str = "",
                 retry_after: float | None = None) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.method = method
        self.path = path
        self.retry_after = retry_after
        where = f" ({method} {path})" if method else ""
        super().__init__(f"{status} {reason}: {message}{where}")


TransportKind = Literal["connect", "read-timeout", "connection", "tls"]
"""Why a call got no answer: the connection was never made, a read waited too long, an open connection
broke, or the TLS handshake failed (urllib3 v2 names the same four by exception class)."""


class KubeTransportError(Jr2Error):
    """No answer: `kind` says which way the call failed (`TransportKind`)."""

    def __init__(self, kind: TransportKind, detail: str, *, method: str = "", path: str = "") -> None:
        self.kind: TransportKind = kind
        self.detail = detail
        self.method = method
        self.path = path
        where = f" ({method} {path})" if method else ""
        super().__init__(f"transport {kind}: {detail}{where}")


class KubeProtocolError(Jr2Error):
    """An answer that is not Kubernetes: not JSON, not the expected shape, or too large to hold."""


# Everything a call to the API server can raise that is not our bug: an answer, no answer, a wrong answer,
# or no way to ask (the token file gone).
KUBE_ERRORS = (KubeError, KubeTransportError, KubeProtocolError, ClusterAccessError)


ELISION = " … "


def one_line(what: object, cap: int = 300) -> str:
    """An error's words on one line, capped: what a log line or a one-line CLI error shows:
    a chained error names its cause last (urllib3's `(Caused by …: [Errno 111] Connection refused)`), so a
    longer text loses words from its middle, never its end, and is cut between words, never inside one."""
    text = " ".join(str(what).split())
    if len(text) <= cap:
        return text
    head_room = cap // 3
    tail_room = cap - head_room - len(ELISION)
    head, tail = text[:head_room], text[-tail_room:]
    if " " in text[head_room - 1:head_room + 1]:  # the cut already falls between words
        head = head.rstrip()
    elif " " in head:
        head = head.rsplit(" ", 1)[0]
    if text[-tail_room - 1] != " " and " " in tail:
        tail = tail.split(" ", 1)[1]
    return f"{head}{ELISION}{tail.lstrip()}"
