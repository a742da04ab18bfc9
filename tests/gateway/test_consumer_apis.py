"""The gateway's KIP-848 side without Ray: ConsumerGroupHeartbeat v0-1 and the
member id and epoch OffsetCommit/OffsetFetch v9 carry, translated to the core's
requests and back, each response round-tripped through kio (fake_client.call)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from actors.client.retry import CoordinatorUnavailableError
from coordinator.errors import Errors
from coordinator.messages import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedTopicPartitions,
    FetchedOffset,
    OffsetCommitResponse,
    OffsetFetchResponse,
    PartitionResult,
)
from coordinator.routing import partition_for

from tests.gateway.fake_client import FakeClient, call
from tests.gateway.kafka_support import kio_request

CGHB = 68
T1, T2 = uuid.UUID(int=7), uuid.UUID(int=9)


def heartbeat(version: int, **fields: Any) -> Any:
    values = {
        "group_id": "g",
        "member_id": "m-1",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 300_000,
        "subscribed_topic_names": ["a", "b"],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
        **fields,
    }
    return kio_request(CGHB, version, **values)


def joined(request: Any) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        Errors.NONE,
        None,
        request.member_id or "made-by-coordinator",
        5,
        5_000,
        (ConsumerGroupTopicPartitions(T1, (0, 2)), ConsumerGroupTopicPartitions(T2, (1,))),
    )


@pytest.mark.parametrize("version", [0, 1])
def test_a_join_is_translated_field_by_field_and_answered_with_its_assignment(version: int) -> None:
    client = FakeClient(joined)
    response = call(client, heartbeat(version, rack_id="r1", server_assignor="range"))
    ((sent, partition),) = client.sent
    assert partition is None  # routed by its group id
    assert (sent.group_id, sent.member_id, sent.member_epoch) == ("g", "m-1", 0)
    assert (sent.instance_id, sent.rack_id, sent.server_assignor) == (None, "r1", "range")
    assert sent.rebalance_timeout_ms == 300_000
    assert sent.subscribed_topic_names == ("a", "b")
    assert (sent.subscribed_topic_regex, sent.topic_partitions) == (None, ())
    assert (sent.version, sent.client_id, sent.client_host) == (version, "cid", "10.0.0.9")
    assert response.error_code == ErrorCode.none
    assert (response.member_id, response.member_epoch) == ("m-1", 5)
    assert response.heartbeat_interval.total_seconds() == 5
    assert [(t.topic_id, t.partitions) for t in response.assignment.topic_partitions] == [
        (T1, (0, 2)),
        (T2, (1,)),
    ]


def test_v1_carries_the_regex_and_nulls_stay_null() -> None:
    client = FakeClient(lambda r: ConsumerGroupHeartbeatResponse(Errors.NONE, None, "m-1", 6, 5_000))
    response = call(
        client,
        heartbeat(
            1,
            member_epoch=6,
            rebalance_timeout=-1,
            subscribed_topic_names=None,
            subscribed_topic_regex="^t.*",
            topic_partitions=None,
        ),
    )
    ((sent, _),) = client.sent
    assert (sent.subscribed_topic_names, sent.subscribed_topic_regex) == (None, "^t.*")
    assert (sent.rebalance_timeout_ms, sent.topic_partitions) == (-1, None)
    assert response.assignment is None  # unchanged: Kafka writes null


def test_owned_partitions_pass_by_topic_id() -> None:
    client = FakeClient(lambda r: ConsumerGroupHeartbeatResponse(Errors.NONE, None, "m-1", 6, 5_000))
    call(
        client,
        heartbeat(
            1,
            member_epoch=6,
            topic_partitions=[{"topic_id": T1, "partitions": [2, 0]}, {"topic_id": T2, "partitions": []}],
        ),
    )
    assert client.sent[0][0].topic_partitions == (
        ConsumerGroupTopicPartitions(T1, (2, 0)),
        ConsumerGroupTopicPartitions(T2, ()),
    )


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (Errors.FENCED_MEMBER_EPOCH, ErrorCode.fenced_member_epoch),
        (Errors.UNKNOWN_MEMBER_ID, ErrorCode.unknown_member_id),
        (Errors.INVALID_REQUEST, ErrorCode.invalid_request),
        (Errors.UNSUPPORTED_ASSIGNOR, ErrorCode.unsupported_assignor),
        (Errors.UNRELEASED_INSTANCE_ID, ErrorCode.unreleased_instance_id),
        (Errors.INVALID_REGULAR_EXPRESSION, ErrorCode.invalid_regular_expression),
    ],
)
def test_an_error_is_answered_with_its_message_and_no_member(error: Errors, code: ErrorCode) -> None:
    client = FakeClient(lambda r: ConsumerGroupHeartbeatResponse(error, "why"))
    response = call(client, heartbeat(1))
    assert (response.error_code, response.error_message) == (code, "why")
    assert (response.member_id, response.member_epoch, response.assignment) == (None, 0, None)
    assert response.heartbeat_interval.total_seconds() == 0


def test_a_coordinator_out_of_reach_is_coordinator_not_available() -> None:
    client = FakeClient(lambda r: CoordinatorUnavailableError("gone"))
    response = call(client, heartbeat(1))
    assert response.error_code == ErrorCode.coordinator_not_available
    assert (response.member_id, response.member_epoch) == (None, 0)


def test_a_null_topic_id_is_the_zero_uuid_no_topic_has() -> None:
    client = FakeClient(lambda r: ConsumerGroupHeartbeatResponse(Errors.NONE, None, "m-1", 6, 5_000))
    call(client, heartbeat(1, member_epoch=6, topic_partitions=[{"topic_id": None, "partitions": [0]}]))
    assert client.sent[0][0].topic_partitions == (ConsumerGroupTopicPartitions(uuid.UUID(int=0), (0,)),)


# ------------------------------------------------------------ offsets at v9


def test_offset_commit_passes_its_version_for_the_member_checks() -> None:
    client = FakeClient(
        lambda r: OffsetCommitResponse(
            tuple(PartitionResult(p.topic, p.partition, Errors.NONE) for p in r.partitions)
        )
    )
    for version in (2, 8, 9):
        call(
            client,
            kio_request(
                8,
                version,
                group_id="g",
                generation_id_or_member_epoch=4,
                member_id="m-1",
                retention_time=-1,
                group_instance_id=None,
                topics=[
                    {
                        "name": "t",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 3,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            ),
        )
    assert [(r.version, r.generation_id, r.member_id) for r, _ in client.sent] == [
        (2, 4, "m-1"),
        (8, 4, "m-1"),
        (9, 4, "m-1"),
    ]


def test_offset_fetch_v9_carries_each_groups_member_id_and_epoch() -> None:
    client = FakeClient(
        lambda r: OffsetFetchResponse(Errors.STALE_MEMBER_EPOCH if r.group_id == "g" else Errors.NONE)
    )
    groups = [
        {"group_id": "g", "member_id": "m-1", "member_epoch": 3, "topics": None},
        {"group_id": "h", "member_id": None, "member_epoch": -1, "topics": None},
    ]
    response = call(client, kio_request(9, 9, groups=groups, require_stable=True))
    assert [(r.group_id, r.member_id, r.member_epoch) for r, _ in client.sent] == [
        ("g", "m-1", 3),
        ("h", None, -1),
    ]
    assert [g.error_code for g in response.groups] == [ErrorCode.stale_member_epoch, ErrorCode.none]


def test_offset_fetch_v8_sends_no_member() -> None:
    client = FakeClient(lambda r: OffsetFetchResponse(Errors.NONE))
    call(client, kio_request(9, 8, groups=[{"group_id": "g", "topics": None}], require_stable=False))
    assert [(r.member_id, r.member_epoch) for r, _ in client.sent] == [(None, -1)]


# ------------------------------------------------------------ Metadata by topic id


class TopicsClient(FakeClient):
    """A registry of topics "a" (2 partitions, id T1) and "b" (1, id T2)."""

    counts = {"a": 2, "b": 1}
    ids = {"a": T1, "b": T2}

    def __init__(self, answer: Any = lambda r: None) -> None:
        super().__init__(answer)

    async def describe_topics_async(self, names: Any = None) -> dict[str, int]:
        return {n: c for n, c in self.counts.items() if names is None or n in names}

    async def topic_ids_async(self, names: Any = None) -> dict[str, uuid.UUID]:
        return {n: i for n, i in self.ids.items() if names is None or n in names}


def metadata(version: int, topics: list[tuple[str | None, uuid.UUID | None]] | None) -> Any:
    asked = None if topics is None else [{"name": n, "topic_id": i} for n, i in topics]
    return kio_request(
        3,
        version,
        topics=asked,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False,
    )


def test_metadata_answers_the_registrys_topic_ids() -> None:
    every = call(TopicsClient(), metadata(12, None))
    assert [(t.name, t.topic_id, len(t.partitions)) for t in every.topics] == [("a", T1, 2), ("b", T2, 1)]
    named = call(TopicsClient(), metadata(10, [("b", None), ("zz", None)]))
    assert [(t.name, t.topic_id, t.error_code) for t in named.topics] == [
        ("b", T2, ErrorCode.none),
        ("zz", None, ErrorCode.unknown_topic_or_partition),  # None: kio's zero UUID
    ]


def test_metadata_v12_looks_topics_up_by_id_and_answers_unknown_ids() -> None:
    stranger = uuid.UUID(int=12345)
    response = call(TopicsClient(), metadata(12, [(None, T2), (None, stranger), (None, T2)]))
    assert [(t.name, t.topic_id, t.error_code, len(t.partitions)) for t in response.topics] == [
        ("b", T2, ErrorCode.none, 1),
        (None, stranger, ErrorCode.unknown_topic_id, 0),  # each distinct id once, as Kafka
    ]
    # Once an id is asked, Kafka ignores the names.
    mixed = call(TopicsClient(), metadata(12, [("a", None), (None, T2)]))
    assert [t.name for t in mixed.topics] == ["b"]


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_v10_and_v11_refuse_a_lookup_by_id_as_kafka(version: int) -> None:
    response = call(TopicsClient(), metadata(version, [(None, T1), ("a", None)]))
    assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == [
        ("", T1, ErrorCode.invalid_request),
        ("a", None, ErrorCode.invalid_request),
    ]


# ------------------------------------------------------------ ConsumerGroupDescribe

CGD = 69


def described(request: Any) -> ConsumerGroupDescribeResponse:
    def one(group_id: str) -> DescribedConsumerGroup:
        if group_id == "classic":
            return DescribedConsumerGroup(
                Errors.GROUP_ID_NOT_FOUND, group_id, "Group classic is not a consumer group."
            )
        member = DescribedConsumerGroupMember(
            member_id="m-1",
            instance_id="i-1",
            rack_id=None,
            member_epoch=4,
            client_id="rdkafka",
            client_host="/10.0.0.9",
            subscribed_topic_names=("a", "b"),
            subscribed_topic_regex=None,
            assignment=(DescribedTopicPartitions(T1, "a", (0,)),),
            target_assignment=(
                DescribedTopicPartitions(T1, "a", (0, 1)),
                DescribedTopicPartitions(T2, "b", (0,)),
            ),
        )
        return DescribedConsumerGroup(Errors.NONE, group_id, None, "Reconciling", 5, 5, "uniform", (member,))

    return ConsumerGroupDescribeResponse(tuple(one(g) for g in request.group_ids))


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_describe_answers_each_group_in_the_order_asked(version: int) -> None:
    client = FakeClient(described, num_partitions=8)
    names = ["g", "classic", "h"]
    response = call(client, kio_request(CGD, version, group_ids=names, include_authorized_operations=True))
    assert len(client.sent) == len({partition_for(n, 8) for n in names})
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("g", ErrorCode.none),
        ("classic", ErrorCode.group_id_not_found),
        ("h", ErrorCode.none),
    ]
    g, classic, _ = response.groups
    assert classic.error_message == "Group classic is not a consumer group."
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        "Reconciling",
        5,
        5,
        "uniform",
    )
    assert (g.authorized_operations, classic.authorized_operations) == (3400, -(2**31))
    (member,) = g.members
    assert (member.member_id, member.instance_id, member.member_epoch) == ("m-1", "i-1", 4)
    assert (member.client_id, member.client_host, member.subscribed_topic_names) == (
        "rdkafka",
        "/10.0.0.9",
        ("a", "b"),
    )
    assert [(t.topic_id, t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [
        (T1, "a", (0,))
    ]
    assert [(t.topic_name, t.partitions) for t in member.target_assignment.topic_partitions] == [
        ("a", (0, 1)),
        ("b", (0,)),
    ]
    if version >= 1:
        assert member.member_type == 1  # consumer


def test_consumer_group_describe_without_authorized_operations_and_out_of_reach() -> None:
    response = call(
        FakeClient(described), kio_request(CGD, 1, group_ids=["g"], include_authorized_operations=False)
    )
    assert response.groups[0].authorized_operations == -(2**31)
    gone = call(
        FakeClient(lambda r: CoordinatorUnavailableError("gone")),
        kio_request(CGD, 1, group_ids=["g", "h"], include_authorized_operations=True),
    )
    assert [(g.group_id, g.error_code, g.members) for g in gone.groups] == [
        ("g", ErrorCode.coordinator_not_available, ()),
        ("h", ErrorCode.coordinator_not_available, ()),
    ]


# ------------------------------------------------------------ offsets by topic id (v10)

STRANGER = uuid.UUID(int=4242)


def commit_v10(topics: list[tuple[uuid.UUID, list[int]]]) -> Any:
    return kio_request(
        8,
        10,
        group_id="g",
        generation_id_or_member_epoch=3,
        member_id="m-1",
        group_instance_id=None,
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 5,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p in partitions
                ],
            }
            for topic_id, partitions in topics
        ],
    )


def all_committed(request: Any) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        tuple(PartitionResult(p.topic, p.partition, Errors.NONE) for p in request.partitions)
    )


def test_offset_commit_v10_names_topics_by_id_and_answers_unknown_ids() -> None:
    client = TopicsClient(all_committed)
    response = call(client, commit_v10([(T1, [0, 1]), (STRANGER, [0])]))
    ((sent, _),) = client.sent
    assert [(p.topic, p.partition, p.offset) for p in sent.partitions] == [("a", 0, 5), ("a", 1, 5)]
    assert sent.version == 10
    assert [
        (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics
    ] == [
        (T1, [(0, ErrorCode.none), (1, ErrorCode.none)]),
        (STRANGER, [(0, ErrorCode.unknown_topic_id)]),
    ]
    # Only unknown ids: the coordinator is not asked, as Kafka.
    alone = call(client, commit_v10([(STRANGER, [2])]))
    assert len(client.sent) == 1
    assert [(t.topic_id, t.partitions[0].error_code) for t in alone.topics] == [
        (STRANGER, ErrorCode.unknown_topic_id)
    ]


def fetched_v10(request: Any) -> OffsetFetchResponse:
    wanted = request.partitions if request.partitions is not None else (("a", 0), ("gone", 1))
    return OffsetFetchResponse(Errors.NONE, tuple(FetchedOffset(t, p, 30 + p, -1, "") for t, p in wanted))


def test_offset_fetch_v10_names_topics_by_id_both_ways() -> None:
    client = TopicsClient(fetched_v10)
    groups = [
        {
            "group_id": "g",
            "member_id": "m-1",
            "member_epoch": 3,
            "topics": [
                {"topic_id": T2, "partition_indexes": [0]},
                {"topic_id": STRANGER, "partition_indexes": [4]},
            ],
        },
        {"group_id": "h", "member_id": None, "member_epoch": -1, "topics": None},
    ]
    response = call(client, kio_request(9, 10, groups=groups, require_stable=True))
    assert [(r.group_id, r.partitions) for r, _ in client.sent] == [("g", (("b", 0),)), ("h", None)]
    g, h = response.groups
    assert [
        (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
        for t in g.topics
    ] == [(T2, [(0, 30, ErrorCode.none)]), (STRANGER, [(4, -1, ErrorCode.unknown_topic_id)])]
    # Every committed topic: one the registry has no id for ("gone") is left out.
    assert [(t.topic_id, [p.committed_offset for p in t.partitions]) for t in h.topics] == [(T1, [30])]
