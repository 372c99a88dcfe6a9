"""Harness tokens (digest only on the Harness side) and the typed Sandbox view over recorded statuses."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from jr2_actors.harness.tokens import harness_token, token_digest, verify_bearer
from jr2_actors.values.quantity import QuantityError, format_size, is_size, parse_duration, parse_quantity
from jr2_actors.watch.sandbox import view
from tests.support.sandboxes import fixture


def test_token_is_hmac_of_the_sandbox_name_and_the_digest_its_sha256() -> None:
    key = b"k" * 32
    token = harness_token(key, "ws-a")
    expected = base64.urlsafe_b64encode(hmac.new(key, b"harness:ws-a", hashlib.sha256).digest()).rstrip(b"=")
    assert token == expected.decode()
    assert len(token_digest(token)) == 43  # as the recorded Sandbox env holds it
    assert verify_bearer(f"Bearer {token}", token_digest(token))
    assert not verify_bearer(f"Bearer {harness_token(key, 'ws-b')}", token_digest(token))
    assert not verify_bearer(token, token_digest(token))
    assert not verify_bearer("Bearer ", token_digest(token))
    assert not verify_bearer(f"Bearer {token}", "")


@pytest.mark.parametrize(
    ("name", "phase", "sched", "waiting", "terminated"),
    [("sandbox-ready-after-oom.json", "Ready", "Scheduled", "", ("OOMKilled", 137)),
     ("sandbox-unschedulable.json", "Pending", "Unschedulable", "", None),
     ("sandbox-quota-exceeded.json", "Pending", "QuotaExceeded", "", None),
     ("sandbox-crashloop.json", "Pending", "Scheduled", "CrashLoopBackOff", ("Error", 1)),
     ("sandbox-root-image.json", "Pending", "Scheduled", "CreateContainerConfigError", None),
     ("sandbox-lost-evicted.json", "Lost", "Scheduled", "", None)],
)
def test_recorded_statuses_read_as_typed_views(name: str, phase: str, sched: str, waiting: str,
                                               terminated: tuple[str, int] | None) -> None:
    v = view(fixture(name))
    assert (v.phase, v.scheduling_reason, v.waiting_reason) == (phase, sched, waiting)
    got = (v.last_terminated.reason, v.last_terminated.exit_code) if v.last_terminated else None
    assert got == terminated
    assert v.terminal == (phase == "Lost")


def test_quota_refusal_has_no_pod_uid_and_keeps_the_api_servers_words() -> None:
    v = view(fixture("sandbox-quota-exceeded.json"))
    assert v.pod_uid == ""
    sched = v.condition("Scheduled")
    assert sched is not None and "exceeded quota" in sched.message


def test_a_malformed_status_reads_as_absent_not_a_crash() -> None:
    v = view({"metadata": {"name": 5}, "status": {"phase": ["x"], "conditions": "no", "harness": [],
                                                  "waiting": [1, None, {"reason": 7}]}})
    assert (v.name, v.phase, v.conditions, v.last_terminated) == ("", "", (), None)
    assert v.waiting_reason == ""


@pytest.mark.parametrize(("text", "value"), [("500m", 0.5), ("1", 1), ("2Gi", 2 * 2**30), ("1984Mi", 1984 * 2**20),
                                             ("1.5", 1.5), ("1k", 1000)])
def test_quantities(text: str, value: float) -> None:
    assert float(parse_quantity(text)) == value


@pytest.mark.parametrize("bad", ["", "lots", "1Zi", "2Gi; rm -rf /", "1e3", "x" * 100, None, "--1"])
def test_bad_quantities_are_refused(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_durations_and_sizes() -> None:
    assert parse_duration("30m") == 1800
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    for bad in ("", "30", "m30", "1d", "30m!"):
        with pytest.raises(QuantityError):
            parse_duration(bad)
    assert format_size(int(1.9 * 2**30)) == "1.9Gi"
    assert format_size(2 * 2**30) == "2Gi"
    assert format_size(512 * 2**20) == "512Mi"
    assert is_size("1.9Gi") and is_size("512Mi")
    assert not is_size("lots") and not is_size("2Gi; rm -rf /") and not is_size("1.95Gi")


def test_rfc3339_round_trip_and_refusals() -> None:
    from jr2_actors.values.timefmt import parse_rfc3339, rfc3339, rfc3339_ms

    assert rfc3339(1_790_000_000.0) == "2026-09-21T14:13:20Z"
    assert rfc3339_ms(1_790_000_000.25) == "2026-09-21T14:13:20.250Z"
    assert parse_rfc3339(rfc3339_ms(1_790_000_000.25)) == 1_790_000_000.25
    assert parse_rfc3339("2026-09-21T14:13:20") == 1_790_000_000.0  # no zone: read as UTC
    for bad in ("yesterday", "2026-09-21", "", None, 7, "2026-09-21T14:13:20Z" + "0" * 60):
        assert parse_rfc3339(bad) is None
