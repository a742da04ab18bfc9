"""The consumer pool's scaling decision (coordinator/pool_policy.py), with a manual clock."""

from __future__ import annotations

import pytest

from coordinator.pool_policy import KedaPolicy, LagPolicy, LagRow, Target, watch_terms


def rows(lags: list[int], committed: list[int] | None = None) -> list[LagRow]:
    committed = committed or [0] * len(lags)
    return [("t", p, committed[p], lag, lag * 10) for p, lag in enumerate(lags)]


def policy(**options: object) -> LagPolicy:
    base: dict[str, object] = {
        "target": Target(messages=100), "min_members": 1, "max_members": 8, "partitions": 8,
        "cooldown_ms": 10_000, "scale_up_interval_ms": 1_000, "stuck_after_ms": 5_000,
    }
    return LagPolicy(**{**base, **options})  # type: ignore[arg-type]


def test_scales_up_at_once_when_over_target_then_waits_an_interval() -> None:
    p = policy()
    assert p.decide(rows([10] * 8), 1, 0).members == 1
    assert p.decide(rows([20] * 8, [1] * 8), 1, 100).members == 2  # 160 > 100: at once
    assert p.decide(rows([30] * 8, [2] * 8), 2, 200).members == 2  # within the interval
    assert p.decide(rows([40] * 8, [3] * 8), 2, 1_200).members == 3  # not shrinking: one more


def test_waits_while_the_lag_shrinks_after_a_step() -> None:
    p = policy()
    assert p.decide(rows([50] * 8), 1, 0).members == 2
    assert p.decide(rows([40] * 8, [1] * 8), 2, 1_500).members == 2  # 320 < 400: catching up
    assert p.decide(rows([39] * 8, [2] * 8), 2, 4_000).members == 3  # four intervals: add anyway


def test_capped_by_lagging_partitions_unless_asked() -> None:
    lags = [500, 500, 0, 0, 0, 0, 0, 0]
    p = policy()
    members = 1
    for t in range(0, 10_000, 1_000):
        members = p.decide(rows(lags, [t] * 8), members, t).members
    assert members == 2
    p = policy(limit_to_lagging=False)
    members = 1
    for t in range(0, 10_000, 1_000):
        members = p.decide(rows(lags, [t] * 8), members, t).members
    assert members == 8


def test_capped_by_partitions_and_max_members() -> None:
    p = policy(max_members=20, partitions=3)
    assert p.ceiling == 3
    assert p.decide(rows([500] * 3), 5, 0).members == 3  # above the cap: back to it
    p = policy(max_members=2)
    assert p.decide(rows([500] * 8), 2, 0).members == 2


def test_scales_down_one_member_per_cooldown_under_target() -> None:
    p = policy(min_members=1)
    assert p.decide(rows([500] * 8), 3, 0).members == 4
    assert p.decide(rows([0] * 8, [1] * 8), 4, 1_000).members == 4
    assert p.decide(rows([0] * 8, [1] * 8), 4, 9_999).members == 4
    assert p.decide(rows([0] * 8, [1] * 8), 4, 11_000).members == 3
    assert p.decide(rows([0] * 8, [1] * 8), 3, 15_000).members == 3  # a new cooldown
    assert p.decide(rows([0] * 8, [1] * 8), 3, 21_000).members == 2


def test_over_target_restarts_the_cooldown() -> None:
    p = policy(max_members=4)
    assert p.decide(rows([500] * 8), 4, 0).members == 4  # at the cap
    assert p.decide(rows([500] * 8, [1] * 8), 4, 8_000).members == 4
    assert p.decide(rows([0] * 8, [2] * 8), 4, 12_000).members == 4  # 4 s since over target
    assert p.decide(rows([0] * 8, [2] * 8), 4, 18_000).members == 3


def test_stuck_partitions_are_left_out() -> None:
    p = policy(stuck_after_ms=5_000)
    lags = [1_000, 10, 10, 0, 0, 0, 0, 0]
    decision = p.decide(rows(lags, [7, 0, 0, 0, 0, 0, 0, 0]), 2, 0)
    assert decision.members == 3 and decision.stuck == ()
    # Partition 0 never commits again while its lag stays: after 5 s it no longer counts.
    decision = p.decide(rows(lags, [7, 1, 1, 0, 0, 0, 0, 0]), 3, 5_000)
    assert decision.stuck == (("t", 0),)
    assert decision.lag == 20 and decision.lagging == 2
    assert p.decide(rows(lags, [7, 2, 2, 0, 0, 0, 0, 0]), 3, 16_000).members == 2
    # It moves again: it counts again.
    assert p.decide(rows(lags, [8, 3, 3, 0, 0, 0, 0, 0]), 2, 17_000).stuck == ()


