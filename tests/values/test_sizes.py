"""jr2's size notation (`1.9Gi`, `512Mi`): the only form a kill's or a notice's sizes may take."""

from __future__ import annotations

import pytest

from jr2_actors.values.quantity import format_size, is_size


@pytest.mark.parametrize("n_bytes", [0, 2**20, 512 * 2**20, 1023 * 2**20, 2**30 - 1, 2**30, int(1.9 * 2**30),
                                     2 * 2**30, 1500 * 2**30, 999_999 * 2**30])
def test_every_size_format_size_writes_is_a_size(n_bytes: int) -> None:
    assert is_size(format_size(n_bytes)), format_size(n_bytes)


@pytest.mark.parametrize("text", ["1.9Gi", "2Gi", "512Mi", "0Mi", "1023Mi", "999999.9Gi", "1.0Gi"])
def test_sizes(text: str) -> None:
    assert is_size(text)


@pytest.mark.parametrize("text", [
    "2147483648", "0", "1", "",  # a bare number is not a size: its unit is anyone's guess
    "1024Mi", "0.5Gi", "0Gi", "01Gi", "0512Mi", "1.95Gi", "1.Gi", ".5Gi", "-1Gi", "+1Gi",  # not the guard's form
    "1Ki", "1Ti", "1G", "1gi", "1.9 Gi", " 1.9Gi", "1.9Gi\n", "1.9Gi; rm -rf /", "1e3Mi", "1_000Mi",
    "9999999Gi", "1" * 100 + "Mi", "１Gi",  # long, or a digit that is not ASCII
    None, 512, 1.9, ["1Gi"], {"size": "1Gi"}, b"1Gi",
])
def test_not_sizes(text: object) -> None:
    assert not is_size(text)
