"""The topic registry's store over a real partition-0 `Shard` in this process (no Ray).

What the partition actor does with a service state request, minus the Ray
call: the shard handles it, and its records go through the log's codec into
a list of payloads, so `restarted()` (a new shard replaying that log) is
what a new leader, a promoted follower or a full restart would hold.
"""

from __future__ import annotations

from collections.abc import Iterable

from actors.client.service_store import Entries, check_write, read_entries
from coordinator.service_state import ServiceEntry, ServiceStateReadRequest, ServiceStateWriteRequest
from coordinator.shard import Shard
from log.codec import decode_records, encode_payload


class ShardStore:
    def __init__(self, payloads: list[bytes] | None = None) -> None:
        self.payloads = payloads if payloads is not None else []
        self.shard = Shard(partition=0)
        for payload in self.payloads:
            self.shard.replay_many(decode_records(payload))
        self.writes = 0

    def _handle(self, request: object) -> object:
        result = self.shard.handle(request, now_ms=0)  # type: ignore[arg-type]
        if result.records:
            self.payloads.append(encode_payload(result.records))
        (_, response), = result.responses
        return response

    def read(self, kinds: Iterable[str]) -> tuple[Entries, str]:
        return read_entries(self._handle(ServiceStateReadRequest(tuple(kinds))))

    def write(self, writer: str, entries: Iterable[ServiceEntry], claim: bool = False) -> None:
        self.writes += 1
        check_write(self._handle(ServiceStateWriteRequest(writer, claim, tuple(entries))).error)  # type: ignore[attr-defined]

    def restarted(self) -> ShardStore:
        """The same log, replayed by a new shard."""
        return ShardStore(list(self.payloads))
