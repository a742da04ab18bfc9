"""The consumer pool's scaling decision (coordinator/pool_policy.py), with a manual clock."""

from __future__ import annotations

import pytest

from coordinator.pool_policy import KedaPolicy, LagPolicy, LagRow, Target, watch_terms


def rows(lags: list[int], committed: list[int] | None = None) -> list[LagRow]:
    committed = committed or [0] * len(lags)
    return [("t", p, committed[p], lag, lag * 10) for p, lag in enumerate(lags)]


def policy(**options: object) -> LagPolicy:
    """A policy that never measures rates (a span of a minute needed) unless told otherwise:
    the tests of sizing say `min_rate_span_ms`."""
    base: dict[str, object] = {
        "target": Target(messages=100), "min_members": 1, "max_members": 8, "partitions": 8,
        "cooldown_ms": 10_000, "scale_up_interval_ms": 1_000, "stuck_after_ms": 5_000,
        "min_rate_span_ms": 60_000, "rate_window_ms": 120_000,
    }
    return LagPolicy(**{**base, **options})  # type: ignore[arg-type]


def flow(consumed: int, lag: int, parts: int = 8) -> list[LagRow]:
    """`consumed` committed offsets and `lag` in all, spread evenly over `parts` partitions."""
    return rows([lag // parts] * parts, [consumed // parts] * parts)


def measured(**options: object) -> LagPolicy:
    base: dict[str, object] = {
        "target": Target(messages=400), "min_rate_span_ms": 1_000, "rate_window_ms": 5_000,
        "catch_up_ms": 30_000, "start_timeout_ms": 10_000, "scale_up_interval_ms": 2_000,
    }
    return policy(**{**base, **options})


def test_scales_up_at_once_when_over_target_then_waits_an_interval() -> None:
    p = policy()
    assert p.decide(rows([10] * 8), 1, 0).members == 1
    assert p.decide(rows([20] * 8, [1] * 8), 1, 100).members == 2  # 160 > 100: at once
    assert p.decide(rows([30] * 8, [2] * 8), 2, 200).members == 2  # within the interval


def test_unmeasured_it_waits_for_a_measurement_four_intervals_then_steps() -> None:
    p = policy()
    assert p.decide(rows([50] * 8), 1, 0).members == 2
    decision = p.decide(rows([60] * 8, [1] * 8), 2, 1_500)
    assert decision.members == 2 and "measuring" in decision.reason
    assert p.decide(rows([70] * 8, [2] * 8), 2, 4_000).members == 3  # four intervals: one more


def test_a_step_is_sized_from_the_lag_growth_and_the_throughput_per_member() -> None:
    p = measured()
    # One member consumes 500/s; the lag grows 700/s: the producers write 1,200/s.
    assert p.decide(flow(0, 200), 1, 0).members == 1
    decision = p.decide(flow(500, 900), 1, 1_000)
    # ceil((1,200 + 500 over the target / 30 s) / 500) = 3, at once: not 2, then 3, then more.
    assert decision.members == 3 and "sized" in decision.reason, decision


def test_no_step_while_a_scale_up_is_starting_pending_members_count() -> None:
    p = measured()
    p.decide(flow(0, 200), 1, 0)
    assert p.decide(flow(500, 900), 1, 1_000).members == 3
    # The two new members are starting (pending): the lag keeps growing at the one member's
    # pace, past the interval, and the pool waits for them rather than adding.
    for t in range(1_500, 6_000, 500):
        growth = 700 * (t - 1_000) // 1_000
        decision = p.decide(flow(500 * t // 1_000, 900 + growth), 3, t, pending=2)
        assert decision.members == 3 and "starting" in decision.reason, (t, decision)
    # They commit: 3 x 500/s against 1,200/s, the lag falls. Just started: measuring.
    assert p.decide(flow(3_000, 4_000), 3, 6_000).members == 3
    decision = p.decide(flow(4_500, 3_700), 3, 7_000)
    assert decision.members == 3 and "falls fast enough" in decision.reason, decision


def test_a_pending_member_that_never_starts_stops_holding_after_the_start_timeout_then_one_more() -> None:
    p = measured(start_timeout_ms=4_000)
    p.decide(flow(0, 200), 1, 0)
    assert p.decide(flow(500, 900), 1, 1_000).members == 3
    assert p.decide(flow(2_000, 3_000), 3, 4_000, pending=1).members == 3
    # Still pending 4 s after the step: it no longer holds the decision. The two committing
    # members consume 500/s each while the lag grows 200/s: producers 1,200/s, which 3
    # members would carry: the policy waits for the lag to fall, four intervals from the step.
    p.decide(flow(2_500, 3_100), 3, 4_500, pending=1)
    decision = p.decide(flow(3_500, 3_300), 3, 5_500, pending=1)
    assert decision.members == 3 and "waiting for the lag to fall" in decision.reason, decision
    p.decide(flow(5_000, 3_600), 3, 7_000, pending=1)
    decision = p.decide(flow(7_000, 4_000), 3, 9_000, pending=1)
    assert decision.members == 4 and "not falling" in decision.reason, decision


def test_a_lag_falling_too_slowly_to_catch_up_in_time_adds_members() -> None:
    p = measured(catch_up_ms=30_000)
    assert p.decide(flow(0, 30_000), 1, 0).members == 2  # nothing measured yet: one step
    assert "measuring" in p.decide(flow(0, 30_000), 2, 2_100).reason  # the 2 just started
    # 2 members consume 1,000/s and the lag falls 10/s: 29,590 over the target would take
    # 50 min. To drain it in 30 s: ceil((990 + 986) / 500) = 4.
    decision = p.decide(flow(1_000, 29_990), 2, 3_100)
    assert decision.members == 4, decision
    # Falling fast enough (the 4 drain 1,000/s): no change.
    p.decide(flow(1_000, 29_990), 4, 5_100)
    decision = p.decide(flow(3_000, 28_990), 4, 6_100)
    assert (decision.members, decision.reason) == (4, "over target, the lag falls fast enough")


def test_sizing_for_a_target_in_seconds_drains_its_share_of_the_lag() -> None:
    p = measured(target=Target(ms=1_000), catch_up_ms=10_000)

    def at(consumed: int, lag: int, lag_ms: int) -> list[LagRow]:
        return [("t", p, consumed // 8, lag // 8, lag_ms) for p in range(8)]

    p.decide(at(0, 10_000, 500), 1, 0)
    # Lag 10,000 at 5 s, 4 s over the 1 s target: 8,000 of it to drain in 10 s (800/s),
    # plus 500/s produced (consumed 500/s, lag flat): ceil(1,300 / 500) = 3.
    decision = p.decide(at(500, 10_000, 5_000), 1, 1_000)
    assert decision.members == 3, decision


def test_capped_by_lagging_partitions_unless_asked() -> None:
    lags = [500, 500, 0, 0, 0, 0, 0, 0]
    p = policy()
    members = 1
    for t in range(0, 10_000, 1_000):
        members = p.decide(rows(lags, [t] * 8), members, t).members
    assert members == 2
    p = policy(limit_to_lagging=False)
    members = 1
    for t in range(0, 40_000, 1_000):
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


def test_the_next_check_while_members_start_and_while_waiting_for_a_measurement() -> None:
    p = measured(keep_alive_ms=10_000, pending_check_ms=500)
    assert p.decide(flow(0, 5_000), 1, 0).members == 2  # nothing measured: one step
    p.decide(flow(0, 5_500), 2, 100, pending=1)
    assert p.next_check_ms(100) == 600, "a member starting: looked at again in 0.5 s"
    p.decide(flow(200, 5_600), 2, 2_500)  # it commits: 2 members, a new run of samples
    assert p.next_check_ms(2_500) == 3_500, "over target: when the run spans min_rate_span_ms"
    p.decide(flow(1_200, 100), 2, 3_000)  # under target: nothing to measure for
    assert p.next_check_ms(3_000) == 8_000, "no measurement due: four intervals after the step"
    # A member that never commits (nothing for it to do) is not looked at every 0.5 s for ever.
    p.decide(flow(1_300, 100), 2, 11_000, pending=1)
    assert p.next_check_ms(11_000) == 12_500, "the cooldown (10 s after 2.5 s), not the pending check"


def test_capacity_is_the_best_rate_per_member_so_idle_members_do_not_oversize_the_step() -> None:
    """The benchmark's case: 3 members, some idle as their partitions caught up or moved,
    measure 270/s each; at their capacity (450/s, measured before) 3 carry the 858/s."""
    p = measured()
    p.decide(flow(0, 1_000), 2, 0, pending=1)
    p.decide(flow(0, 1_000), 2, 500)
    assert p.decide(flow(1_800, 1_200), 2, 2_500).members == 3  # 450/s each, lag +100/s
    p.decide(flow(1_800, 1_200), 3, 4_000)
    decision = p.decide(flow(1_800 + 810 * 3, 1_200 + 48 * 3), 3, 7_000)
    assert decision.members == 3 and "waiting for the lag to fall" in decision.reason, decision


def test_a_steady_lag_answered_rarely_is_measured_from_the_sample_before_the_window() -> None:
    p = measured(rate_window_ms=5_000)
    p.decide(flow(0, 1_000), 3, 0, pending=3)  # starting: holds, and samples
    p.decide(flow(0, 1_000), 3, 2_000)  # the 3 commit: a new run of samples
    # The next answer 8 s later (the lag moved little): measured over those 8 s, not unmeasured.
    decision = p.decide(flow(8_000, 600), 3, 10_000)
    assert decision.reason == "over target, the lag falls fast enough" and decision.members == 3, decision
