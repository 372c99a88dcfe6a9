"""A request head's framing, read strictly before any worker sees it (RFC 9112 §6): where the head ends,
one `Content-Length` of ASCII digits, no chunked body, no folded lines, a declared body over the cap
refused before a byte of it is read. Pure: bytes in, an answer or `Refused` out."""

from __future__ import annotations

import re

_DIGITS = re.compile(rb"[0-9]+")


class Refused(Exception):
    """The gate's answer to a request it will not hand to a worker."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.status = status


def head_end(head: bytes) -> tuple[int, int]:
    """Where the head's blank line begins, and the head's size through it; (-1, 0) while incomplete.
    A bare LF ends it too: cheroot then answers that head's missing CRs with a 400."""
    crlf, lf = head.find(b"\r\n\r\n"), head.find(b"\n\n")
    if crlf >= 0 and (lf < 0 or crlf <= lf):
        return crlf, crlf + 4
    if lf >= 0:
        return lf, lf + 2
    return -1, 0


def check_framing(head: bytes, max_body: int) -> None:
    """The body's framing, read strictly (RFC 9112 §6): one `Content-Length` of ASCII digits, no chunked
    body (a body needs its length), no line folds; a length over the cap is a 413 before the body is read."""
    lengths: list[bytes] = []
    chunked = False
    for line in head.split(b"\n")[1:]:
        line = line.rstrip(b"\r")
        if line[:1] in (b" ", b"\t"):
            raise Refused(400, "a header is folded over lines (obsolete line folding is refused)")
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            lengths.append(value.strip())
        elif name == b"transfer-encoding":
            chunked = True
    if chunked:
        if lengths:
            raise Refused(400, "a request has a Content-Length or a Transfer-Encoding, not both")
        raise Refused(411, "a body needs a Content-Length (a chunked body is refused)")
    if not lengths:
        return
    if len(lengths) > 1:
        raise Refused(400, "a request has one Content-Length")
    if not _DIGITS.fullmatch(lengths[0]):
        raise Refused(400, "Content-Length must be a number of bytes (ASCII digits)")
    if len(lengths[0]) > 18 or int(lengths[0]) > max_body:
        raise Refused(413, f"the body is over {max_body} bytes")
