"""Sandbox names never collide (issue 7, 9b): the slugs are lossy, the hash covers the whole run id and
Workspace path in 48 bits. Two runs that share a prefix once shared a name (8 characters of the run id,
24 bits of hash): `jr2-0-0b0-00694` and `jr2-0-0b0-01772` both became `ws-jr2-0-0b-f-1-c2e4af`."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from jr2_actors.watch.identity import NAME_HASH_HEX, sandbox_name

DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def test_the_runs_that_collided_before_keep_distinct_names() -> None:
    assert sandbox_name("jr2-0-0b0-00694", "F-1") != sandbox_name("jr2-0-0b0-01772", "F-1")


def test_the_hash_carries_at_least_48_bits() -> None:
    assert NAME_HASH_HEX * 4 >= 48
    assert re.search(r"-[0-9a-f]{12}$", sandbox_name("run", "F-1"))


def test_a_thousand_runs_sharing_a_long_prefix_share_no_name() -> None:
    names = {sandbox_name(f"jr2-0-0b0-{i:05d}", path) for i in range(1000) for path in ("F-1", "F-1/sub", "")}
    assert len(names) == 3000


@settings(max_examples=300)
@given(prefix=st.text(min_size=0, max_size=70), suffixes=st.sets(st.text(min_size=1, max_size=8), min_size=2,
                                                                  max_size=20),
       path=st.text(max_size=80))
def test_run_ids_with_a_shared_prefix_get_distinct_valid_names(prefix: str, suffixes: set[str], path: str) -> None:
    names = [sandbox_name(prefix + s, path) for s in suffixes]
    assert len(set(names)) == len(names)
    for name in names:
        assert len(name) <= 63 and DNS_1123_LABEL.match(name), name
