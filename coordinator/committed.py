"""Committed offsets beside uncommitted ones: OffsetFetch reads at the committed end.

Kafka's new coordinator answers OffsetFetch from a snapshot of its timeline
state at the last committed offset, so a read never waits for a write that
is not committed, and never sees one. raygroups' shard holds one state, the
newest: this module keeps, per offset key written above the committed end,
the value it had before each of those writes (`Result.offsets_before`, in
the order of the offset records), so the runtime can turn an OffsetFetch
answer computed from the newest state into the committed one (`rewrite`).
Entries go as the committed end passes them (`on_committed`). A read then
waits only for records of its group that the log held uncommitted when the
partition was loaded (their earlier values are unknown) and for the leader's
confirmation, never for a commit below min ISR that may not happen.

Pure: log offsets in, values out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import replace

from coordinator.errors import Errors
from coordinator.messages import INVALID_OFFSET, FetchedOffset, OffsetFetchRequest, OffsetFetchResponse
from coordinator.records import OffsetCommitKey, OffsetCommitValue, Record

Before = OffsetCommitValue | None


class CommittedOffsets:
    def __init__(self) -> None:
        # key -> (end offset of an uncommitted write of it, the value before that write), oldest first
        self._undo: dict[OffsetCommitKey, deque[tuple[int, Before]]] = {}
        # (end offset, key) of every entry, in log order: what `on_committed` drops
        self._by_end: deque[tuple[int, OffsetCommitKey]] = deque()

    def __bool__(self) -> bool:
        return bool(self._undo)

    def on_written(self, writes: Iterable[tuple[OffsetCommitKey, int, Before]]) -> None:
        """Offset records written above the committed end: (key, its end offset, the value before)."""
        undo, by_end = self._undo, self._by_end
        for key, end, before in writes:
            entries = undo.get(key)
            if entries is None:
                entries = undo[key] = deque()
            entries.append((end, before))
            by_end.append((end, key))

    def on_committed(self, end: int) -> None:
        """Everything below `end` is committed: its writes are the committed state now."""
        undo, by_end = self._undo, self._by_end
        while by_end and by_end[0][0] <= end:
            _, key = by_end.popleft()
            entries = undo[key]
            entries.popleft()
            if not entries:
                del undo[key]

    def clear(self) -> None:
        self._undo.clear()
        self._by_end.clear()

    def rewrite(self, request: OffsetFetchRequest, response: OffsetFetchResponse) -> OffsetFetchResponse:
        """`response`, computed from the newest state, as the committed state answers it."""
        if not self._undo or response.error is not Errors.NONE:
            return response
        group, undo = request.group_id, self._undo
        if request.partitions is not None:
            parts = []
            for fetched in response.partitions:
                entries = undo.get(OffsetCommitKey(group, fetched.topic, fetched.partition))
                parts.append(fetched if entries is None else _fetched(fetched.topic, fetched.partition,
                                                                      entries[0][1]))
            return replace(response, partitions=tuple(parts))
        current = {(p.topic, p.partition): p for p in response.partitions}
        for key, entries in undo.items():
            if key.group_id == group:
                before = entries[0][1]
                if before is None:
                    current.pop((key.topic, key.partition), None)
                else:
                    current[(key.topic, key.partition)] = _fetched(key.topic, key.partition, before)
        return replace(response, partitions=tuple(current.values()))


def _fetched(topic: str, partition: int, value: Before) -> FetchedOffset:
    if value is None:
        return FetchedOffset(topic, partition, INVALID_OFFSET, -1, "")
    return FetchedOffset(topic, partition, value.offset, value.leader_epoch, value.metadata)


def offset_writes(
    records: Sequence[Record], first_end: int, before: Sequence[Before]
) -> list[tuple[OffsetCommitKey, int, Before]]:
    """Pair a Result's offset records (in order) with their end offsets and earlier values;
    `first_end` is the end offset of the Result's first record."""
    writes = []
    befores = iter(before)
    for index, record in enumerate(records):
        key = record.key
        if type(key) is OffsetCommitKey:
            writes.append((key, first_end + index, next(befores)))
    return writes
