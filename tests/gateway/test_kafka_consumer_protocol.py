"""librdkafka (confluent-kafka) consumers on KIP-848's consumer group protocol
(`group.protocol=consumer`) against a gateway on 127.0.0.1 in front of the
session's service: the coordinator assigns, each consumer reconciles
incrementally, commits and reads its offsets with its member epoch
(OffsetCommit/OffsetFetch v9), and the admin client lists and describes the
group (ListGroups v5 types, ConsumerGroupDescribe). A librdkafka consumer
shares a group with an `actors.GroupMember(group_protocol="consumer")`, with
a Ray caller driving `Client.consumer_group_heartbeat`, and with a classic
aiokafka consumer (the group is upgraded online, and downgraded when the
librdkafka consumer leaves). Raw frames check what
librdkafka never sends: a v0 join without a member id, a v1 one refused,
and the member checks of OffsetCommit/OffsetFetch by version and epoch.

A rebalance takes a few heartbeats, at the interval the session's service
gives (tests/conftest.py); the tests wait up to TIMEOUT_S."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from actors import Client, GroupMember
from coordinator.errors import Errors
from coordinator.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupTopicPartitions

from tests.gateway.gateway_support import GatewayThread
from tests.gateway.kafka_support import exchange, kio_request, service_gateway

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def gateway(service: Client) -> Iterator[GatewayThread]:
    yield from service_gateway()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Member:
    """One librdkafka consumer on the consumer protocol, with what its listener saw."""

    def __init__(
        self, gateway: GatewayThread, group: str, topic: str, name: str, instance_id: str | None = None
    ) -> None:
        self.name = name
        self.topic = topic
        self.assigned: list[set[int]] = []
        self.revoked: list[set[int]] = []
        self.lost: list[set[int]] = []
        config = {
            "bootstrap.servers": gateway.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        if instance_id is not None:
            config["group.instance.id"] = instance_id
        self.consumer = KafkaConsumer(config)
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _, parts: self.assigned.append(_partitions(parts)),
            on_revoke=lambda _, parts: self.revoked.append(_partitions(parts)),
            on_lost=lambda _, parts: self.lost.append(_partitions(parts)),
        )

    def owned(self) -> set[int]:
        return _partitions(self.consumer.assignment())

    def owned_topics(self) -> set[tuple[str, int]]:
        return {(p.topic, p.partition) for p in self.consumer.assignment()}

    def poll(self) -> None:
        self.consumer.poll(0.05)

    def close(self) -> None:
        self.consumer.close()


def _partitions(parts: list[TopicPartition]) -> set[int]:
    return {p.partition for p in parts}


def settle(members: list[Member], done: Callable[[], bool], what: str) -> None:
    """Poll every member (librdkafka runs its callbacks in poll) until `done()`."""
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            owned = {m.name: m.owned() for m in members}
            raise AssertionError(f"not in time: {what}; owned: {owned}")
        for member in members:
            member.poll()


def split(members: list[Member], count: int) -> bool:
    """No two members own the same partition, together all `count`, evenly (the uniform
    assignor's target; a reconciliation in progress can own fewer or more for a while)."""
    owned = [m.owned() for m in members]
    sizes = [len(o) for o in owned]
    return sum(sizes) == count and set().union(*owned) == set(range(count)) and max(sizes) - min(sizes) <= 1


def test_consumers_form_a_group_commit_and_rebalance_incrementally(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group, count = unique("topic"), unique("kip848"), 6
    service.create_topic(topic, count)
    first = Member(gateway, group, topic, "first")
    members = [first]
    try:
        settle(members, lambda: first.owned() == set(range(count)), "the first consumer gets every partition")

        first.consumer.commit(
            offsets=[TopicPartition(topic, p, 100 + p) for p in range(count)], asynchronous=False
        )
        assert service.fetch_offsets(group).offsets() == {(topic, p): 100 + p for p in range(count)}
        read = first.consumer.committed([TopicPartition(topic, p) for p in range(count)], timeout=TIMEOUT_S)
        assert [r.offset for r in read] == [100 + p for p in range(count)]

        second = Member(gateway, group, topic, "second")
        members.append(second)
        settle(members, lambda: split(members, count), "the second consumer takes its share")
        # Incremental: the first consumer gave up only what moved, and never everything.
        moved = second.owned()
        assert set().union(*first.revoked) == moved
        assert first.owned() == set(range(count)) - moved and len(moved) == count // 2
        assert not first.lost

        second.consumer.commit(offsets=[TopicPartition(topic, p, 200 + p) for p in moved], asynchronous=False)
        assert service.fetch_offsets(group).offsets() == {
            (topic, p): (200 if p in moved else 100) + p for p in range(count)
        }

        third = Member(gateway, group, topic, "third")
        members.append(third)
        settle(members, lambda: split(members, count), "a third consumer joins")
        assert all(len(m.owned()) == 2 for m in members)

        second.close()
        members.remove(second)
        settle(members, lambda: split(members, count), "the others take over from the one that left")
        assert sorted(len(m.owned()) for m in members) == [3, 3]
        assert not first.lost and not third.lost
    finally:
        for member in members:
            member.close()


def test_a_static_consumer_that_restarts_gets_its_partitions_back(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group, count = unique("topic"), unique("kip848-static"), 4
    service.create_topic(topic, count)
    stays = Member(gateway, group, topic, "stays", instance_id="stays")
    restarts = Member(gateway, group, topic, "restarts", instance_id="restarts")
    members = [stays, restarts]
    try:
        settle(members, lambda: split(members, count), "two static consumers split the topic")
        before, kept = restarts.owned(), stays.owned()
        revoked_before = len(stays.revoked)
        # A static member's close leaves with epoch -2: its partitions wait for it (session timeout).
        restarts.close()
        members.remove(restarts)
        again = Member(gateway, group, topic, "restarted", instance_id="restarts")
        members.append(again)
        settle(members, lambda: again.owned() == before, "the restarted consumer gets its partitions back")
        assert stays.owned() == kept and len(stays.revoked) == revoked_before and not stays.lost
    finally:
        for member in members:
            member.close()


def test_a_regex_subscription_is_resolved_by_the_coordinator(service: Client, gateway: GatewayThread) -> None:
    prefix = unique("rx")
    matching, other = f"{prefix}-a", unique("topic")
    service.create_topic(matching, 2)
    service.create_topic(other, 2)
    member = Member(gateway, unique("kip848-regex"), f"^{prefix}-.*", "regex")
    try:
        # librdkafka sends the pattern as SubscribedTopicRegex (v1); the coordinator matches it (RE2).
        settle(
            [member], lambda: member.owned_topics() == {(matching, 0), (matching, 1)}, "the matching topic"
        )
        later = f"{prefix}-b"
        service.create_topic(later, 1)
        settle([member], lambda: (later, 0) in member.owned_topics(), "a topic created later that matches")
        assert other not in {t for t, _ in member.owned_topics()}
    finally:
        member.close()


class RayMember:
    """A consumer-protocol member driven through `Client.consumer_group_heartbeat`, as a Ray
    caller would: it acknowledges what it owns at every heartbeat."""

    def __init__(self, service: Client, group: str, topic: str) -> None:
        self.service, self.group, self.topic = service, group, topic
        self.topic_id = service.topic_ids([topic])[topic]
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.partitions: set[int] = set()

    def heartbeat(self) -> None:
        joining = self.epoch == 0
        owned = (ConsumerGroupTopicPartitions(self.topic_id, tuple(sorted(self.partitions))),)
        response = self.service.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=self.epoch,
                rebalance_timeout_ms=60_000 if joining else -1,
                subscribed_topic_names=(self.topic,) if joining else None,
                topic_partitions=() if joining else owned,
                client_id="ray-member",
            )
        )
        assert response.error is Errors.NONE, response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.partitions = {
                p for t in response.assignment if t.topic_id == self.topic_id for p in t.partitions
            }

    def leave(self) -> None:
        self.service.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(self.group, self.member_id, -1))


