"""The byte-level path: member JoinGroup metadata in, leader SyncGroup assignments out."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from coordinator.assignors import (
    ASSIGNORS,
    StickyAssignor,
    get_assignor,
    perform_assignment,
    subscription_metadata,
)
from coordinator.consumer_protocol import decode_assignment, decode_subscription
from coordinator.topic_partition import TopicPartition as TP

from tests.assignors.sticky_helpers import fresh, tps


def assigned(result: dict[str, bytes]) -> dict[str, list[TP]]:
    return {m: list(decode_assignment(data).partitions) for m, data in result.items()}


def test_registry() -> None:
    assert list(ASSIGNORS) == ["range", "roundrobin", "sticky", "cooperative-sticky"]
    assert [a.protocol.name for a in ASSIGNORS.values()] == ["EAGER", "EAGER", "EAGER", "COOPERATIVE"]
    with pytest.raises(ValueError, match="unknown assignor 'fair'"):
        get_assignor("fair")


def test_member_metadata_is_javas_subscription() -> None:
    data = subscription_metadata(
        "cooperative-sticky",
        ["t2", "t1"],
        owned_partitions=tps("t1-1"),
        generation_id=4,
        rack_id="r1",
        last_assignment=tps("t1-1"),
        last_generation=4,
    )
    sub = decode_subscription(data)
    assert (sub.topics, sub.owned_partitions, sub.generation_id, sub.rack_id) == (
        ("t1", "t2"),
        (TP("t1", 1),),
        4,
        "r1",
    )
    assert sub.user_data == b"\x00\x00\x00\x04"
    # Eager range: no user data, a negative generation is written as -1, an empty rack as null.
    plain = decode_subscription(subscription_metadata("range", ["t"], generation_id=-7, rack_id=""))
    assert (plain.user_data, plain.generation_id, plain.rack_id) == (None, -1, None)


def test_leader_assigns_from_bytes_with_static_members_first() -> None:
    metadata = {m: subscription_metadata("range", ["t"]) for m in ("a", "b", "c")}
    result = perform_assignment(
        "range", metadata, {"t": 6}, group_instance_ids={"b": "b-instance", "a": None}
    )
    assert assigned(result) == {"a": tps("t-2 t-3"), "b": tps("t-0 t-1"), "c": tps("t-4 t-5")}
    # Java's serializeAssignment: highest version, null user data; kafka-python reads it.
    assert result["b"] == bytes.fromhex("000300000001000174000000020000000000000001ffffffff")
    kp = ConsumerProtocolAssignment.decode(result["a"])
    assert [(tp.topic, tp.partitions) for tp in kp.assigned_partitions] == [("t", [2, 3])]


def test_sticky_rebalance_through_bytes() -> None:
    counts = {"t": 3}
    first = assigned(perform_assignment("sticky", {"c1": subscription_metadata("sticky", ["t"])}, counts))
    assert first == {"c1": tps("t-0 t-1 t-2")}
    metadata = {
        "c1": subscription_metadata(
            "sticky", ["t"], generation_id=1, last_assignment=first["c1"], last_generation=1
        ),
        "c2": subscription_metadata("sticky", ["t"]),
    }
    assert assigned(perform_assignment("sticky", metadata, counts)) == {
        "c1": tps("t-0 t-1"),
        "c2": tps("t-2"),
    }
    # Same as calling the assignor on decoded subscriptions.
    assert StickyAssignor().assign({"c1": fresh("t")}, counts) == first


def test_cooperative_rebalance_through_bytes_withholds_then_hands_over() -> None:
    counts = {"t": 4}

    def join(member: str, owned: list[TP], generation: int) -> bytes:
        return subscription_metadata(
            "cooperative-sticky",
            ["t"],
            owned_partitions=owned,
            generation_id=generation,
            last_assignment=owned,
            last_generation=generation,
        )

    round1 = assigned(
        perform_assignment(
            "cooperative-sticky",
            {"c1": join("c1", tps("t-0 t-1 t-2 t-3"), 3), "c2": join("c2", [], -1)},
            counts,
        )
    )
    assert round1 == {"c1": tps("t-0 t-1"), "c2": []}
    round2 = assigned(
        perform_assignment(
            "cooperative-sticky", {"c1": join("c1", round1["c1"], 4), "c2": join("c2", [], 4)}, counts
        )
    )
    assert round2 == {"c1": tps("t-0 t-1"), "c2": tps("t-2 t-3")}


def test_bad_member_metadata_raises_value_error() -> None:
    with pytest.raises(ValueError, match="malformed consumer subscription"):
        perform_assignment("range", {"m": b"\x00\x00\x00"}, {"t": 1})
