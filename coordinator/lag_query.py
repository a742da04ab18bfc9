"""The live lag request: a partition's groups' lag and health, answered from its LagTracker.

`LagRequest(group_ids)` asks one offsets partition for the lag of the named
groups it owns (None: every group with committed offsets); the client fans it
out to every partition and merges (`actors.client.Client.lag`). The answer
comes from the shard's `LagTracker` (coordinator/lag.py), kept as records are
applied, so a question costs the rows it returns, never a scan of every
group's offsets (DESIGN section 10).

The response travels as plain tuples of ints and strings (a million rows
pickle in a fraction of a second; dataclass rows would cost several times
more): `partitions` one `PartitionRow` per committed offset, sorted by group,
topic and partition; `groups` one `GroupRow` per group. A group id it is
asked for and does not hold (no committed offsets, or another partition's)
is simply absent; the response names the routing it answered by (`routing`), so
a client knows which groups to ask another partition. `rows_to_groups` turns them back into `GroupLag`s.

`LagRequest(..., as_json=True)` asks for the rows as `raygroups lag --live --json`
writes them instead (coordinator/lag_json.py): `json_groups`, per group its id and
its rows' JSON text, and no tuples at all, so a million rows cross Ray as text the
leaders wrote at once, and the client only puts the groups in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from coordinator.checks import Checked, register_requests
from coordinator.errors import Errors
from coordinator.lag import GroupLag, Health, LagTracker, PartitionLag
from coordinator.lag_json import json_lines
from coordinator.routing import Routing

# group, topic, partition, committed, end, lag, lag_ms, flags (AHEAD | AT_LEAST), health
PartitionRow = tuple[str, str, int, int, int | None, int | None, int | None, int, int]
GroupRow = tuple[str, int | None, int | None, int]  # group, lag, lag_ms, health
AHEAD, AT_LEAST = 1, 2


@dataclass(frozen=True, slots=True)
class LagRequest(Checked):
    group_ids: tuple[str, ...] | None = None  # None: every group of the partition
    partitions: bool = True  # False: the groups' rows only (their lag, health)
    as_json: bool = False  # True: the partition rows as JSON text only (`LagResponse.json_groups`)


@dataclass(frozen=True, slots=True)
class LagResponse:
    error: Errors
    groups: tuple[GroupRow, ...] = ()
    partitions: tuple[PartitionRow, ...] = ()
    # The routing the partition answered by (None: it owns every group it holds): the groups
    # it does not own under it are absent, and the client asks their owner.
    routing: Routing | None = None
    # As JSON (`LagRequest.as_json`): per group, sorted, its id and its rows' JSON text.
    json_groups: tuple[tuple[str, str], ...] = ()


register_requests((LagRequest,))

ERROR_RESPONSES: dict[type, Callable[..., object]] = {LagRequest: lambda _request, error: LagResponse(error)}


class LagHost(Protocol):
    """What the handler needs of the shard."""

    partition: int
    owner: Routing | None
    lag: LagTracker
    now_ms: int


def handle_lag(shard: LagHost, request: LagRequest, _token: Any) -> LagResponse:
    tracker, owner = shard.lag, shard.owner
    wanted = tracker.groups() if request.group_ids is None else sorted(set(request.group_ids))
    if owner is not None:
        wanted = [group_id for group_id in wanted if owner.partition_for(group_id) == shard.partition]
    if request.as_json:
        return LagResponse(Errors.NONE, routing=owner, json_groups=json_lines(tracker, wanted, shard.now_ms))
    groups: list[GroupRow] = []
    partitions: list[PartitionRow] = []
    for group_id in wanted:
        found = group_rows(tracker, group_id, shard.now_ms, request.partitions)
        groups.extend(found[0])
        partitions.extend(found[1])
    return LagResponse(Errors.NONE, tuple(groups), tuple(partitions), owner)


def group_rows(
    tracker: LagTracker, group_id: str, now_ms: int, with_partitions: bool = True
) -> tuple[tuple[GroupRow, ...], tuple[PartitionRow, ...]]:
    """One group's rows as a response carries them; none when it has no committed offset."""
    rows = tracker.rows(group_id, now_ms)
    if rows is None:
        return (), ()
    lag = tracker.summary(group_id, rows)
    group: GroupRow = (group_id, lag.lag, lag.lag_ms, int(lag.health))
    if not with_partitions:
        return (group,), ()
    return (group,), tuple(
        (group_id, topic, partition, committed, end, lagged, lagged_ms,
         (AHEAD if ahead else 0) | (AT_LEAST if at_least else 0), int(health))
        for topic, partition, committed, end, lagged, lagged_ms, ahead, at_least, health in rows
    )


def rows_to_groups(groups: Iterable[GroupRow], partitions: Iterable[PartitionRow]) -> list[GroupLag]:
    """The `GroupLag`s of a response's rows (both sorted by group), in group order."""
    by_group: dict[str, list[PartitionLag]] = {}
    for group_id, topic, partition, committed, end, lag, lag_ms, flags, health in partitions:
        by_group.setdefault(group_id, []).append(
            PartitionLag(topic, partition, committed, end, lag, lag_ms, bool(flags & AHEAD),
                         bool(flags & AT_LEAST), Health(health))
        )
    return [
        GroupLag(group_id, tuple(by_group.get(group_id, ())), lag, lag_ms, Health(health))
        for group_id, lag, lag_ms, health in groups
    ]


HANDLERS: dict[type, Callable[..., Any]] = {LagRequest: handle_lag}
