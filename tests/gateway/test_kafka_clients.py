"""Real Kafka clients, written by others, against a gateway on 127.0.0.1 in front of
the session's service (tests/conftest.py): kafka-python's admin client, three
aiokafka consumers, a librdkafka consumer with cooperative-sticky, and a group
mixing an aiokafka consumer with an `actors.GroupMember`.

Each test uses its own group and topic names; every client is closed before
the test ends, so the gateway, shared by the module, sees no leftovers."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.structs import OffsetAndMetadata as AioOffset
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkPartition
from kafka import TopicPartition as KpPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata as KpOffset

from actors import Client, GroupMember
from coordinator.topic_partition import TopicPartition

from tests.gateway.gateway_support import GatewayThread
from tests.gateway.kafka_support import service_gateway

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TIMEOUT_S = 60.0
# Quick group timing for every client (the service's minimum session timeout is 500 ms).
SESSION_MS = 6_000
HEARTBEAT_MS = 300


@pytest.fixture(scope="module")
def gateway(service: Client) -> Iterator[GatewayThread]:
    yield from service_gateway()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def new_topic(service: Client, partitions: int) -> str:
    name = unique("topic")
    service.create_topic(name, partitions)
    return name


def wait_until(predicate: Callable[[], Any], step: Callable[[], None], what: str) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not in time: {what}")
        step()
    return value


# ------------------------------------------------------------ kafka-python admin


def test_kafka_python_admin_lists_describes_reads_offsets_and_deletes_an_empty_group(
    service: Client, gateway: GatewayThread
) -> None:
    topic = new_topic(service, 3)
    live, empty = unique("live"), unique("empty")
    service.commit_offsets(empty, {(topic, 0): 11, (topic, 2): 13})
    member = GroupMember(
        live,
        [topic],
        client=service,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        client_id="py-member",
    ).start()
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, client_id="kp-admin")
    try:
        member.wait_for_assignment(TIMEOUT_S)
        member.commit({(topic, 1): 21})
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (listed[live]["group_state"], listed[live]["protocol_type"]) == ("Stable", "consumer")
        assert listed[empty]["group_state"] == "Empty"

        described = admin.describe_groups([live, empty])
        assert described[live]["group_state"] == "Stable"
        assert described[live]["protocol_data"] == member.protocol_name
        (seen,) = described[live]["members"]
        assert (seen["member_id"], seen["client_id"]) == (member.member_id, "py-member")
        # kafka-python decodes the member's subscription and assignment: Kafka's ConsumerProtocol bytes.
        assert list(seen["member_metadata"]["topics"]) == [topic]
        assigned = {
            (t["topic"], p) for t in seen["member_assignment"]["assigned_partitions"] for p in t["partitions"]
        }
        assert assigned == {(topic, p) for p in range(3)}
        assert described[empty]["group_state"] == "Empty"

        offsets = admin.list_group_offsets([live, empty])
        assert {tp.partition: o.offset for tp, o in offsets[empty].items()} == {0: 11, 2: 13}
        assert {tp.partition: o.offset for tp, o in offsets[live].items()} == {1: 21}

        assert admin.delete_groups([empty, live]) == {empty: "OK", live: "NonEmptyGroupError"}
        assert empty not in {g["group_id"] for g in admin.list_groups()}
        assert service.fetch_offsets(empty).offsets() == {}
        assert service.fetch_offsets(live).offsets() == {(topic, 1): 21}
    finally:
        admin.close()
        member.close()


def test_kafka_python_admin_alters_and_deletes_offsets_of_an_empty_group(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group = new_topic(service, 2), unique("alter")
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
    try:
        admin.alter_group_offsets(
            group, {KpPartition(topic, 0): KpOffset(5, "", -1), KpPartition(topic, 1): KpOffset(6, "", -1)}
        )
        assert service.fetch_offsets(group).offsets() == {(topic, 0): 5, (topic, 1): 6}
        admin.delete_group_offsets(group, [KpPartition(topic, 0)])
        assert service.fetch_offsets(group).offsets() == {(topic, 1): 6}
    finally:
        admin.close()


# ------------------------------------------------------------ aiokafka


def aio_consumer(gateway: GatewayThread, topic: str, group: str, **config: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=gateway.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        **config,
    )


async def settle(consumers: list[AIOKafkaConsumer], done: Callable[[], bool], what: str) -> None:
    """Poll every consumer (their group work runs meanwhile) until `done()`."""
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not in time: {what}")
        await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))


def partitions_of(consumers: list[AIOKafkaConsumer]) -> list[set[int]]:
    return [{tp.partition for tp in c.assignment()} for c in consumers]


def split_cleanly(consumers: list[AIOKafkaConsumer], count: int) -> bool:
    """Every consumer has partitions, no two share one, together they cover `count`."""
    owned = partitions_of(consumers)
    return all(owned) and sum(map(len, owned)) == count and set().union(*owned) == set(range(count))


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())


async def stop(consumer: AIOKafkaConsumer) -> None:
    """Stop an aiokafka consumer. aiokafka 0.14's `Fetcher.close` cancels its fetch tasks and
    awaits them, so a fetch sleeping in its retry backoff (a broker it could not reach: a
    leader's listener that moved) re-raises CancelledError out of `stop`; it is stopped all
    the same."""
    with contextlib.suppress(asyncio.CancelledError):
        await consumer.stop()


def test_three_aiokafka_consumers_split_a_topic_commit_and_take_over_from_one_that_stops(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group, count = new_topic(service, 7), unique("aio"), 7

    async def main() -> None:
        consumers = [aio_consumer(gateway, topic, group) for _ in range(3)]
        try:
            for consumer in consumers:
                await consumer.start()
            await settle(consumers, lambda: split_cleanly(consumers, count), "three-way split")
            for consumer in consumers:
                await consumer.commit({tp: AioOffset(100 + tp.partition, "") for tp in consumer.assignment()})
            committed = await consumers[0].committed(AioPartition(topic, 0))
            assert committed == 100
            assert service.fetch_offsets(group).offsets() == {(topic, p): 100 + p for p in range(count)}

            gone = partitions_of(consumers)[0]
            await stop(consumers[0])
            rest = consumers[1:]
            await settle(rest, lambda: split_cleanly(rest, count), "the two others take over")
            assert gone <= set().union(*partitions_of(rest))
            (described,) = service.describe_groups([group])
            assert (described.state, len(described.members)) == ("Stable", 2)
        finally:
            for consumer in consumers:
                await stop(consumer)

    run(main)
    assert service.describe_groups([group])[0].state == "Empty"


# ------------------------------------------------------------ librdkafka


def test_a_confluent_kafka_consumer_joins_with_cooperative_sticky_and_commits(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group = new_topic(service, 4), unique("rdkafka")
    assigned: list[set[int]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic], on_assign=lambda _, parts: assigned.append({p.partition for p in parts}))
        wait_until(lambda: len(consumer.assignment()) == 4, lambda: consumer.poll(0.2), "librdkafka assigned")
        assert set().union(*assigned) == set(range(4))
        (described,) = service.describe_groups([group])
        assert (described.state, described.protocol) == ("Stable", "cooperative-sticky")
        consumer.commit(offsets=[CkPartition(topic, 2, 42)], asynchronous=False)
        assert service.fetch_offsets(group).offsets() == {(topic, 2): 42}
        (read,) = consumer.committed([CkPartition(topic, 2)], timeout=TIMEOUT_S)
        assert read.offset == 42
    finally:
        consumer.close()
    assert service.describe_groups([group])[0].state == "Empty"


# ------------------------------------------------------------ mixed group


def test_a_group_of_an_aiokafka_consumer_and_a_group_member_forms_and_rebalances(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group, count = new_topic(service, 6), unique("mixed"), 6
    member = GroupMember(
        group,
        [topic],
        client=service,
        assignors=("range",),
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )

    def member_partitions() -> set[int]:
        member.poll()
        return {tp.partition for tp in member.assignment()} if member.is_stable else set()

    async def main() -> None:
        consumer = aio_consumer(
            gateway, topic, group, partition_assignment_strategy=(RangePartitionAssignor,)
        )
        await consumer.start()
        try:
            await settle([consumer], lambda: len(consumer.assignment()) == count, "the Kafka client alone")
            member.start()

            def shared() -> bool:
                mine, theirs = member_partitions(), {tp.partition for tp in consumer.assignment()}
                return (
                    bool(mine and theirs) and mine.isdisjoint(theirs) and mine | theirs == set(range(count))
                )

            await settle([consumer], shared, "the group member joins the Kafka client's group")
            (described,) = service.describe_groups([group])
            assert (described.state, described.protocol, len(described.members)) == ("Stable", "range", 2)
        finally:
            await stop(consumer)

    try:
        run(main)
        wait_until(
            lambda: member_partitions() == set(range(count)),
            lambda: time.sleep(0.05),
            "the group member takes every partition when the Kafka client leaves",
        )
        assert member.assignment() == {TopicPartition(topic, p) for p in range(count)}
    finally:
        member.close()
