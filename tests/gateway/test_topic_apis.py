"""The topic side of the gateway on raw Kafka frames, against the session's service:
Metadata, ListOffsets, Fetch and OffsetForLeaderEpoch answer from the topic
registry, at old and new versions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from actors import Client
from gateway.direct.node_ids import is_listener
from gateway.handlers import data

from tests.gateway.gateway_support import GatewayThread
from tests.gateway.kafka_support import exchange, kio_request, service_gateway

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def gateway(service: Client) -> Iterator[GatewayThread]:
    yield from service_gateway()


@pytest.fixture
def topic(service: Client) -> str:
    """A topic of 3 partitions: start offsets 2, 0, 0 and end offsets 10, 20, 0."""
    name = f"topic-{uuid.uuid4().hex[:8]}"
    service.create_topic(name, 3)
    service.set_end_offsets({(name, 0): 10, (name, 1): 20})
    service.set_start_offsets({(name, 0): 2})
    return name


def metadata(version: int, names: list[str] | None) -> object:
    topics = None if names is None else [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
    return kio_request(
        3, version, topics=topics, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )


@pytest.mark.parametrize("version", [1, 5, 12])
def test_metadata_lists_the_gateway_as_broker_and_leader_and_unknown_topics_as_errors(
    gateway: GatewayThread, topic: str, version: int
) -> None:
    response = exchange(gateway, metadata(version, [topic, "no-such-topic"]))
    gateways = [(b.node_id, b.host, b.port) for b in response.brokers if not is_listener(b.node_id)]
    assert gateways == [(0, gateway.host, gateway.port)]
    # The other brokers are the partition leaders' Kafka listeners (gateway.direct).
    assert len(response.brokers) > 1
    assert response.controller_id == 0
    known, unknown = response.topics
    assert (known.name, known.error_code) == (topic, ErrorCode.none)
    assert [(p.partition_index, p.leader_id, p.error_code) for p in known.partitions] == [
        (0, 0, ErrorCode.none),
        (1, 0, ErrorCode.none),
        (2, 0, ErrorCode.none),
    ]
    assert (unknown.name, unknown.error_code, unknown.partitions) == (
        "no-such-topic",
        ErrorCode.unknown_topic_or_partition,
        (),
    )


def test_metadata_topic_ids_are_the_registrys_and_answer_lookups_by_id(
    service: Client, gateway: GatewayThread, topic: str
) -> None:
    first = exchange(gateway, metadata(12, [topic])).topics[0].topic_id
    every = {t.name: t.topic_id for t in exchange(gateway, metadata(12, None)).topics}
    # The id the coordinator assigns consumer groups' partitions by (KIP-848).
    assert first == every[topic] == service.topic_ids([topic])[topic] != uuid.UUID(int=0)
    stranger = uuid.uuid4()
    by_id = kio_request(
        3,
        12,
        topics=[{"name": None, "topic_id": first}, {"name": None, "topic_id": stranger}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    found, unknown = exchange(gateway, by_id).topics
    assert (found.name, found.error_code, len(found.partitions)) == (topic, ErrorCode.none, 3)
    assert (unknown.name, unknown.topic_id, unknown.error_code) == (
        None,
        stranger,
        ErrorCode.unknown_topic_id,
    )


def test_metadata_v0_with_no_topics_lists_every_topic(gateway: GatewayThread, topic: str) -> None:
    assert topic in {t.name for t in exchange(gateway, kio_request(3, 0, topics=[])).topics}
    assert exchange(gateway, metadata(1, [])).topics == ()  # v1+: an empty list asks for none


@pytest.mark.parametrize("version", [1, 3, 10])
def test_list_offsets_earliest_and_latest_come_from_the_registry(
    gateway: GatewayThread, topic: str, version: int
) -> None:
    asked = [
        {"partition_index": 0, "timestamp": -2, "current_leader_epoch": -1},
        {"partition_index": 1, "timestamp": -1, "current_leader_epoch": -1},
        {"partition_index": 7, "timestamp": -1, "current_leader_epoch": -1},
    ]
    request = kio_request(
        2,
        version,
        replica_id=-1,
        isolation_level=0,
        timeout=1000,
        topics=[{"name": topic, "partitions": asked}],
    )
    (answered,) = exchange(gateway, request).topics
    assert [(p.partition_index, p.error_code, p.offset) for p in answered.partitions] == [
        (0, ErrorCode.none, 2),
        (1, ErrorCode.none, 20),
        (7, ErrorCode.unknown_topic_or_partition, -1),
    ]


def list_offsets(version: int, topic: str, timestamps: dict[int, int]) -> Any:
    """A consumer's ListOffsets (api key 2) of `topic`: partition -> timestamp."""
    asked = [
        {"partition_index": p, "timestamp": ts, "current_leader_epoch": -1} for p, ts in timestamps.items()
    ]
    topics = [{"name": topic, "partitions": asked}]
    return kio_request(2, version, replica_id=-1, isolation_level=0, timeout=1000, topics=topics)


