"""The row model of the offsets log for analytics: one flat row per record.

Owns `record_to_row`, the pure mapping from a decoded log record to a tuple
in `COLUMN_NAMES` order, shared by the Spark reader (run in the executors),
the driver-side reader and the tests. Rules:
- Pure: no I/O, no clock, no Spark import; the same record always gives the
  same row. Rows are plain tuples: the cheapest thing to pickle from the
  Python workers into Spark.
- Offset commits and group metadata share one schema; a field that does not
  apply to a record type is None. A tombstone keeps its key fields, its value
  fields are None and `tombstone` is True.
- The consumer group records of KIP-848 (Kafka's key versions 3-8 and 16)
  each have a `record_type` of their own (`CONSUMER_GROUP_RECORD_TYPES`)
  and fill `group_id` and `tombstone`. ConsumerGroupMetadata also fills
  `generation` with the group epoch and `protocol_type` with "consumer";
  the member records (member metadata, target assignment member, current
  member assignment) fill `member_id` (tombstones too: it is a key field);
  a current member assignment fills `member_epoch`, the target assignment
  metadata `assignment_epoch`. What the rebalance history needs; the rest
  of their fields (subscriptions, assignments) have no columns. Offset
  commits and classic group metadata leave these three columns None, and
  jobs select records by `record_type`.
- Service state records fill `state_kind` (their key's kind: "topic",
  "routing", "admitted", ...) and `state_data` (the value's bytes, None for
  a tombstone); every other record leaves both None. The analytics read the
  handoff's entries from them (`spark_bridge.ownership`).
- New columns go at the end of `COLUMNS`, so a row's existing positions
  never move.
- Kafka's "none" sentinels (-1 leader epoch, -1 expire timestamp) become
  None, so SQL null checks and aggregates mean what they say.
- `partition` and `offset` locate the record in the offsets log;
  `topic_partition` is the partition of the committed topic.
- Time columns are milliseconds since the epoch (`batch_timestamp` is the
  append time of the record's batch).
- `arrow_schema()` is the same columns in Arrow; `row_model()` hands them
  and `record_to_row` to the log's columnar decoder (`log/columnar.py`),
  which builds the rows of offset commits itself and must give exactly the
  rows `record_to_row` gives (tests/spark/test_columnar_rows.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from coordinator.credentials import SECRET_KIND
from coordinator.records import (
    NO_LEADER_EPOCH,
    NO_TIMESTAMP,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    ServiceStateKey,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from log.columnar import RowModel

OFFSET_COMMIT = "offset_commit"
GROUP_METADATA = "group_metadata"
CONSUMER_GROUP_METADATA = "consumer_group_metadata"
CONSUMER_MEMBER_METADATA = "consumer_group_member_metadata"
CONSUMER_TARGET_ASSIGNMENT_METADATA = "consumer_group_target_assignment_metadata"
# The service's own state (topics, end offsets: coordinator/service_state.py): no group's.
SERVICE_STATE = "service_state"
CONSUMER_GROUP_RECORD_TYPES: dict[type, str] = {
    ConsumerGroupMetadataKey: CONSUMER_GROUP_METADATA,
    ConsumerGroupPartitionMetadataKey: "consumer_group_partition_metadata",
    ConsumerGroupMemberMetadataKey: CONSUMER_MEMBER_METADATA,
    ConsumerGroupTargetAssignmentMetadataKey: CONSUMER_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupTargetAssignmentMemberKey: "consumer_group_target_assignment_member",
    ConsumerGroupCurrentMemberAssignmentKey: "consumer_group_current_member_assignment",
    ConsumerGroupRegularExpressionKey: "consumer_group_regular_expression",
}
CONSUMER_PROTOCOL_TYPE = "consumer"
# Kafka's GroupType names: the rebalance history's `group_type` (classic GroupMetadata records,
# or the consumer group records of KIP-848).
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"

# (name, Spark SQL type name), in row order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("partition", "int"),
    ("offset", "long"),
    ("batch_timestamp", "long"),
    ("record_type", "string"),
    ("group_id", "string"),
    ("topic", "string"),
    ("topic_partition", "int"),
    ("committed_offset", "long"),
    ("leader_epoch", "int"),
    ("metadata", "string"),
    ("commit_timestamp", "long"),
    ("expire_timestamp", "long"),
    ("generation", "int"),
    ("protocol_type", "string"),
    ("protocol", "string"),
    ("leader", "string"),
    ("member_count", "int"),
    ("state_timestamp", "long"),
    ("tombstone", "boolean"),
    ("member_id", "string"),
    ("member_epoch", "int"),
    ("assignment_epoch", "int"),
    ("state_kind", "string"),
    ("state_data", "binary"),
)
COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in COLUMNS)

LogRow = tuple[Any, ...]

# Value fields of the other record type, all None.
_NO_GROUP_FIELDS = (None,) * 6
_NO_COMMIT_FIELDS = (None,) * 5
# member_id, member_epoch, assignment_epoch: only consumer group records have them.
_NO_CONSUMER_FIELDS = (None,) * 3
# state_kind, state_data: only service state records have them.
_NO_STATE_FIELDS = (None,) * 2
_MEMBER_KEYS = frozenset({
    ConsumerGroupMemberMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
})


def record_to_row(partition: int, offset: int, batch_timestamp_ms: int, record: Record) -> LogRow:
    """The row of `record`, found at `offset` of offsets partition `partition`."""
    key = record.key
    # The key type decides the value type (codec invariant): no check per record.
    value: Any = record.value
    if isinstance(key, OffsetCommitKey):
        return _offset_commit_row(partition, offset, batch_timestamp_ms, key, value)
    if isinstance(key, GroupMetadataKey):
        return _group_row(partition, offset, batch_timestamp_ms, key, value)
    record_type = CONSUMER_GROUP_RECORD_TYPES.get(type(key))
    if record_type is not None:
        return _consumer_group_row(partition, offset, batch_timestamp_ms, record_type, key, value)
    if type(key) is ServiceStateKey:
        head = (partition, offset, batch_timestamp_ms, SERVICE_STATE, None, None, None)
        # The Ray path's signing secret stays out of analytics (its data is never read).
        state = (key.kind, None if value is None or key.kind == SECRET_KIND else value.data)
        return head + _NO_COMMIT_FIELDS + _NO_GROUP_FIELDS + (value is None,) + _NO_CONSUMER_FIELDS + state
    raise TypeError(f"not a record key: {key!r}")


def _offset_commit_row(
    partition: int, offset: int, batch_ms: int, key: OffsetCommitKey, value: OffsetCommitValue | None
) -> LogRow:
    head = (partition, offset, batch_ms, OFFSET_COMMIT, key.group_id, key.topic, key.partition)
    if value is None:
        return head + _NO_COMMIT_FIELDS + _NO_GROUP_FIELDS + (True,) + _NO_CONSUMER_FIELDS + _NO_STATE_FIELDS
    epoch = None if value.leader_epoch == NO_LEADER_EPOCH else value.leader_epoch
    expire = None if value.expire_timestamp_ms == NO_TIMESTAMP else value.expire_timestamp_ms
    fields = (value.offset, epoch, value.metadata, value.commit_timestamp_ms, expire)
    return head + fields + _NO_GROUP_FIELDS + (False,) + _NO_CONSUMER_FIELDS + _NO_STATE_FIELDS


def _group_row(
    partition: int, offset: int, batch_ms: int, key: GroupMetadataKey, value: GroupMetadataValue | None
) -> LogRow:
    head = (partition, offset, batch_ms, GROUP_METADATA, key.group_id, None, None)
    if value is None:
        return head + _NO_COMMIT_FIELDS + _NO_GROUP_FIELDS + (True,) + _NO_CONSUMER_FIELDS + _NO_STATE_FIELDS
    fields = (
        value.generation, value.protocol_type, value.protocol, value.leader, len(value.members),
        value.current_state_timestamp_ms,
    )
    return head + _NO_COMMIT_FIELDS + fields + (False,) + _NO_CONSUMER_FIELDS + _NO_STATE_FIELDS


def _consumer_group_row(
    partition: int, offset: int, batch_ms: int, record_type: str, key: Any, value: Any
) -> LogRow:
    head = (partition, offset, batch_ms, record_type, key.group_id, None, None)
    group_fields: tuple[Any, ...] = _NO_GROUP_FIELDS
    value_type = type(value)
    if value_type is ConsumerGroupMetadataValue:
        group_fields = (value.epoch, CONSUMER_PROTOCOL_TYPE, None, None, None, None)
    member_id = key.member_id if type(key) in _MEMBER_KEYS else None
    member_epoch = value.member_epoch if value_type is ConsumerGroupCurrentMemberAssignmentValue else None
    assignment_epoch = (
        value.assignment_epoch if value_type is ConsumerGroupTargetAssignmentMetadataValue else None
    )
    return (
        head + _NO_COMMIT_FIELDS + group_fields + (value is None, member_id, member_epoch, assignment_epoch)
        + _NO_STATE_FIELDS
    )


def row_dict(row: LogRow) -> dict[str, Any]:
    """A row as {column: value}: for printing and tests."""
    return dict(zip(COLUMN_NAMES, row))


def arrow_schema(columns: tuple[tuple[str, str], ...] = COLUMNS) -> pa.Schema:
    """The Arrow schema of `columns` (the log's rows; Spark reads it as `reader.log_schema()`)."""
    import pyarrow as pa

    types = {
        "int": pa.int32(), "long": pa.int64(), "string": pa.string(), "boolean": pa.bool_(),
        "binary": pa.binary(),
    }
    return pa.schema([pa.field(name, types[kind], nullable=True) for name, kind in columns])


def ipc_stream(schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> bytes:
    """`batches` as one Arrow IPC stream: what RayDP's JVM reads from Ray's object store."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    stream: bytes = sink.getvalue().to_pybytes()
    return stream


def row_model() -> RowModel:
    """The row model for `log.columnar.arrow_batches`: these columns, `record_to_row`."""
    from log.columnar import RowModel

    return RowModel(arrow_schema(), record_to_row, OFFSET_COMMIT)
