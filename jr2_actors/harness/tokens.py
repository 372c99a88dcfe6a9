"""Harness bearer tokens (CONTRACTS.md §3, ADR-0058).

The Orchestrator derives `t = base64url(HMAC-SHA256(key, "harness:" + sandboxName))` and sends it;
the Harness holds only `JR2_HARNESS_TOKEN_SHA256 = base64url(sha256(t))`, so a leaked Sandbox spec
does not leak a token. base64url is written without padding.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

DIGEST_ENV = "JR2_HARNESS_TOKEN_SHA256"
INSTANCE_HARNESS = "jr2-instance-harness"  # the placement name the Instance Harness's token is derived for


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def harness_token(key: bytes, sandbox_name: str) -> str:
    return _b64url(hmac.new(key, f"harness:{sandbox_name}".encode(), hashlib.sha256).digest())


def token_digest(token: str) -> str:
    return _b64url(hashlib.sha256(token.encode()).digest())


def verify_bearer(authorization: str, digest: str) -> bool:
    """Does `authorization` carry a bearer token whose digest is `digest`? Compared in constant time."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token or not digest:
        return False
    return hmac.compare_digest(token_digest(token.strip()).encode(), digest.encode())
