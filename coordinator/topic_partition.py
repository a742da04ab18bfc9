"""TopicPartition: one partition of one topic, as Kafka's `org.apache.kafka.common.TopicPartition`.

A NamedTuple so it hashes, compares and unpacks like the (topic, partition)
pair it is. Python orders strings by code point, Java by UTF-16 code unit; the
two differ only past U+FFFF, so code that must sort exactly like Java uses the
keys below.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def java_string_key(text: str) -> bytes:
    """Sort key giving Java's `String.compareTo` order (UTF-16 code units, unsigned)."""
    return text.encode("utf-16-be", "surrogatepass")


def java_topic_partition_key(tp: TopicPartition) -> tuple[bytes, int]:
    """Java's `Comparator.comparing(TopicPartition::topic).thenComparing(TopicPartition::partition)`."""
    return java_string_key(tp.topic), tp.partition
