"""Real Kafka clients, written by others, on the topic side of a gateway on
127.0.0.1 in front of the session's service (tests/conftest.py): offsets for a
time through aiokafka, kafka-python and librdkafka (gateway/handlers/offsets.py),
and producers, idempotent or not, refused on each write (gateway/handlers/data.py).

Each test uses its own topic; every client is closed before the test ends."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import PolicyViolationError as AioPolicyViolation
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import KafkaError, Producer
from confluent_kafka import TopicPartition as CkPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpPartition
from kafka.errors import PolicyViolationError as KpPolicyViolation

from actors import Client

from tests.gateway.gateway_support import GatewayThread
from tests.gateway.kafka_support import service_gateway

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def gateway(service: Client) -> Iterator[GatewayThread]:
    yield from service_gateway()


@pytest.fixture
def topic(service: Client) -> str:
    name = f"produce-{uuid.uuid4().hex[:8]}"
    service.create_topic(name, 1)
    return name


@pytest.fixture
def sampled(service: Client) -> tuple[str, int]:
    """(topic, base ms) of a two-partition topic: partition 0's end offset was 10 at
    base, 25 at base + 2000 and 40 at base + 4000 (an hour ago, inside the history's
    retention); partition 1 was never written."""
    name = f"times-{uuid.uuid4().hex[:8]}"
    service.create_topic(name, 2)
    base = int(time.time() * 1000) - 3_600_000
    for at_ms, end in ((base, 10), (base + 2000, 25), (base + 4000, 40)):
        service.set_end_offsets({(name, 0): end}, at_ms=at_ms)
    return name, base


def test_aiokafka_offsets_for_times(gateway: GatewayThread, sampled: tuple[str, int]) -> None:
    topic, base = sampled
    written, empty = AioPartition(topic, 0), AioPartition(topic, 1)

    async def main() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=gateway.bootstrap, request_timeout_ms=10_000)
        await consumer.start()
        try:
            found = await consumer.offsets_for_times({written: base + 1000, empty: base})
            assert (found[written].offset, found[written].timestamp) == (10, base + 2000)
            assert found[empty] is None  # nothing written: Kafka's "no such message"
            # After the last sample no record is known to be that recent.
            assert (await consumer.offsets_for_times({written: base + 5000}))[written] is None
        finally:
            await consumer.stop()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))


def test_kafka_python_offsets_for_times(gateway: GatewayThread, sampled: tuple[str, int]) -> None:
    topic, base = sampled
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap, request_timeout_ms=10_000)
    try:
        first, last = KpPartition(topic, 0), KpPartition(topic, 1)
        found = consumer.offsets_for_times({first: base + 3000, last: base})
        assert (found[first].offset, found[first].timestamp) == (25, base + 4000)
        assert found[last] is None
    finally:
        consumer.close()


def test_librdkafka_admin_list_offsets_for_a_timestamp(
    gateway: GatewayThread, sampled: tuple[str, int]
) -> None:
    topic, base = sampled
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    asked = {
        CkPartition(topic, 0): OffsetSpec.for_timestamp(base - 1),
        CkPartition(topic, 1): OffsetSpec.for_timestamp(base),
    }
    answers = {tp.partition: f.result(TIMEOUT_S) for tp, f in admin.list_offsets(asked).items()}
    assert (answers[0].offset, answers[0].timestamp) == (0, base)  # before every sample: the start
    assert (answers[1].offset, answers[1].timestamp) == (-1, -1)


# ------------------------------------------------------------ producers


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_librdkafka_producer_gets_policy_violation_for_each_write(
    gateway: GatewayThread, topic: str, idempotent: bool
) -> None:
    errors: list[KafkaError] = []
    reports: list[KafkaError | None] = []
    producer = Producer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "enable.idempotence": idempotent,
            "error_cb": errors.append,
        }
    )
    for value in (b"a", b"b"):
        producer.produce(topic, value, callback=lambda err, _: reports.append(err))
        assert producer.flush(TIMEOUT_S) == 0
    producer.produce(topic, b"c", callback=lambda err, _: reports.append(err))  # refused, not fenced
    assert producer.flush(TIMEOUT_S) == 0
    assert [r.code() if r else None for r in reports] == [KafkaError.POLICY_VIOLATION] * 3
    assert not [e for e in errors if e.fatal()]


def test_an_idempotent_aiokafka_producer_gets_policy_violation_for_each_write(
    gateway: GatewayThread, topic: str
) -> None:
    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=gateway.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for value in (b"a", b"b"):
                with pytest.raises(AioPolicyViolation):
                    await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))


def test_kafka_pythons_default_idempotent_producer_is_told_why(gateway: GatewayThread, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=gateway.bootstrap)  # idempotent by default, as Java's
    try:
        for value in (b"a", b"b"):
            with pytest.raises(KpPolicyViolation, match="holds no topic data"):
                producer.send(topic, value).get(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
