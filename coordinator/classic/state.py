"""Group states and the table of legal transitions.

The table is Kafka's (ClassicGroupState / GroupMetadata.scala): a state may be
entered only from the states listed for it. `check_transition` raises on an
illegal move; callers change nothing before it succeeds.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class IllegalStateTransition(RuntimeError):
    """A broken invariant: the shard must be reloaded from its log."""


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(
            f"group {group_id!r} should be in one of "
            f"{sorted(s.value for s in VALID_PREVIOUS_STATES[target])} before moving to "
            f"{target.value}, but is {current.value}"
        )


def can_rebalance(state: GroupState) -> bool:
    return state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]
