"""bench.scale's sizes (bench/scale.py): filled in increasing order, the first large
enough for the split's committers; --quick is the smoke run's small sizes. No Ray."""

from __future__ import annotations

import pytest

from bench.scale import parse_args


def test_sizes_are_filled_in_turn_and_quick_is_small() -> None:
    assert parse_args(["--groups", "10000,100000,300000"]).sizes == [10_000, 100_000, 300_000]
    quick = parse_args(["--quick"])
    assert quick.sizes[-1] <= 2_000 and quick.committers <= quick.sizes[0]


@pytest.mark.parametrize("groups", ["100000,10000", "10000,10000", "100"])
def test_sizes_out_of_order_or_below_the_committers_are_refused(groups: str) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--groups", groups, "--committers", "200"])
