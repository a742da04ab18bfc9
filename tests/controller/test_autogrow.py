"""The --auto-repartition policy (actors/controller/autogrow.py): sustained mean load past the
planned rate grows the count, doubled within max_partitions; bursts, unfit partitions and a
repartition under way do not."""

from __future__ import annotations

from actors.controller.autogrow import AutoGrow, grown_count
from actors.core.capacity import PLANNED_REQUESTS_PER_S


def rows(share: float, count: int = 4) -> list[dict[str, float]]:
    return [{"partition": p, "requests_per_s": share * PLANNED_REQUESTS_PER_S} for p in range(count)]


def test_sustained_load_grows_the_count_once_its_window_passed() -> None:
    policy = AutoGrow(after_s=60, max_partitions=64)
    assert policy.decide(0, 4, rows(1.2), [], False) is None
    assert policy.decide(59, 4, rows(1.2), [], False) is None
    assert policy.decide(60, 4, rows(1.2), [], False) == 8
    assert policy.decide(61, 8, rows(1.2, 8), [], False) is None, "the window starts again after a growth"


def test_a_dip_below_the_planned_rate_starts_the_window_again() -> None:
    policy = AutoGrow(after_s=60, max_partitions=64)
    policy.decide(0, 4, rows(1.5), [], False)
    policy.decide(40, 4, rows(0.9), [], False)
    assert policy.decide(70, 4, rows(1.5), [], False) is None
    assert policy.decide(130, 4, rows(1.5), [], False) == 8


def test_one_hot_partition_does_not_grow_the_count_the_mean_does() -> None:
    policy = AutoGrow(after_s=0, max_partitions=64)
    one_hot = rows(0.2) + [{"partition": 4, "requests_per_s": 3.0 * PLANNED_REQUESTS_PER_S}]
    assert policy.decide(0, 5, one_hot, [], False) is None


def test_never_while_a_partition_is_unfit_a_repartition_runs_or_figures_are_missing() -> None:
    policy = AutoGrow(after_s=0, max_partitions=64)
    assert policy.decide(0, 4, rows(2.0), ["partition 1 is HELD"], False) is None
    assert policy.decide(0, 4, rows(2.0), [], True) is None
    assert policy.decide(0, 4, rows(2.0)[:3], [], False) is None, "a leader without figures"


def test_never_past_max_partitions() -> None:
    assert grown_count(16, 64) == 32 and grown_count(32, 64) == 64 and grown_count(48, 64) is None
    assert AutoGrow(after_s=0, max_partitions=6).decide(0, 4, rows(2.0), [], False) is None
