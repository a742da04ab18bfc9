"""Every state transition, legal and illegal, against Kafka's table."""

import itertools

import pytest

from coordinator.classic.group import Group
from coordinator.classic.state import VALID_PREVIOUS_STATES, GroupState, IllegalStateTransition, can_rebalance

S = GroupState
LEGAL = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.EMPTY, S.DEAD),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.STABLE, S.DEAD),
    (S.DEAD, S.DEAD),
}


def test_table_is_kafkas() -> None:
    table = {(src, dst) for dst, srcs in VALID_PREVIOUS_STATES.items() for src in srcs}
    assert table == LEGAL


@pytest.mark.parametrize("src,dst", sorted(itertools.product(S, S), key=lambda p: (p[0].value, p[1].value)))
def test_transition(src: GroupState, dst: GroupState) -> None:
    group = Group("g", now_ms=5)
    group.state = src
    if (src, dst) in LEGAL:
        group.transition_to(dst, now_ms=9)
        assert group.state is dst
        assert group.state_timestamp_ms == 9
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(dst, now_ms=9)
        assert group.state is src, "an illegal transition must change nothing"
        assert group.state_timestamp_ms == 5


def test_can_rebalance() -> None:
    assert {s for s in S if can_rebalance(s)} == {S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE}
