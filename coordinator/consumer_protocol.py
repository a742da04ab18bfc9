"""Kafka's ConsumerProtocol byte layouts: the Subscription a member sends in JoinGroup
and the Assignment the leader returns in SyncGroup.

Mirrors `org.apache.kafka.clients.consumer.internals.ConsumerProtocol` and the
`ConsumerProtocolSubscription` / `ConsumerProtocolAssignment` message schemas
(versions 0..3, never flexible), so Kafka tools and clients read our bytes and
we read theirs. Every message starts with an int16 version. Primitives are
big-endian: STRING is int16 length + UTF-8, a nullable STRING has length -1,
BYTES is int32 length (-1 for null), an ARRAY is an int32 count then items.

Subscription: v0 topics + user_data; v1 adds owned_partitions; v2 adds
generation_id (int32, default -1); v3 adds rack_id (nullable string).
Assignment: assigned_partitions + user_data in every version.

Rules, as Java's:
- Encoding sorts the topics and the owned partitions (topic, then partition)
  and groups owned partitions by topic; an assignment groups its partitions
  by topic in order of first appearance and keeps their order.
- Encoding at a version that lacks a field drops it (the schema marks those
  fields ignorable); a version above 3 is written as 3.
- Decoding reads a version above 3 with the v3 layout and ignores trailing
  bytes, so newer clients that append fields stay readable.
- Malformed or truncated input raises ValueError naming the field; nothing
  else escapes (no IndexError, no struct.error). Java replaces invalid UTF-8
  with U+FFFD; we reject it, since no valid topic name contains it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from coordinator.topic_partition import TopicPartition, java_string_key, java_topic_partition_key

PROTOCOL_TYPE = "consumer"
# ConsumerProtocolSubscription/Assignment.HIGHEST_SUPPORTED_VERSION (they must match).
SUBSCRIPTION_VERSION_MAX = 3
ASSIGNMENT_VERSION_MAX = 3
DEFAULT_GENERATION_ID = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT16_MAX = 0x7FFF
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = DEFAULT_GENERATION_ID
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


class KafkaWriter:
    """Appends Kafka protocol primitives; `getvalue()` returns the bytes so far."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def getvalue(self) -> bytes:
        return b"".join(self._parts)

    def int16(self, value: int) -> None:
        if not -0x8000 <= value <= _INT16_MAX:
            raise ValueError(f"{value} does not fit an int16")
        self._parts.append(_INT16.pack(value))

    def int32(self, value: int) -> None:
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise ValueError(f"{value} does not fit an int32")
        self._parts.append(_INT32.pack(value))

    def string(self, value: str | None) -> None:
        if value is None:
            self.int16(-1)
            return
        data = value.encode("utf-8")
        if len(data) > _INT16_MAX:
            raise ValueError(f"string of {len(data)} bytes is longer than {_INT16_MAX}")
        self.int16(len(data))
        self._parts.append(data)

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is None:
            self.int32(-1)
            return
        self.int32(len(value))
        self._parts.append(bytes(value))

    def array(self, items: Sequence[T], write_item: Callable[[T], None]) -> None:
        self.int32(len(items))
        for item in items:
            write_item(item)

    def int32_array(self, values: Sequence[int]) -> None:
        self.array(values, self.int32)


class KafkaReader:
    """Reads Kafka protocol primitives from `data`, raising ValueError on bad input.

    `utf8_errors` is the codec error policy for strings: "strict" rejects
    invalid UTF-8, "replace" decodes it as Java does.
    """

    __slots__ = ("_data", "_pos", "_what", "_utf8_errors")

    def __init__(self, data: bytes, what: str, utf8_errors: str = "strict") -> None:
        self._data = bytes(data)
        self._pos = 0
        self._what = what
        self._utf8_errors = utf8_errors

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def _fail(self, field: str, problem: str) -> ValueError:
        return ValueError(f"malformed {self._what}: {field}: {problem} (at byte {self._pos})")

    def _take(self, size: int, field: str) -> bytes:
        if size > self.remaining:
            raise self._fail(field, f"needs {size} bytes, only {self.remaining} left")
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int16(self, field: str) -> int:
        value: int = _INT16.unpack(self._take(2, field))[0]
        return value

    def int32(self, field: str) -> int:
        value: int = _INT32.unpack(self._take(4, field))[0]
        return value

    def string(self, field: str) -> str:
        value = self.nullable_string(field)
        if value is None:
            raise self._fail(field, "non-nullable string is null")
        return value

    def nullable_string(self, field: str) -> str | None:
        length = self.int16(field)
        if length < -1:
            raise self._fail(field, f"invalid string length {length}")
        if length == -1:
            return None
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8", self._utf8_errors)
        except UnicodeDecodeError as exc:
            raise self._fail(field, f"invalid UTF-8 ({exc.reason})") from None

    def nullable_bytes(self, field: str) -> bytes | None:
        length = self.int32(field)
        if length < -1:
            raise self._fail(field, f"invalid bytes length {length}")
        if length == -1:
            return None
        return self._take(length, field)

    def array(self, field: str, read_item: Callable[[], T], min_item_size: int = 1) -> list[T]:
        count = self.int32(field)
        if count < 0:
            raise self._fail(field, f"non-nullable array has count {count}")
        if count * min_item_size > self.remaining:
            raise self._fail(field, f"array of {count} items cannot fit in {self.remaining} bytes")
        return [read_item() for _ in range(count)]

    def int32_array(self, field: str) -> list[int]:
        return self.array(field, lambda: self.int32(field), min_item_size=4)


