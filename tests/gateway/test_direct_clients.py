"""Real Kafka clients straight to the partition leaders (gateway.direct), bootstrapped
from a gateway in front of the session's service (tests/conftest.py): FindCoordinator
names the leader's listener, kafka-python, aiokafka and confluent-kafka consumers join,
commit and read back through it, and follow a leader killed or moved mid-commit
without losing an acknowledged commit.

Each test uses its own group and topic names; the failover tests kill or move the
leader of their own group's offsets partition, which the controller replaces."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata as AioOffset
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpPartition
from kafka.errors import KafkaConnectionError
from kafka.structs import OffsetAndMetadata as KpOffset
from kio.schema.errors import ErrorCode

from actors import Client

from tests.gateway.gateway_support import GatewayThread, connect, read_response, request_frame
from tests.gateway.kafka_support import kio_request, service_gateway
from tests.gateway.test_kafka_clients import (
    HEARTBEAT_MS,
    SESSION_MS,
    TIMEOUT_S,
    new_topic,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

OFFSET_COMMIT, JOIN_GROUP = 8, 11


@pytest.fixture(scope="module")
def gateway(service: Client) -> Iterator[GatewayThread]:
    yield from service_gateway()


def listener_of(service: Client, group: str) -> dict[str, Any] | None:
    """The Kafka listener of the leader of `group`'s offsets partition, as it describes itself."""
    service.refresh()
    leader = service.leader(service.partition_for(group))
    return None if leader is None else ray.get(leader.kafka_listener.remote(), timeout=TIMEOUT_S)


def serving_listener(service: Client, group: str) -> dict[str, Any]:
    """`listener_of`, once a leader serves `group`'s partition with one."""
    def found() -> dict[str, Any] | None:
        try:
            listener = listener_of(service, group)
        except ray.exceptions.RayActorError:
            return None
        return listener if listener and listener["leads"] else None

    return wait_until(found, lambda: time.sleep(0.05), f"a serving leader with a listener for {group}")  # type: ignore[no-any-return]


def ended(pid: int) -> bool:
    """True once process `pid` (on this machine) has ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def find_coordinator(port: int, group: str) -> Any:
    with connect(port) as sock:
        request = kio_request(10, 4, key_type=0, coordinator_keys=[group])
        sock.sendall(request_frame(request, correlation_id=1))
        _, found = read_response(sock, 10, 4)
    return found.coordinators[0]


def test_find_coordinator_names_the_leaders_listener_and_without_direct_the_gateway(
    service: Client, gateway: GatewayThread
) -> None:
    groups = [unique("find") for _ in range(12)]
    for group in groups:
        listener = serving_listener(service, group)
        found = find_coordinator(gateway.port, group)
        assert found.error_code == ErrorCode.none
        address = (listener["node_id"], listener["host"], listener["port"])
        assert (found.node_id, found.host, found.port) == address
        # A listener answers for another partition's group as the gateway does.
        other = find_coordinator(listener["port"], groups[0])
        assert (other.node_id, other.port) == (find_coordinator(gateway.port, groups[0]).node_id,
                                               serving_listener(service, groups[0])["port"])
    plain = GatewayThread(service, direct=False)
    try:
        found = find_coordinator(plain.port, groups[0])
        assert (found.error_code, found.port) == (ErrorCode.none, plain.port)
    finally:
        plain.close()


# ------------------------------------------------------------ kafka-python

# kafka-python 3.0.12 loses a group leader's assignment when a poll times out between the
# JoinGroup and SyncGroup of a rebalance that new Metadata started: the next poll sees no
# rejoin needed (its assignment already matches the Metadata), never takes the finished
# join's result, and so has no partitions and sends no heartbeat until its session expires
# (seen in CI on a busy machine). A consumer that knows its topic before its first join
# never starts such a rebalance; its first Metadata, before it subscribed, names none.
def kp_consumer(topic: str, **config: Any) -> KafkaConsumer:
    """A kafka-python consumer of `topic` that knows the topic's partitions."""
    consumer = KafkaConsumer(topic, **config)

    def known() -> Any:
        # Metadata may list a listener that closed since (a leader moved or killed just before:
        # the gateway's broker list is up to BROKERS_TTL_S old, as a Kafka client's can be);
        # kafka-python's metadata refresh then raises the refused connection instead of trying
        # another broker. Another refresh soon after goes elsewhere.
        try:
            return consumer.partitions_for_topic(topic)
        except KafkaConnectionError:
            return None

    wait_until(known, lambda: time.sleep(0.05), f"{topic} known")
    return consumer