def test_a_ray_caller_and_a_librdkafka_consumer_share_one_consumer_group(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group, count = unique("topic"), unique("kip848-mixed"), 4
    service.create_topic(topic, count)
    kafka = Member(gateway, group, topic, "kafka")
    ray_member = RayMember(service, group, topic)
    try:
        settle([kafka], lambda: kafka.owned() == set(range(count)), "the Kafka client alone")

        def shared() -> bool:
            ray_member.heartbeat()
            mine, theirs = ray_member.partitions, kafka.owned()
            return len(mine) == len(theirs) and mine | theirs == set(range(count))

        settle([kafka], shared, "the Ray caller joins the Kafka client's group")
        assert len(ray_member.partitions) == count // 2
        assert set().union(*kafka.revoked) == ray_member.partitions  # only what moved
    finally:
        ray_member.leave()
    try:
        settle(
            [kafka], lambda: kafka.owned() == set(range(count)), "the Kafka client takes back what was left"
        )
    finally:
        kafka.close()


def test_a_group_member_and_a_librdkafka_consumer_share_one_consumer_group(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group, count = unique("topic"), unique("kip848-member"), 6
    service.create_topic(topic, count)
    kafka = Member(gateway, group, topic, "kafka")
    member = GroupMember(group, [topic], client=service, group_protocol="consumer", client_id="py-member")

    def member_partitions() -> set[int]:
        return {tp.partition for tp in member.poll()} if member.is_stable else set()

    try:
        settle([kafka], lambda: kafka.owned() == set(range(count)), "the Kafka client alone")
        member.start()

        def shared() -> bool:
            mine, theirs = member_partitions(), kafka.owned()
            return len(mine) == len(theirs) and mine | theirs == set(range(count))

        settle([kafka], shared, "the group member joins the Kafka client's group")
        moved = member_partitions()
        assert set().union(*kafka.revoked) == moved and not kafka.lost

        # Each commits with its own member epoch (v9 from librdkafka, the core's from the member).
        kafka.consumer.commit(
            offsets=[TopicPartition(topic, p, 10 + p) for p in kafka.owned()], asynchronous=False
        )
        member.commit({(topic, p): 20 + p for p in moved})
        assert service.fetch_offsets(group).offsets() == {
            (topic, p): (20 if p in moved else 10) + p for p in range(count)
        }
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})  # kept: its futures need it alive
        described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        seen = {m.client_id for m in described.members}
        assert seen == {"kafka", "py-member"}
    finally:
        member.close()
    try:
        settle(
            [kafka], lambda: kafka.owned() == set(range(count)), "the Kafka client takes back what was left"
        )
    finally:
        kafka.close()