def write_topic_partitions(writer: KafkaWriter, groups: Sequence[tuple[str, Sequence[int]]]) -> None:
    """An ARRAY of (STRING topic, ARRAY int32 partitions), the shape every protocol here uses."""

    def write_group(group: tuple[str, Sequence[int]]) -> None:
        writer.string(group[0])
        writer.int32_array(group[1])

    writer.array(groups, write_group)


def read_topic_partitions(reader: KafkaReader, field: str) -> list[TopicPartition]:
    """Reads the layout of `write_topic_partitions`, flattened in wire order."""

    def read_group() -> list[TopicPartition]:
        topic = reader.string(f"{field}.topic")
        return [TopicPartition(topic, p) for p in reader.int32_array(f"{field}.partitions")]

    # Smallest group: int16 topic length + int32 partition count.
    groups = reader.array(field, read_group, min_item_size=6)
    return [tp for group in groups for tp in group]


def group_by_topic_in_order(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Groups partitions by topic in order of first appearance, keeping partition order."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return list(by_topic.items())


def _clamp_version(version: int, highest: int, what: str) -> int:
    if version < 0:
        raise ValueError(f"unsupported {what} version {version}")
    return min(version, highest)


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION_MAX) -> bytes:
    """Java's `ConsumerProtocol.serializeSubscription(subscription, version)`."""
    version = _clamp_version(version, SUBSCRIPTION_VERSION_MAX, "subscription")
    writer = KafkaWriter()
    writer.int16(version)
    writer.array(sorted(sub.topics, key=java_string_key), writer.string)
    writer.nullable_bytes(sub.user_data)
    if version >= 1:
        owned = sorted(sub.owned_partitions, key=java_topic_partition_key)
        # Sorted, so grouping by first appearance groups consecutive runs as Java does.
        write_topic_partitions(writer, group_by_topic_in_order(owned))
    if version >= 2:
        writer.int32(sub.generation_id)
    if version >= 3:
        writer.string(sub.rack_id)
    return writer.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    """Java's `ConsumerProtocol.deserializeSubscription(buffer)`; see the module rules."""
    reader = KafkaReader(data, "consumer subscription")
    version = _clamp_version(reader.int16("version"), SUBSCRIPTION_VERSION_MAX, "subscription")
    topics = reader.array("topics", lambda: reader.string("topics[]"), min_item_size=2)
    user_data = reader.nullable_bytes("user_data")
    owned: list[TopicPartition] = []
    generation_id = DEFAULT_GENERATION_ID
    rack_id: str | None = None
    if version >= 1:
        owned = read_topic_partitions(reader, "owned_partitions")
    if version >= 2:
        generation_id = reader.int32("generation_id")
    if version >= 3:
        rack_id = reader.nullable_string("rack_id")
    return Subscription(tuple(topics), user_data, tuple(owned), generation_id, rack_id)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION_MAX) -> bytes:
    """Java's `ConsumerProtocol.serializeAssignment(assignment, version)`."""
    version = _clamp_version(version, ASSIGNMENT_VERSION_MAX, "assignment")
    writer = KafkaWriter()
    writer.int16(version)
    write_topic_partitions(writer, group_by_topic_in_order(assignment.partitions))
    writer.nullable_bytes(assignment.user_data)
    return writer.getvalue()


def decode_assignment(data: bytes) -> Assignment:
    """Java's `ConsumerProtocol.deserializeAssignment(buffer)`; see the module rules."""
    reader = KafkaReader(data, "consumer assignment")
    _clamp_version(reader.int16("version"), ASSIGNMENT_VERSION_MAX, "assignment")
    partitions = read_topic_partitions(reader, "assigned_partitions")
    user_data = reader.nullable_bytes("user_data")
    return Assignment(tuple(partitions), user_data)