@pytest.fixture
def sampled(service: Client) -> tuple[str, int]:
    """(topic, base ms) of a one-partition topic whose end offset was 10 at base,
    25 at base + 2000 and 40 at base + 4000 (an hour ago, inside the history's retention)."""
    name = f"sampled-{uuid.uuid4().hex[:8]}"
    service.create_topic(name, 1)
    base = int(time.time() * 1000) - 3_600_000
    for at_ms, end in ((base, 10), (base + 2000, 25), (base + 4000, 40)):
        service.set_end_offsets({(name, 0): end}, at_ms=at_ms)
    return name, base


@pytest.mark.parametrize("version", [1, 7, 10])
@pytest.mark.parametrize(
    ("after_base_ms", "offset", "seen_after_base_ms"),
    [
        (-1, 0, 0),  # before every sample: the start; 10 records were there at base
        (0, 10, 2000),  # the end at that time; the record at 10 was seen at base + 2000
        (1999, 10, 2000),
        (3000, 25, 4000),
    ],
)
def test_list_offsets_at_a_time_is_the_reset_offset_with_the_time_its_record_was_seen(
    gateway: GatewayThread,
    sampled: tuple[str, int],
    version: int,
    after_base_ms: int,
    offset: int,
    seen_after_base_ms: int,
) -> None:
    topic, base = sampled
    response = exchange(gateway, list_offsets(version, topic, {0: base + after_base_ms}))
    (answered,) = response.topics[0].partitions
    assert (answered.error_code, answered.offset, answered.timestamp) == (
        ErrorCode.none,
        offset,
        base + seen_after_base_ms,
    )
    if version >= 4:
        assert answered.leader_epoch == 0


@pytest.mark.parametrize("version", [1, 10])
def test_list_offsets_at_or_after_the_last_sample_finds_no_record(
    gateway: GatewayThread, sampled: tuple[str, int], version: int
) -> None:
    topic, base = sampled
    response = exchange(gateway, list_offsets(version, topic, {0: base + 4000}))
    (answered,) = response.topics[0].partitions
    assert (answered.error_code, answered.offset, answered.timestamp) == (ErrorCode.none, -1, -1)
    (far,) = exchange(gateway, list_offsets(version, topic, {0: 2**62})).topics[0].partitions
    assert (far.offset, far.timestamp) == (-1, -1)


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits Fetch makes, recorded instead of slept."""
    seen: list[float] = []

    async def record(seconds: float) -> None:
        seen.append(seconds)

    monkeypatch.setattr(data, "wait", record)
    return seen


def fetch_request(version: int, max_wait_ms: int, topics: list[dict[str, Any]]) -> Any:
    """A consumer's Fetch (api key 1) of `topics`, waiting up to `max_wait_ms`."""
    return kio_request(
        1,
        version,
        replica_id=-1,
        max_wait=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=[],
        rack_id="",
        topics=topics,
    )


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_waits_max_wait_and_answers_no_records_with_the_registrys_watermarks(
    gateway: GatewayThread, topic: str, waits: list[float], version: int
) -> None:
    def part(p: int, offset: int) -> dict[str, int]:
        return {
            "partition": p,
            "fetch_offset": offset,
            "partition_max_bytes": 1 << 20,
            "current_leader_epoch": -1,
            "log_start_offset": -1,
            "last_fetched_epoch": -1,
        }

    partitions = [part(0, 5), part(1, 99), part(9, 0)]
    request = fetch_request(version, 500, [{"topic": topic, "partitions": partitions}])
    response = exchange(gateway, request)
    assert waits == [0.5]
    (answered,) = response.responses
    rows = [(p.partition_index, p.error_code, p.high_watermark, p.records) for p in answered.partitions]
    assert rows == [
        (0, ErrorCode.none, 10, b""),
        (1, ErrorCode.none, 20, b""),  # past the end: no OFFSET_OUT_OF_RANGE, just nothing yet
        (9, ErrorCode.unknown_topic_or_partition, -1, b""),
    ]
    if version >= 5:
        assert answered.partitions[0].log_start_offset == 2


def test_fetch_with_no_wait_answers_at_once(gateway: GatewayThread, topic: str, waits: list[float]) -> None:
    partitions = [{"partition": 1, "fetch_offset": 0, "partition_max_bytes": 100}]
    request = fetch_request(12, 0, [{"topic": topic, "partitions": partitions}])
    assert exchange(gateway, request).responses[0].partitions[0].high_watermark == 20
    assert waits == []


def test_offset_for_leader_epoch_ends_at_the_registrys_end_offset(gateway: GatewayThread, topic: str) -> None:
    parts = [
        {"partition": 1, "leader_epoch": 0, "current_leader_epoch": 0},
        {"partition": 5, "leader_epoch": 0},
    ]
    response = exchange(
        gateway, kio_request(23, 4, replica_id=-2, topics=[{"topic": topic, "partitions": parts}])
    )
    assert [(p.partition, p.error_code, p.end_offset) for p in response.topics[0].partitions] == [
        (1, ErrorCode.none, 20),
        (5, ErrorCode.unknown_topic_or_partition, -1),
    ]