def test_a_classic_aiokafka_group_upgrades_when_a_consumer_protocol_client_joins(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group, count = unique("topic"), unique("kip848-upgrade"), 4
    service.create_topic(topic, count)

    def group_type() -> str:
        (listed,) = [g for g in service.list_groups() if g.group_id == group]
        return listed.group_type

    async def main() -> None:
        classic = AIOKafkaConsumer(
            topic,
            bootstrap_servers=gateway.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=6_000,
            heartbeat_interval_ms=300,
            partition_assignment_strategy=(RangePartitionAssignor,),
        )
        await classic.start()
        kafka: Member | None = None

        async def settle_both(done: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + TIMEOUT_S
            while not done():
                if time.monotonic() > deadline:
                    raise AssertionError(f"not in time: {what}")
                await classic.getmany(timeout_ms=50)
                if kafka is not None:
                    kafka.consumer.poll(0)

        def classic_owned() -> set[int]:
            return {tp.partition for tp in classic.assignment()}

        try:
            await settle_both(lambda: classic_owned() == set(range(count)), "the classic consumer alone")
            assert group_type() == "classic"
            kafka = upgrader = Member(gateway, group, topic, "upgrader")

            def shared() -> bool:
                mine, theirs = upgrader.owned(), classic_owned()
                return len(mine) == len(theirs) and mine | theirs == set(range(count))

            await settle_both(shared, "the consumer-protocol client joins the classic group")
            assert group_type() == "consumer"  # upgraded online (KIP-848 migration)

            kafka.close()
            kafka = None
            await settle_both(
                lambda: classic_owned() == set(range(count)), "the classic consumer alone again"
            )
            assert group_type() == "classic"  # downgraded when its last consumer-protocol member left
        finally:
            if kafka is not None:
                kafka.close()
            await classic.stop()

    asyncio.run(main())


def test_the_admin_client_lists_and_describes_a_consumer_group(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group, count = unique("topic"), unique("kip848-admin"), 4
    service.create_topic(topic, count)
    member = Member(gateway, group, topic, "described")
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    try:
        settle([member], lambda: member.owned() == set(range(count)), "the consumer gets every partition")

        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(TIMEOUT_S)
        assert group in {g.group_id for g in listed.valid}
        (mine,) = [g for g in listed.valid if g.group_id == group]
        assert mine.type == ConsumerGroupType.CONSUMER
        classic_only = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(TIMEOUT_S)
        assert group not in {g.group_id for g in classic_only.valid}

        described = admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(
            TIMEOUT_S
        )
        assert described.type == ConsumerGroupType.CONSUMER
        assert str(described.state).endswith("STABLE")
        (seen,) = described.members
        assert seen.client_id == "described"
        assert {(tp.topic, tp.partition) for tp in seen.assignment.topic_partitions} == {
            (topic, p) for p in range(count)
        }
        assert described.authorized_operations  # every group operation: there is no authorizer
    finally:
        member.close()


# ------------------------------------------------------------ raw frames


def heartbeat(version: int, group: str, member_id: str, epoch: int, **fields: object) -> object:
    values: dict[str, object] = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 60_000 if epoch == 0 else -1,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else None,
        **fields,
    }
    return kio_request(68, version, **values)


def commit(version: int, group: str, member_id: str, epoch: int, topic: str) -> object:
    return kio_request(
        8,
        version,
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        group_instance_id=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 7,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    )


def fetch(group: str, member_id: str | None, epoch: int) -> object:
    groups = [{"group_id": group, "member_id": member_id, "member_epoch": epoch, "topics": None}]
    return kio_request(9, 9, groups=groups, require_stable=True)


def test_heartbeat_v0_gets_a_member_id_from_the_coordinator_and_v1_must_bring_one(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group = unique("topic"), unique("raw0")
    service.create_topic(topic, 2)
    joined = exchange(gateway, heartbeat(0, group, "", 0, subscribed_topic_names=[topic]))
    assert joined.error_code == ErrorCode.none and joined.member_id
    # The service's group_consumer_heartbeat_interval_ms (tests/conftest.py).
    assert joined.member_epoch >= 1 and joined.heartbeat_interval.total_seconds() == 0.25
    assert joined.assignment is not None  # a full request is answered with the assignment
    left = exchange(gateway, heartbeat(0, group, joined.member_id, -1))
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)

    refused = exchange(gateway, heartbeat(1, group, "", 0, subscribed_topic_names=[topic]))
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.invalid_request,
        "MemberId can't be empty.",
    )
    assert (refused.member_id, refused.member_epoch) == (None, 0)


def test_offsets_of_a_consumer_protocol_member_need_v9_and_its_epoch(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group, member = unique("topic"), unique("raw-offsets"), uuid.uuid4().hex
    service.create_topic(topic, 1)
    joined = exchange(gateway, heartbeat(1, group, member, 0, subscribed_topic_names=[topic]))
    epoch = joined.member_epoch
    try:

        def committed(version: int, at_epoch: int) -> ErrorCode:
            return (
                exchange(gateway, commit(version, group, member, at_epoch, topic))
                .topics[0]
                .partitions[0]
                .error_code
            )

        assert committed(8, epoch) == ErrorCode.unsupported_version
        assert committed(9, epoch + 1) == ErrorCode.stale_member_epoch
        assert committed(9, epoch) == ErrorCode.none
        assert service.fetch_offsets(group).offsets() == {(topic, 0): 7}
        (stale,) = exchange(gateway, fetch(group, member, epoch + 1)).groups
        assert stale.error_code == ErrorCode.stale_member_epoch
        (mine,) = exchange(gateway, fetch(group, member, epoch)).groups
        assert mine.error_code == ErrorCode.none
        assert [(t.name, p.committed_offset) for t in mine.topics for p in t.partitions] == [(topic, 7)]
        (unknown,) = exchange(gateway, fetch(group, "someone-else", epoch)).groups
        assert unknown.error_code == ErrorCode.unknown_member_id
    finally:
        exchange(gateway, heartbeat(1, group, member, -1))


def test_offsets_v10_name_topics_by_the_registrys_ids(service: Client, gateway: GatewayThread) -> None:
    topic, group = unique("topic"), unique("raw-v10")
    service.create_topic(topic, 2)
    topic_id, stranger = service.topic_ids([topic])[topic], uuid.uuid4()
    committed = exchange(
        gateway,
        kio_request(
            8,
            10,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                {
                    "topic_id": t,
                    "partitions": [
                        {
                            "partition_index": 1,
                            "committed_offset": 9,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
                for t in (topic_id, stranger)
            ],
        ),
    )
    assert [(t.topic_id, t.partitions[0].error_code) for t in committed.topics] == [
        (topic_id, ErrorCode.none),
        (stranger, ErrorCode.unknown_topic_id),
    ]
    assert service.fetch_offsets(group).offsets() == {(topic, 1): 9}
    groups = [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]
    (fetched,) = exchange(gateway, kio_request(9, 10, groups=groups, require_stable=True)).groups
    assert [
        (t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in fetched.topics
    ] == [(topic_id, [(1, 9)])]
