"""Java's iteration and comparison orders, checked against values printed by OpenJDK 17.

Each expected value below was printed by a JDK 17 program building the same
collection (`new HashSet<>(list)`, `new HashMap<>()` + puts,
`Collections.sort(List<Uuid>)`, `Uuid.hashCode()`).
"""

from __future__ import annotations

from uuid import UUID

from coordinator.consumer.assignors.java_order import (
    copied_capacity,
    grown_capacity,
    member_map_order,
    partition_set_order,
    topic_set_order,
    uuid_hash,
    uuid_key,
)

from tests.consumer.kafka_cases import T1, T2, T3, T4


def kafka_uuid(most: int, least: int) -> UUID:
    return UUID(int=((most % (1 << 64)) << 64) | (least % (1 << 64)))


def test_uuid_hash_code() -> None:
    java_int = -858993596
    assert uuid_hash(kafka_uuid(0x123456789ABCDEF, 0x1122334455667788)) == java_int % (1 << 32)


def test_uuid_compare_to_is_signed() -> None:
    ids = [kafka_uuid(-1, 5), kafka_uuid(1, 5), kafka_uuid(0, -1), kafka_uuid(0, 1)]
    assert sorted(ids, key=uuid_key) == [
        kafka_uuid(-1, 5),
        kafka_uuid(0, -1),
        kafka_uuid(0, 1),
        kafka_uuid(1, 5),
    ]


def test_integer_hash_set_order() -> None:
    # A bucket keeps insertion order: 3, 19 and 35 share bucket 3 of 16.
    assert partition_set_order([3, 19, 16, 40, 1, 35]) == [16, 1, 3, 19, 35, 40]
    # 13 elements make a table of 32.
    assert partition_set_order([i * 7 for i in range(13)]) == [
        0,
        35,
        70,
        7,
        42,
        77,
        14,
        49,
        84,
        21,
        56,
        28,
        63,
    ]


def test_string_hash_map_order() -> None:
    ids = ["member-1", "member-2", "member-3", "A", "B", "zed", "consumer-10"]
    assert member_map_order(ids, len(ids)) == [
        "A",
        "B",
        "consumer-10",
        "member-1",
        "member-2",
        "zed",
        "member-3",
    ]
    many = [f"m{i}" for i in range(13)]
    assert member_map_order(many, 13) == [f"m{i}" for i in range(10)] + ["m11", "m10", "m12"]


def test_capacities() -> None:
    assert [copied_capacity(n) for n in (0, 12, 13, 24, 25)] == [16, 32, 32, 64, 64]
    assert [grown_capacity(n) for n in (0, 12, 13, 24, 25)] == [16, 16, 32, 32, 64]


def test_kafka_test_topic_ids_iterate_in_bucket_order() -> None:
    # Why Kafka's testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks gives topic3's partitions first.
    assert topic_set_order([T1, T2, T3, T4]) == [T2, T4, T3, T1]