def test_unknown_lag_changes_nothing_and_bounds_hold() -> None:
    p = policy(min_members=2)
    assert p.decide([("t", 0, 5, None, None)], 2, 0).members == 2
    assert p.decide([], 1, 0).members == 2


def test_target_in_seconds() -> None:
    p = policy(target=Target(ms=1_000))
    assert p.decide(rows([50] * 8), 1, 0).members == 1  # 500 ms
    assert p.decide(rows([150] * 8, [1] * 8), 1, 100).members == 2  # 1.5 s


@pytest.mark.parametrize(
    "options",
    [{"min_members": -1}, {"max_members": 0, "min_members": 0}, {"min_members": 3, "max_members": 2}],
)
def test_bad_bounds_are_refused(options: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        policy(**options)


def test_bad_targets_are_refused() -> None:
    for bad in ({}, {"messages": 1, "ms": 1}, {"messages": -1}, {"ms": 1.5}):
        with pytest.raises(ValueError):
            Target(**bad)  # type: ignore[arg-type]


def test_keda_polls_and_holds_the_scale_down_window() -> None:
    k = KedaPolicy(Target(messages=100), 1, 8, 8, poll_interval_ms=3_000, stabilization_ms=30_000)
    assert k.decide(rows([10] * 8), 1, 0).members == 1
    assert k.decide(rows([100] * 8), 1, 1_000).members == 1  # between polls
    assert k.decide(rows([100] * 8), 1, 3_000).members == 8  # ceil(800 / 100)
    assert k.decide(rows([0] * 8), 8, 6_000).members == 8  # the window remembers 8
    assert k.decide(rows([0] * 8), 8, 33_000).members == 1  # 30 s after the want of 8


def test_the_next_check_is_when_a_wait_ends_or_the_keep_alive() -> None:
    p = policy(keep_alive_ms=10_000, stuck_after_ms=60_000)
    assert p.next_check_ms(0) == 10_000, "nothing decided yet: the keep-alive"
    assert p.decide(rows([500] * 8), 1, 0).members == 2
    assert p.next_check_ms(0) == 1_000, "the scale-up interval ends"
    assert p.decide(rows([400] * 8, [1] * 8), 2, 1_000).members == 2, "shrinking: waits"
    assert p.next_check_ms(1_000) == 4_000, "four intervals after the step: adds anyway"
    assert p.decide(rows([0] * 8, [2] * 8), 2, 4_500).members == 2
    assert p.next_check_ms(4_500) == 11_000, "the cooldown ends 10 s after the last time over target"
    assert p.decide(rows([0] * 8, [2] * 8), 2, 10_999).members == 2
    assert p.decide(rows([0] * 8, [2] * 8), 2, 11_000).members == 1


def test_the_next_check_includes_a_partition_turning_stuck() -> None:
    p = policy(keep_alive_ms=60_000, stuck_after_ms=5_000, min_members=2, max_members=2)
    p.decide(rows([50, 0, 0, 0, 0, 0, 0, 0]), 2, 1_000)
    assert p.next_check_ms(1_000) == 6_000
    p.decide(rows([50, 0, 0, 0, 0, 0, 0, 0]), 2, 6_000)
    assert p.next_check_ms(6_000) == 66_000, "stuck already: nothing more to wait for"


def test_watch_terms_and_keda_polls() -> None:
    assert watch_terms(Target(messages=400)) == (400, None, 200)
    assert watch_terms(Target(ms=1_000)) == (None, 1_000, 500)
    assert watch_terms(Target(messages=0)) == (0, None, 1)
    k = KedaPolicy(Target(messages=100), 1, 8, 8, poll_interval_ms=3_000)
    assert not k.watched and LagPolicy.watched
    assert k.next_check_ms(500) == 500
    k.decide(rows([10] * 8), 1, 500)
    assert k.next_check_ms(600) == 3_500
