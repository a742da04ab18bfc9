"""ConsumerGroupDescribe and ListGroups types through the partition actors (the Ray path)."""

from __future__ import annotations

import pytest

from actors.client.client import Client
from coordinator import Errors
from coordinator.messages import ConsumerGroupHeartbeatRequest

pytestmark = pytest.mark.ray
GROUP = "kip848-admin-group"


def test_describe_and_list_a_consumer_group(service: Client) -> None:
    join = ConsumerGroupHeartbeatRequest(
        GROUP, "m-1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("kip848-admin-topic",),
        topic_partitions=(), client_id="cli-test",
    )
    joined = service.send(join)
    assert joined.error is Errors.NONE and joined.member_epoch >= 1
    [group, missing] = service.describe_consumer_groups([GROUP, "kip848-admin-nope"])
    assert (group.error, group.group_state, group.assignor_name) == (Errors.NONE, "Stable", "uniform")
    [member] = group.members
    seen = (member.member_id, member.member_epoch, member.client_id)
    assert seen == ("m-1", joined.member_epoch, "cli-test")
    assert (missing.error, missing.error_message) == (
        Errors.GROUP_ID_NOT_FOUND, "Group kip848-admin-nope not found."
    )
    listed = {g.group_id: g for g in service.list_groups(types=["CONSUMER"])}
    assert (listed[GROUP].group_type, listed[GROUP].state) == ("consumer", "Stable")
    assert GROUP not in {g.group_id for g in service.list_groups(types=["classic"])}
    [dead] = service.describe_groups([GROUP])
    assert (dead.error, dead.state, dead.members) == (Errors.NONE, "Dead", ())
    left = service.send(ConsumerGroupHeartbeatRequest(GROUP, "m-1", -1))
    assert left.error is Errors.NONE
