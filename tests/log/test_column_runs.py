"""The int columns of the columnar decoder (log/column_runs.py): exact int64s or PayloadError."""

from __future__ import annotations

from typing import Any

import pytest

from log.column_runs import ints_array
from log.columns import PayloadError


@pytest.mark.parametrize(
    "values",
    [[], [0, 1, 2**63 - 1], [-1, 7, -(2**63)], [5, -1], [True, False, 3], list(range(-3, 1000))],
)
def test_ints_convert_exactly_signed_or_not(values: list[Any]) -> None:
    assert ints_array(values).tolist() == [int(value) for value in values]


@pytest.mark.parametrize(
    "values", [[2**63], [1, 2**64], [-1, 2**63], [-(2**63) - 1], [1.0], [2, 1.5], ["1"], [None], [b"\x01"]]
)
def test_what_is_not_an_int64_is_refused(values: list[Any]) -> None:
    with pytest.raises(PayloadError, match="int column"):
        ints_array(values)
