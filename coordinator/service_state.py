"""Service state: the service-wide facts kept in offsets partition 0's log.

DESIGN section 10: no service state on one node's disk alone. The topic
registry's topics, topic ids, start offsets and end-offset history (and
whatever service-wide state comes next) are entries of offsets partition
`SERVICE_STATE_PARTITION`'s log, so they are replicated, acknowledged at the
high watermark with the ISR at min.insync.replicas, recovered after a full
restart and kept hot by followers exactly as a group's records are. Kafka
keeps the same facts in its replicated metadata log (KRaft).

The core orders, fences and stores the entries; it does not read them. An
entry is `(kind, name) -> bytes`, encoded and validated by its owner (the
registry, `actors/client/topics.py`), which is the only writer.

Rules:
- Only partition `SERVICE_STATE_PARTITION` holds service state; any other
  answers NOT_COORDINATOR, as for a group it does not own.
- One writer at a time, as Kafka fences a transactional producer: a write
  with `claim=True` makes its `writer` the current one (a registry claims
  when it loads); any other write whose `writer` is not the current one is
  refused PRODUCER_FENCED and changes nothing, so a registry Ray restarted
  elsewhere can never be overwritten by the one it replaced.
- A write is all or nothing; its response is released once its records are
  durable (the write-path rule, `coordinator/runtime.py`). A read waits for
  every record written before it, like any read the runtime does not know
  the groups of.
- The writer's id is itself an entry (`WRITER_KIND`), so a reload, a
  promoted follower or a compacted log fences the same writer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from coordinator.checks import Checked, register_requests
from coordinator.errors import Errors
from coordinator.records import Record, ServiceStateKey, ServiceStateValue

SERVICE_STATE_PARTITION = 0
WRITER_KIND = "writer"
_WRITER_KEY = ServiceStateKey(WRITER_KIND, "")


@dataclass(frozen=True, slots=True)
class ServiceEntry(Checked):
    """`data` None deletes the entry."""

    kind: str
    name: str
    data: bytes | None


@dataclass(frozen=True, slots=True)
class ServiceStateWriteRequest(Checked):
    writer: str
    claim: bool
    entries: tuple[ServiceEntry, ...]


@dataclass(frozen=True, slots=True)
class ServiceStateWriteResponse:
    error: Errors


@dataclass(frozen=True, slots=True)
class ServiceStateReadRequest(Checked):
    kinds: tuple[str, ...]  # the tables to read


@dataclass(frozen=True, slots=True)
class ServiceStateReadResponse:
    error: Errors
    entries: tuple[ServiceEntry, ...] = ()
    writer: str = ""


register_requests((ServiceStateWriteRequest, ServiceStateReadRequest))

ERROR_RESPONSES: dict[type, Callable[..., object]] = {
    ServiceStateWriteRequest: lambda _request, error: ServiceStateWriteResponse(error),
    ServiceStateReadRequest: lambda _request, error: ServiceStateReadResponse(error),
}


class ServiceStateHost(Protocol):
    """What the handlers need of the shard."""

    partition: int
    service_state: dict[ServiceStateKey, bytes]

    def write(self, record: Record) -> None: ...


def replay(
    state: dict[ServiceStateKey, bytes], key: ServiceStateKey, value: ServiceStateValue | None
) -> None:
    if value is None:
        state.pop(key, None)
    else:
        state[key] = value.data


def current_writer(state: dict[ServiceStateKey, bytes]) -> str:
    return state.get(_WRITER_KEY, b"").decode("utf-8")


def handle_write(
    shard: ServiceStateHost, request: ServiceStateWriteRequest, _token: Any
) -> ServiceStateWriteResponse:
    if shard.partition != SERVICE_STATE_PARTITION:
        return ServiceStateWriteResponse(Errors.NOT_COORDINATOR)
    if any(entry.kind == WRITER_KIND for entry in request.entries) or not request.writer:
        return ServiceStateWriteResponse(Errors.INVALID_REQUEST)
    if request.claim:
        if request.writer != current_writer(shard.service_state):
            shard.write(Record(_WRITER_KEY, ServiceStateValue(request.writer.encode("utf-8"))))
    elif request.writer != current_writer(shard.service_state):
        return ServiceStateWriteResponse(Errors.PRODUCER_FENCED)
    for entry in request.entries:
        key = ServiceStateKey(entry.kind, entry.name)
        if entry.data is not None:
            shard.write(Record(key, ServiceStateValue(entry.data)))
        elif key in shard.service_state:
            shard.write(Record(key, None))
    return ServiceStateWriteResponse(Errors.NONE)


def handle_read(
    shard: ServiceStateHost, request: ServiceStateReadRequest, _token: Any
) -> ServiceStateReadResponse:
    if shard.partition != SERVICE_STATE_PARTITION:
        return ServiceStateReadResponse(Errors.NOT_COORDINATOR)
    kinds = set(request.kinds)
    state = shard.service_state
    entries = tuple(ServiceEntry(k.kind, k.name, data) for k, data in state.items() if k.kind in kinds)
    return ServiceStateReadResponse(Errors.NONE, entries, current_writer(shard.service_state))


HANDLERS: dict[type, Callable[..., Any]] = {
    ServiceStateWriteRequest: handle_write,
    ServiceStateReadRequest: handle_read,
}
