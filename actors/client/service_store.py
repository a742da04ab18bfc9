"""The replicated store of service-wide state: entries of offsets partition 0's log.

The topic registry (`actors/client/topic_registry.py`) keeps its state here,
not on its node's disk (DESIGN section 10): `ReplicatedStore` sends the
service state requests of `coordinator/service_state.py` to partition 0's
leader through an ordinary `Client`, so a write is acknowledged once it is
durable on min.insync.replicas replicas, a read sees every acknowledged
write, and both ride over a failover of partition 0 as group requests do
(NOT_COORDINATOR, a dead leader: refresh and retry until the deadline).

Errors: `StoreFencedError` when another writer claimed the store since this
one did (the registry was replaced; it must serve no more);
`CoordinatorUnavailableError` (actors/client/retry.py) when partition 0 did
not answer in time: a write may or may not have been applied, so its
caller must read the store again before it trusts what it holds.

The client is imported at first use, not with this module: every process that
holds a handle of the topic registry imports the registry's module (Ray loads
an actor's class to build its handle), every partition leader among them, and
the client's code is some 1.3 MiB of an idle leader's memory (docs/capacity.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from coordinator.errors import Errors
from coordinator.service_state import (
    SERVICE_STATE_PARTITION,
    ServiceEntry,
    ServiceStateReadRequest,
    ServiceStateWriteRequest,
)

Entries = dict[tuple[str, str], bytes]  # (kind, name) -> data


class StoreFencedError(RuntimeError):
    """A newer writer claimed the store."""


class StoreError(RuntimeError):
    """Partition 0 refused the request (not a retriable coordinator error)."""


class ServiceStore(Protocol):
    def read(self, kinds: Iterable[str]) -> tuple[Entries, str]:
        """Every entry of `kinds`, and the current writer ('' if none ever claimed)."""
        ...

    def write(self, writer: str, entries: Iterable[ServiceEntry], claim: bool = False) -> None:
        """Apply `entries` all or nothing (`claim`: `writer` becomes the writer first)."""
        ...


def check_write(error: Errors) -> None:
    if error is Errors.PRODUCER_FENCED:
        raise StoreFencedError("another topic registry claimed the service state: this one was replaced")
    if error is not Errors.NONE:
        raise StoreError(f"service state write refused: {error.name}")


def read_entries(response: Any) -> tuple[Entries, str]:
    if response.error is not Errors.NONE:
        raise StoreError(f"service state read refused: {response.error.name}")
    return {(e.kind, e.name): e.data for e in response.entries}, response.writer


class ReplicatedStore:
    """The store, through a client of the service in `namespace` (made at first use)."""

    def __init__(self, namespace: str, timeout_s: float = 20.0) -> None:
        self.namespace = namespace
        self.timeout_s = timeout_s
        self._client: Any = None

    def _send(self, request: Any) -> Any:
        if self._client is None:
            from actors.client.client import Client, controller_handle

            self._client = Client(controller_handle(self.namespace), timeout_s=self.timeout_s, service=True)
        return self._client.send(request, partition=SERVICE_STATE_PARTITION)

    def read(self, kinds: Iterable[str]) -> tuple[Entries, str]:
        return read_entries(self._send(ServiceStateReadRequest(tuple(kinds))))

    def write(self, writer: str, entries: Iterable[ServiceEntry], claim: bool = False) -> None:
        check_write(self._send(ServiceStateWriteRequest(writer, claim, tuple(entries))).error)