def test_a_kafka_python_consumer_commits_through_its_leaders_listener(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group = new_topic(service, 2), unique("kp-direct")
    consumer = kp_consumer(
        topic, bootstrap_servers=gateway.bootstrap, group_id=group, enable_auto_commit=False,
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
    )
    try:
        wait_until(lambda: len(consumer.assignment()) == 2, lambda: consumer.poll(100), "assigned")
        assert serving_listener(service, group)["served"].get(JOIN_GROUP, 0) >= 1  # joined directly
        consumer.commit({KpPartition(topic, 1): KpOffset(17, "", -1)})
        assert consumer.committed(KpPartition(topic, 1)) == 17
        assert service.fetch_offsets(group).offsets() == {(topic, 1): 17}
        (described,) = service.describe_groups([group])
        assert (described.state, len(described.members)) == ("Stable", 1)
    finally:
        consumer.close()
    assert service.describe_groups([group])[0].state == "Empty"


# ------------------------------------------------------------ aiokafka


def test_two_aiokafka_consumers_split_a_topic_and_commit_through_the_listener(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group = new_topic(service, 4), unique("aio-direct")

    async def main() -> None:
        consumers = [
            AIOKafkaConsumer(
                topic, bootstrap_servers=gateway.bootstrap, group_id=group, enable_auto_commit=False,
                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
            )
            for _ in range(2)
        ]
        try:
            for consumer in consumers:
                await consumer.start()
            deadline = time.monotonic() + TIMEOUT_S
            while sorted(len(c.assignment()) for c in consumers) != [2, 2]:
                assert time.monotonic() < deadline, "not in time: a two-way split"
                await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
            for consumer in consumers:
                await consumer.commit({tp: AioOffset(50 + tp.partition, "") for tp in consumer.assignment()})
            assert await consumers[0].committed(AioPartition(topic, 3)) == 53
        finally:
            for consumer in consumers:
                await consumer.stop()

    asyncio.run(main())
    assert service.fetch_offsets(group).offsets() == {(topic, p): 50 + p for p in range(4)}


# ------------------------------------------------------------ librdkafka


def test_a_confluent_kafka_consumer_commits_through_the_listener(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group = new_topic(service, 3), unique("rd-direct")
    consumer = Consumer({
        "bootstrap.servers": gateway.bootstrap, "group.id": group,
        "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS, "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    try:
        consumer.subscribe([topic])
        wait_until(lambda: len(consumer.assignment()) == 3, lambda: consumer.poll(0.2), "librdkafka assigned")
        assert serving_listener(service, group)["served"].get(JOIN_GROUP, 0) >= 1  # joined directly
        consumer.commit(offsets=[CkPartition(topic, 2, 42)], asynchronous=False)
        (read,) = consumer.committed([CkPartition(topic, 2)], timeout=TIMEOUT_S)
        assert read.offset == 42
        assert service.fetch_offsets(group).offsets() == {(topic, 2): 42}
    finally:
        consumer.close()
    assert service.describe_groups([group])[0].state == "Empty"


# ------------------------------------------------------------ failover


class KafkaPythonCommitter:
    """A kafka-python consumer of partition 0 of `topic` that commits when asked."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.tp = KpPartition(topic, 0)
        self.consumer = kp_consumer(
            topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS, request_timeout_ms=30_000,
        )

    def assigned(self) -> bool:
        self.consumer.poll(100)
        return bool(self.consumer.assignment())

    def commit(self, offset: int) -> None:
        self.consumer.commit({self.tp: KpOffset(offset, "", -1)}, timeout_ms=int(TIMEOUT_S * 1000))

    def committed(self) -> int:
        return self.consumer.committed(self.tp)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.consumer.close()


class ConfluentCommitter:
    """The same with confluent-kafka (librdkafka)."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.topic = topic
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS, "enable.auto.commit": False,
        })
        self.consumer.subscribe([topic])

    def assigned(self) -> bool:
        self.consumer.poll(0.1)
        return bool(self.consumer.assignment())

    def commit(self, offset: int) -> None:
        self.consumer.commit(offsets=[CkPartition(self.topic, 0, offset)], asynchronous=False)

    def committed(self) -> int:
        (read,) = self.consumer.committed([CkPartition(self.topic, 0)], timeout=TIMEOUT_S)
        return read.offset  # type: ignore[no-any-return]

    def close(self) -> None:
        self.consumer.close()


COMMITTERS = {"kafka-python": KafkaPythonCommitter, "confluent-kafka": ConfluentCommitter}


def commit_through(committer: Any, offsets: range, acked: list[int]) -> None:
    """Commit each offset, again until acknowledged (a commit refused during the fault is not)."""
    for offset in offsets:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                committer.commit(offset)
                break
            except Exception as exc:  # each client's own error type; retried below
                assert time.monotonic() < deadline, f"commit {offset} never acknowledged: {exc!r}"
                # A member the new leader expired meanwhile rejoins while its consumer polls.
                committer.assigned()
        acked.append(offset)


@pytest.mark.parametrize("client", sorted(COMMITTERS))
@pytest.mark.parametrize("fault", ["kill", "reassign"])
def test_a_kafka_client_follows_its_leader_killed_or_moved_mid_commit_and_loses_no_commit(
    service: Client, gateway: GatewayThread, fault: str, client: str
) -> None:
    topic, group = new_topic(service, 1), unique(f"{client}-{fault}")
    committer = COMMITTERS[client](gateway.bootstrap, topic, group)
    acked: list[int] = []
    try:
        wait_until(committer.assigned, lambda: None, f"{client} assigned")
        commit_through(committer, range(1, 6), acked)
        before = serving_listener(service, group)
        partition = service.partition_for(group)
        leader = service.leader(partition)
        if fault == "kill":
            pid = ray.get(leader.info.remote(), timeout=TIMEOUT_S)["pid"]
            ray.kill(leader, no_restart=True)
            # Its process answers on its sockets until it ends, after ray.kill returned.
            wait_until(lambda: ended(pid), lambda: time.sleep(0.01), "the killed leader's process ended")
        else:
            ray.get(service.controller.reassign.remote(partition), timeout=TIMEOUT_S)
        # The next commits reach the new leader once the client found it again.
        started = time.monotonic()
        commit_through(committer, range(6, 9), acked)
        followed_s = time.monotonic() - started
        after = serving_listener(service, group)
        assert after["node_id"] != before["node_id"]
        # The commits after the fault reached the new leader's listener, not the gateway.
        assert after["served"].get(OFFSET_COMMIT, 0) >= 3, after
        assert service.fetch_offsets(group).offsets() == {(topic, 0): 8}
        # The client reads it back from the new leader (once it rejoined, if its session expired meanwhile).
        wait_until(lambda: committer.committed() == 8, committer.assigned, f"{client} reads its commit back")
    finally:
        committer.close()
    assert acked == list(range(1, 9))
    assert service.fetch_offsets(group).offsets() == {(topic, 0): 8}
    print(f"{client}, {fault}: committed through the new leader {followed_s:.2f} s after the fault")
